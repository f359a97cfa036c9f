#!/usr/bin/env bash
# Runs one experiment of experiments/: its sweep (two runs at a time, one thread each), its
# scaling benchmark when it has one (experiments/NAME.bench: the options of
# `trilemma bench scaling`), and its report. The run folders, the report and the tables go to
# runs/NAME/ (not versioned; a second call skips finished runs and resumes interrupted ones).
# Only when asked (SAVE=1) are the results (tables, plots, results.csv, the runs' metrics)
# copied to results/NAME/, the versioned record.
#   scripts/experiment.sh NAME [extra sweep options, e.g. --set steps=100]
#   SAVE=1 scripts/experiment.sh NAME           also replace results/NAME/
#   JOBS=1 scripts/experiment.sh scaling       one run at a time, with every core
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:?usage: scripts/experiment.sh NAME [sweep options]}
shift
grid="experiments/$name.grid"
cd "$root"
[[ -f "$grid" ]] || { echo "error: no experiment '$name' (allowed: $(ls experiments/*.grid | xargs -n1 basename | sed 's/\.grid$//' | tr '\n' ' '))" >&2; exit 2; }
bin="$root/build/trilemma"
out="runs/$name"
cores=$("$bin" info --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["physical_cores"])' 2>/dev/null || nproc)
jobs=${JOBS:-$(( cores >= 2 ? 2 : 1 ))}  # JOBS=1: one run at a time (timings: scaling)
status=0
threads=$(( jobs > cores ? jobs : cores ))
"$bin" sweep "$grid" --out "$out" --jobs "$jobs" --threads "$threads" "$@" || status=$?
if [[ -f "experiments/$name.bench" && ! -s "$out/scaling.jsonl" ]]; then
  # shellcheck disable=SC2046
  "$bin" bench scaling $(grep -v '^#' "experiments/$name.bench") --out "$out/scaling.jsonl"
fi
"$bin" report "$out"
if [[ "${SAVE:-0}" != 1 ]]; then
  echo "report: $out/report.md (SAVE=1 scripts/experiment.sh $name copies the results to results/$name/)"
  exit $status
fi
mkdir -p "results/$name"
( cd "$out" && find . -maxdepth 1 -type f \( -name '*.md' -o -name '*.csv' -o -name '*.jsonl' -o -name 'sweep.json' -o -name 'triangle.json' \) -print0 | xargs -0 -r cp --parents -t "$root/results/$name" )
[[ -d "$out/plots" ]] && { rm -rf "results/$name/plots"; cp -r "$out/plots" "results/$name/plots"; }
rm -rf "results/$name/runs"  # only the runs of the grid as it is now
( cd "$out" && /usr/bin/python3 -c 'import json,sys; [print(json.loads(l)["id"]) for l in open("results.jsonl")]' |
  while read -r id; do for f in metrics.jsonl summary.json; do
    [[ -f "runs/$id/$f" ]] && cp --parents -t "$root/results/$name" "runs/$id/$f"; done; done )
echo "results copied to results/$name/"
exit $status
