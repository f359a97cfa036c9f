#!/usr/bin/python3
"""A sweep's runs grouped by everything but the seed: how many seeds reach a threshold.

    scripts/seed_table.py runs/recipe_mamba [--threshold 0.9] [--by KEY ...]

For each group (the grid's varying keys that vary within a task, but the seed; or --by), per task: the number of seeds,
how many reach the threshold on the validation stream (results.jsonl's "valid", the last
periodic evaluation: what a recipe is chosen on), each seed's validation accuracy, the test
stream's accuracy (results.jsonl's "final": what is reported) as mean, min and max, needle's
accuracy at its farthest distance on the test stream, and the median steps run. Prints a
Markdown table. Unfinished runs are counted apart and not averaged.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path


def load(folder):
    path = Path(folder) / "results.jsonl"
    if not path.exists():
        sys.exit(f"seed_table: {path} does not exist (run the sweep first)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def farthest(scores):
    """The task's accuracy at its farthest needle distance (acc@d), or None."""
    extra = (scores or {}).get("extra") or {}
    at = {int(k[4:]): v for k, v in extra.items() if k.startswith("acc@") and k[4:].isdigit()}  # not mqar's acc@K=k
    return at[max(at)] if at else None


def text(v, fmt="{:.3f}"):
    return "-" if v is None else fmt.format(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--by", nargs="*", help="group keys (default: the grid's varying keys but seed)")
    args = ap.parse_args()
    rows = load(args.folder)
    if args.by:
        keys = args.by
    else:  # the grid's varying keys that vary within a task (a section's own settings do not)
        keys = [k for k in rows[0].get("varying", []) if k not in ("seed", "task") and any(
            len({json.dumps(r["config"].get(k)) for r in rows if r["task"] == t}) > 1 for t in {r["task"] for r in rows})]
    groups = {}
    for r in rows:
        key = (r["task"],) + tuple(json.dumps(r["config"].get(k)) for k in keys)
        groups.setdefault(key, []).append(r)

    print(f"| task | {' | '.join(keys)} | seeds | >= {args.threshold} (valid) | valid, per seed | "
          "test mean [min, max] | test acc at the farthest d | median steps | unfinished |")
    print("|" + "---|" * (len(keys) + 8))
    for key, runs in groups.items():
        done = [r for r in runs if r["status"] in ("finished", "early_stop") and r.get("final")]
        valid = [(r["valid"] or {}).get("token_acc") for r in done]
        test = [r["final"]["token_acc"] for r in done]
        far = [farthest(r["final"]) for r in done]
        reached = sum(v is not None and v >= args.threshold for v in valid)
        cells = [key[0]] + [k.strip('"') for k in key[1:]]
        cells += [str(len(done)), f"{reached} of {len(done)}", ", ".join(text(v, "{:.2f}") for v in valid),
                  f"{text(statistics.mean(test)) if test else '-'} [{text(min(test, default=None))}, "
                  f"{text(max(test, default=None))}]",
                  ", ".join(text(v, "{:.2f}") for v in far) if any(v is not None for v in far) else "-",
                  text(statistics.median(r["step"] for r in done) if done else None, "{:.0f}"),
                  str(len(runs) - len(done))]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
