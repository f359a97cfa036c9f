#!/usr/bin/python3
"""The triangle's verdicts of several reports side by side: do other seeds flip any of them?

    scripts/verdict_table.py runs/quick runs/quick_seeds345 runs/quick_seeds678

Each folder holds a `trilemma report`'s triangle.json. Prints one markdown row per variant and
corner (and the needle+distractors control): each folder's verdict with its per-seed values, and
whether all folders agree. Then a row per variant for its MQAR capacity: each folder's capacity
in pairs with its seeds' capacities, the same when every folder's lies within one step of the K
list of the others' (and none did not learn where another did). Then the measured order of the
book's grades in each folder. Exits 1 when a verdict differs between folders, when a family's
corner (a variant without a window) or a windowed control's receptive field is not decided
(yes, no or a structural no) in one of them, when a capacity is not the same, or when the
order's agreement with the book differs, so that a script can use it as a check.
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
        report = json.loads(path.read_text())
        return {v["label"]: v for v in report["variants"]}, report.get("matching_order") or {}
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{path}: not a triangle.json of `trilemma report` ({e})")


def capacity_cell(variant):
    """The capacity's position in its K list (None when it did not learn) and its text."""
    c = (variant or {}).get("capacity")
    if not c:
        return "absent", "-"
    seeds = ", ".join("-" if x.get("capacity") is None else str(x["capacity"]) for x in c.get("seeds", []))
    text = c["text"] + (f" ({seeds})" if seeds else "")
    if c.get("pairs") is None:
        return c.get("outcome"), text
    ks = [0] + list(c.get("ks", []))  # 0: below the smallest K
    return ks.index(c["pairs"]) if c["pairs"] in ks else c["pairs"], text


def same_capacity(cells):
    """Every capacity within one step of the K list of every other, or all the same word."""
    steps = [p for p, _ in cells]
    if all(isinstance(p, int) for p in steps):
        return max(steps) - min(steps) <= 1
    return len(set(steps)) == 1


def cell(variant, group, corner):
    c = (variant or {}).get(group, {}).get(corner)
    if not c:
        return None, "-"
    left_out = set(c.get("left_out", []))  # seeds that did not learn: listed in parentheses
    values = ", ".join(f"({x['value']:.2f})" if x["seed"] in left_out else f"{x['value']:.2f}"
                       for x in c.get("values", []))
    return c["verdict"], c["verdict"] + (f" ({values})" if values else "")


def main():
    folders = sys.argv[1:]
    if len(folders) < 1:
        sys.exit(__doc__)
    loaded = [load(f) for f in folders]
    reports = [r for r, _ in loaded]
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
    for label in labels:
        cells = [capacity_cell(r.get(label)) for r in reports]
        if all(p == "absent" for p, _ in cells):
            continue
        same = same_capacity(cells)
        ok = ok and same
        print(f"| {label} | capacity (pairs) | " + " | ".join(t for _, t in cells) +
              f" | {'yes' if same else 'NO'} |")
    orders = [o.get("agreement", "") for _, o in loaded]
    if any(orders):
        same = len(set(orders)) == 1
        ok = ok and same
        print("| book's grades | measured order | " + " | ".join(o or "-" for o in orders) +
              f" | {'yes' if same else 'NO'} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
