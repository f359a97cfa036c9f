#!/usr/bin/env bash
# The libFuzzer targets of fuzz/ (checkpoint, config, grid, args), built with clang in build-fuzz/.
#   scripts/fuzz.sh                      each target for 600 s
#   scripts/fuzz.sh --seconds 30 grid    one target for 30 s (CI runs every target briefly)
#   scripts/fuzz.sh --merge ...          afterwards, keep the new inputs that add coverage in
#                                        fuzz/corpus/<target> (libFuzzer's -merge=1 minimises them)
# Inputs found during a run go to a scratch folder; fuzz/corpus/<target> is only read unless
# --merge. A crash, a sanitizer report or an unexpected exception stops with exit 1, the input in
# build-fuzz/artifacts/<target>/; once fixed, copy it into fuzz/regressions/<target>/, which the
# test suite replays (ctest -R fuzz_replay).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=600
merge=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    checkpoint|config|grid|args) targets+=("$1"); shift ;;
    *) echo "scripts/fuzz.sh: unknown argument '$1' (allowed: --seconds N, --merge, checkpoint, config, grid, args)" >&2; exit 2 ;;
  esac
done
[[ ${#targets[@]} -eq 0 ]] && targets=(checkpoint config grid args)

"$root/scripts/install-deps.sh" --fuzz
build="$root/build-fuzz"
# Without MPI: no target reaches it (a process not started by mpirun never initialises it).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DTRILEMMA_FUZZ=ON -DTRILEMMA_MPI=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
cmake --build "$build" -j "$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")

# One thread per process (the targets parse, they do not compute); HDF5's own leaks on corrupt
# files are suppressed as in the sanitizer test build.
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0
for t in "${targets[@]}"; do
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  mkdir -p "$build/artifacts/$t"
  echo "== fuzz_$t: $seconds s"
  # -timeout: an input taking 10 s is a finding too (a hang or an unchecked size).
  log="$build/artifacts/$t/log"
  status=0
  "$build/fuzz/fuzz_$t" "$scratch" "$root/fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$build/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  if [[ $status -ne 0 ]]; then
    tail -n 60 "$log" >&2
    echo "fuzz_$t: a finding (exit $status); the input is in $build/artifacts/$t/, the log in $log" >&2
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|INFO: seed corpus)' "$log" || true
  if [[ $merge -eq 1 ]]; then
    "$build/fuzz/fuzz_$t" -merge=1 "$root/fuzz/corpus/$t" "$scratch" 2>&1 | tail -1
  fi
  rm -rf "$scratch"
done
