#!/usr/bin/python3
"""The triangle's verdicts of several reports side by side: do other seeds flip any of them?

    scripts/verdict_table.py runs/quick runs/quick_seeds345 runs/quick_seeds678

Each folder holds a `trilemma report`'s triangle.json. Prints one markdown row per variant and
corner (and the needle+distractors control): each folder's verdict with its per-seed values, and
whether all folders agree. Exits 1 when a verdict differs between folders, or when a family's
corner (a variant without a window) or a windowed control's receptive field is not decided
(yes, no or a structural no) in one of them, so that a script can use it as a check.
"""
import json
import sys
from pathlib import Path

CORNERS = [("corners", "receptive_field"), ("corners", "linear_cost"), ("corners", "precise_matching"),
           ("controls", "needle_distractors")]
DECIDED = ("yes", "no", "no (structural)")


def load(folder):
    path = Path(folder) / "triangle.json"
    try:
        return {v["label"]: v for v in json.loads(path.read_text())["variants"]}
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{path}: not a triangle.json of `trilemma report` ({e})")


def cell(variant, group, corner):
    c = (variant or {}).get(group, {}).get(corner)
    if not c:
        return None, "-"
    values = ", ".join(f"{x['value']:.2f}" for x in c.get("values", []))
    return c["verdict"], c["verdict"] + (f" ({values})" if values else "")


def main():
    folders = sys.argv[1:]
    if len(folders) < 1:
        sys.exit(__doc__)
    reports = [load(f) for f in folders]
    labels = list(dict.fromkeys(label for r in reports for label in r))
    print("| variant | corner | " + " | ".join(folders) + " | same |")
    print("|---|---|" + "---|" * len(folders) + "---|")
    ok = True
    for label in labels:
        for group, corner in CORNERS:
            cells = [cell(r.get(label), group, corner) for r in reports]
            verdicts = {v for v, _ in cells}
            same = len(verdicts) == 1
            decided = all(v in DECIDED for v, _ in cells)
            windowed = any((r.get(label) or {}).get("window", 0) for r in reports)
            required = group == "corners" and (not windowed or corner == "receptive_field")
            ok = ok and same and (decided or not required)
            print(f"| {label} | {corner} | " + " | ".join(t for _, t in cells) +
                  f" | {'yes' if same else 'NO'} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
