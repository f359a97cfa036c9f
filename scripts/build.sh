#!/usr/bin/env bash
# Configures and builds trilemma: scripts/build.sh [build-dir] [extra cmake args...]
# The default is a Release build (-O3, the host's vector ISA) in build/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
