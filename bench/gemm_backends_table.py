"""The tables of bench/gemm_backends.sh from its raw JSON lines (DIR/train.jsonl, DIR/gemm.jsonl).

usage: /usr/bin/python3 bench/gemm_backends_table.py DIR
Per row and variant: the median over rounds of the row's ms per step (itself a median of steps),
the range over rounds in brackets; and the ratio to the default build, as the median over rounds
of the ratio within each round (the variants of a round ran one after another, so the load they
met was alike), with how many rounds it was at least 5% faster.
"""
import json
import statistics
import sys
from collections import defaultdict

VARIANTS = ("default", "onednn3", "mkl")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cell(values):
    med = statistics.median(values)
    return med, f"{med:.1f} ({min(values):.1f}-{max(values):.1f})"


def ratio(value, base):
    return f"{value / base:.2f}"


def train_table(rows):
    by_row = defaultdict(lambda: defaultdict(dict))  # (config, model) -> variant -> round -> ms
    order = []
    for r in rows:
        key = (r["config"], r["model"])
        if key not in by_row:
            order.append(key)
        by_row[key][r["variant"]][r["round"]] = r["ms_median"]
    print("bench train, ms per step: median over rounds (range); ratio = variant / default, the "
          "median of the per-round ratios [rounds >= 5% faster / rounds]\n")
    print("| config | model | rounds | default ms | oneDNN 3.x ms | MKL ms | oneDNN 3.x / default | MKL / default |")
    print("|---|---|---|---|---|---|---|---|")
    for key in order:
        per = by_row[key]
        base = per["default"]
        texts, ratios = [], []
        for v in VARIANTS[1:]:
            texts.append(cell(list(per[v].values()))[1])
            paired = [per[v][n] / base[n] for n in base if n in per[v]]
            faster = sum(p <= 0.95 for p in paired)
            ratios.append(f"{statistics.median(paired):.2f} [{faster}/{len(paired)}]")
        print(f"| {key[0]} | {key[1]} | {len(base)} | {cell(list(base.values()))[1]} | "
              f"{' | '.join(texts)} | {' | '.join(ratios)} |")


def gemm_table(runs):
    by_case = defaultdict(lambda: defaultdict(list))
    in_process = defaultdict(list)  # MKL / oneDNN 3.x measured interleaved in the MKL run
    order = []
    for run in runs:
        for r in run["rows"]:
            key = (r["case"], r["m"], r["n"], r["k"], r["op"])
            if key not in by_case:
                order.append(key)
            by_case[key][run["variant"]].append(r["framework"])
            if run["variant"] == "mkl":
                in_process[key].append(r["framework"] / r["onednn"])
    loads = ", ".join(f"{run['load_average']:.1f}" for run in runs)
    print("\nbench gemm, GFLOP/s of the framework's matmul: median over rounds; ratio = variant / "
          "default; the last column is MKL / raw oneDNN 3.x interleaved in one process (load "
          f"averages per run: {loads})\n")
    print("| case | m n k op | default | oneDNN 3.x | MKL | oneDNN 3.x / default | MKL / default "
          "| MKL / oneDNN 3.x, one process |")
    print("|---|---|---|---|---|---|---|---|")
    for key in order:
        per = by_case[key]
        meds = [statistics.median(per[v]) for v in VARIANTS]
        print(f"| {key[0]} | {key[1]} {key[2]} {key[3]} {key[4]} | "
              + " | ".join(f"{m:.0f}" for m in meds)
              + f" | {ratio(meds[1], meds[0])} | {ratio(meds[2], meds[0])} "
              + f"| {statistics.median(in_process[key]):.2f} |")


def main():
    out = sys.argv[1]
    train_table(load(f"{out}/train.jsonl"))
    gemm_table(load(f"{out}/gemm.jsonl"))


if __name__ == "__main__":
    main()
