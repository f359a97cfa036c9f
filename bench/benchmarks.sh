#!/usr/bin/env bash
# One benchmark round on a quiet machine (about 50 minutes with the options below on 2 cores):
# the busy-machine, decoding, profile and MPI sections (bench/sections.py), then the sweep
# against PyTorch (bench/vs_torch.py). It writes a data folder, by default
# results/benchmarks/sweep-<UTC date>-<time>/ (--out DIR picks another): benchmarks.jsonl (every
# measurement), report.md (machine, tables, targets, commands, with the sections appended) and
# README.md (machine and command); then prints the folder's table against the fastest anchor
# (scripts/bench_table.py), the form of docs/BENCHMARKS.md's opening table, which is written by
# hand from such a folder.
# The PyTorch 2 and JAX anchors run from the venv bench/anchors_venv.sh creates first (from PyPI,
# pinned versions, under build/bench-venv); without it they are reported absent.
#   bench/benchmarks.sh [vs_torch.py options, e.g. --rounds 3 --steps 5 --plain-rounds 1
#                       --plain-configs S,W,L1024,L2048 --anchors torch113,torch2,torch2-compile,jax
#                       --out results/benchmarks/NAME]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
out=$root/results/benchmarks/sweep-$(date -u +%Y%m%d-%H%M)
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --out) out=${args[i + 1]:-$out} ;;
    --out=*) out=${args[i]#--out=} ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/bench/anchors_venv.sh" >/dev/null || echo "anchors venv not created: PyTorch 2 and JAX reported absent" >&2
for section in busy decode profile mpi; do
  "$py" "$root/bench/sections.py" "$section" --out "$tmp/$section.md" --build "$root/build"
done
"$py" "$root/bench/vs_torch.py" --build "$root/build" --out "$out" "$@" \
  --append "$tmp/decode.md" "$tmp/busy.md" "$tmp/profile.md" "$tmp/mpi.md"
"$py" "$root/scripts/bench_table.py" "$out"
