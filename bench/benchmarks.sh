#!/usr/bin/env bash
# Regenerates docs/BENCHMARKS.md and docs/benchmarks.jsonl on a quiet machine (about 50 minutes
# with the options below on 2 cores): the busy-machine, decoding, profile and MPI sections (bench/sections.py), then the
# sweep against PyTorch (bench/vs_torch.py), which writes the file with the sections appended.
# The PyTorch 2 and JAX anchors run from the venv bench/anchors_venv.sh creates first (from PyPI,
# pinned versions, under build/bench-venv); without it they are reported absent.
#   bench/benchmarks.sh [vs_torch.py options, e.g. --rounds 3 --steps 5 --plain-rounds 1
#                       --plain-configs S,W,L1024,L2048 --anchors torch113,torch2,torch2-compile,jax]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/bench/anchors_venv.sh" >/dev/null || echo "anchors venv not created: PyTorch 2 and JAX reported absent" >&2
for section in busy decode profile mpi; do
  "$py" "$root/bench/sections.py" "$section" --out "$tmp/$section.md" --build "$root/build"
done
"$py" "$root/bench/vs_torch.py" --build "$root/build" "$@" --append "$tmp/decode.md" "$tmp/busy.md" "$tmp/profile.md" "$tmp/mpi.md"
