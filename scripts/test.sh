#!/usr/bin/env bash
# The test suite: install what is missing (with PyTorch for the reference values), build
# Release, run every test with ctest. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" --test
"$root/scripts/build.sh" "$root/build"
cd "$root/build"
ctest --output-on-failure "$@"
