#!/usr/bin/python3
"""When MQAR's runs over a mix of pair counts stopped, and whether they were still rising.

    scripts/capacity_stops.py runs/recipe_capacity [runs/quick ...]

For each mix run of each sweep folder (results.jsonl and runs/<id>/metrics.jsonl), one markdown
row: the model, rate and seed; its status and last step; on its last validation evaluation the
accuracy at its largest K and how much that grew over the run's last fifth of steps; the first
evaluation at which the pooled token accuracy reached the run's --early-stop, against the first
at which every K did (the rule trilemma stops a mix on); and the first at which its smallest K
reached 0.9 (when it left the plateau). A run the rule stopped has reached the threshold at its
largest K; one it did not stop trained to its last step, however it was rising.
"""
import json
import sys
from pathlib import Path


def rows_of(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def first(rows, test):
    return next((r["step"] for r in rows if test(r)), None)


def main():
    folders = sys.argv[1:]
    if not folders:
        sys.exit(__doc__)
    print("| sweep | model | lr | seed | status | last step | largest K: acc on the last evaluation "
          "(rise over the last fifth) | pooled acc >= stop at | every K >= stop at | smallest K >= 0.9 at |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for folder in folders:
        for run in rows_of(Path(folder) / "results.jsonl"):
            ks = run["config"].get("num-kv-pairs")
            if run["task"] != "mqar" or not isinstance(ks, list) or len(ks) < 2:
                continue
            metrics = Path(folder) / "runs" / run["id"] / "metrics.jsonl"
            if not metrics.exists():
                continue
            valid = [r for r in rows_of(metrics) if r.get("split") == "valid"]
            if not valid:
                continue
            stop = run["config"].get("early-stop", 0)
            per_k = [f"acc@K={k}" for k in sorted(ks)]
            last = valid[-1]
            fifth = next(r for r in valid if r["step"] >= 0.8 * last["step"])
            rise = last[per_k[-1]] - fifth[per_k[-1]]
            cells = [folder, run["model"], f"{run['config']['lr']:g}", str(run["config"]["seed"]), run["status"],
                     str(last["step"]), f"{last[per_k[-1]]:.2f} ({rise:+.2f})",
                     str(first(valid, lambda r: r["acc"] >= stop) or "-"),
                     str(first(valid, lambda r: min(r[k] for k in per_k) >= stop) or "-"),
                     str(first(valid, lambda r: r[per_k[0]] >= 0.9) or "-")]
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
