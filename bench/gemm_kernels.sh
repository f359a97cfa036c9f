#!/usr/bin/env bash
# What OpenBLAS's kernel choice costs. Runs `trilemma bench gemm` three times: with the
# environment as is, with OPENBLAS_CORETYPE unset (OpenBLAS's own CPU detection), and with
# OPENBLAS_CORETYPE=Prescott (the generic kernel Debian's OpenBLAS falls back to on CPUs it does
# not know); then prints one table. oneDNN does not depend on OpenBLAS, so its column is the
# best of the three runs (less noise), as is the framework's unless it runs on --gemm openblas.
# usage: bench/gemm_kernels.sh [bench gemm options, e.g. --threads 1]
#        TRILEMMA=path/to/trilemma picks the binary (default: build/trilemma).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TRILEMMA:-$root/build/trilemma}
if [[ ! -x $bin ]]; then
  echo "gemm_kernels.sh: no trilemma binary at '$bin' (build it, or set TRILEMMA=path)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

as_is=${OPENBLAS_CORETYPE-unset}
echo "== OPENBLAS_CORETYPE as is ($as_is)" >&2
"$bin" bench gemm --json "$@" >"$tmp/1.json"
echo "== OPENBLAS_CORETYPE unset" >&2
env -u OPENBLAS_CORETYPE "$bin" bench gemm --json "$@" >"$tmp/2.json"
echo "== OPENBLAS_CORETYPE=Prescott" >&2
OPENBLAS_CORETYPE=Prescott "$bin" bench gemm --json "$@" >"$tmp/3.json"

/usr/bin/python3 - "$tmp" "$as_is" <<'EOF'
import json, sys
tmp, as_is = sys.argv[1], sys.argv[2]
runs = [json.load(open(f"{tmp}/{i}.json")) for i in (1, 2, 3)]
envs = [f"as is ({as_is})", "unset", "Prescott"]
first = runs[0]
per_run_framework = first["gemm_backend"] == "openblas"
print(f"GEMM GFLOP/s, {first['threads']} threads, median of {first['repeats']} runs "
      f"of >= {first['min_time']} s; load average per run: "
      + ", ".join(f"{r['load_average']:.2f}" for r in runs))
print("openblas = cblas_sgemm under OPENBLAS_CORETYPE " + "; ".join(
    f"{e} -> kernel {r['openblas_core']}" for e, r in zip(envs, runs)))
cores = [r["openblas_core"] for r in runs]
head = ["case", "m", "n", "k", "op"] + \
       ([f"framework[{c}]" for c in cores] if per_run_framework else ["framework"]) + ["onednn"] + \
       [f"openblas[{c}]" for c in cores] + ["generic cost"]
rows = []
for i, row in enumerate(first["rows"]):
    col = lambda key: [r["rows"][i][key] for r in runs]
    blas, onednn = col("openblas"), max(col("onednn"))
    ours = (col("framework") if per_run_framework else [max(col("framework"))]) + [onednn]
    best = max([onednn] + blas)
    rows.append([row["case"], row["m"], row["n"], row["k"], row["op"]] +
                [f"{x:.1f}" for x in ours + blas] + [f"{best / blas[2]:.1f}x"])
widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
for r in [head] + rows:
    print("  ".join(str(x).ljust(w) if j == 0 else str(x).rjust(w)
                    for j, (x, w) in enumerate(zip(r, widths))))
print("onednn" + ("" if per_run_framework else " and framework") + ": best of the three runs")
print("generic cost = best of onednn and the openblas kernels / openblas[Prescott]")
EOF
