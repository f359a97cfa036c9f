#!/usr/bin/env bash
# The main job: install what is missing, build Release, run the default experiment
# (experiments/quick.grid: the book's triangle measured in about 12 minutes on 2 cores after the build; its run folders go
# to runs/quick/ with its report and triangle; SAVE=1 also copies them to results/quick/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
exec "$root/scripts/experiment.sh" quick "$@"
