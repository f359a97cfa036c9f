#!/usr/bin/env bash
# The optional GEMM builds against the default one (docs/BENCHMARKS.md, "GEMM backends"): every
# `bench train` row and `bench gemm`, for three variants: the default build (Debian's oneDNN),
# and a build configured with -DTRILEMMA_DNNL_ROOT and -DTRILEMMA_MKL_ROOT on --gemm dnnl and
# --gemm mkl. Rounds alternate the variants row by row (order rotated per round); the table has
# each variant's median over rounds and its ratio to the default.
# usage: bench/gemm_backends.sh [--rounds 3] [--repeats 5] [--threads 1] [--configs ...] [--models ...]
#                               [--gemm-min-time 0.2]   (bench gemm's --min-time; --repeats is its too)
#                               [--first-round 0] [--skip-gemm]   (to add rounds to an earlier OUT)
#        DEFAULT=build/trilemma GEMM=build-gemm/trilemma pick the binaries; OUT=dir keeps the raw JSON.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
default_bin=${DEFAULT:-$root/build/trilemma}
gemm_bin=${GEMM:-$root/build-gemm/trilemma}
rounds=3 repeats=5 threads=1 gemm_min_time=0.2 first_round=0 skip_gemm=0
configs=S,W,L1024,L2048,L4096,E64,E256,E1024 models=attention,linear,mamba
while [[ $# -gt 0 ]]; do
  case $1 in
    --skip-gemm) skip_gemm=1; shift; continue ;;
    --first-round) first_round=$2 ;;
    --rounds) rounds=$2 ;;
    --repeats) repeats=$2 ;;
    --threads) threads=$2 ;;
    --configs) configs=$2 ;;
    --models) models=$2 ;;
    --gemm-min-time) gemm_min_time=$2 ;;
    *) echo "gemm_backends.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
for b in "$default_bin" "$gemm_bin"; do
  [[ -x $b ]] || { echo "gemm_backends.sh: no trilemma binary at '$b' (build it, or set DEFAULT / GEMM)" >&2; exit 2; }
done
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
touch "$out/train.jsonl" "$out/gemm.jsonl"

variants=(default onednn3 mkl)
run_variant() {  # variant, then trilemma's arguments
  local v=$1
  shift
  case $v in
    default) "$default_bin" "$@" --gemm dnnl ;;
    onednn3) "$gemm_bin" "$@" --gemm dnnl ;;
    mkl) "$gemm_bin" "$@" --gemm mkl ;;
  esac
}
tagged() {  # variant, round: adds both to each JSON line on stdin
  /usr/bin/python3 -c 'import json,sys
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line); r["variant"], r["round"] = sys.argv[1], int(sys.argv[2]); print(json.dumps(r))' "$1" "$2"
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt" >&2
for ((round = first_round; round < first_round + rounds; ++round)); do
  order=("${variants[@]:round%3}" "${variants[@]:0:round%3}")
  for v in "${order[@]}"; do
    ((skip_gemm)) && break
    echo "== round $round: bench gemm, $v" >&2
    run_variant "$v" bench gemm --threads "$threads" --repeats "$repeats" --min-time "$gemm_min_time" --json | tagged "$v" "$round" >>"$out/gemm.jsonl"
  done
  for c in ${configs//,/ }; do
    for m in ${models//,/ }; do
      for v in "${order[@]}"; do
        echo "== round $round: $c $m, $v" >&2
        run_variant "$v" bench train --configs "$c" --models "$m" --repeats "$repeats" --threads "$threads" --json |
          tagged "$v" "$round" >>"$out/train.jsonl"
      done
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt" >&2
/usr/bin/python3 "$root/bench/gemm_backends_table.py" "$out"
