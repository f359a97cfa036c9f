#!/usr/bin/env bash
# Makes a venv holding GEMM libraries newer than Debian's, for the optional builds of
# docs/BENCHMARKS.md "GEMM backends": oneDNN 3.x (built for GNU OpenMP, like trilemma) and MKL.
# Only for those builds and their benchmarks: the default build and its tests need none of it.
#   scripts/gemm-venv.sh [DIR]     DIR defaults to build/gemm-venv (ignored by git); about 1.2 GB
# Then, for example:
#   cmake -S . -B build-gemm -DTRILEMMA_DNNL_ROOT=$DIR -DTRILEMMA_MKL_ROOT=$DIR
# Pip's wheels put headers in $DIR/include and libraries in $DIR/lib.
set -euo pipefail

# oneDNN 3.2.0 (its newest wheel on GNU OpenMP; the plain onednn-devel wheels run on TBB and SYCL)
# and MKL 2026.2.1.
readonly pins=(onednn-devel-cpu-gomp==2023.2.0 mkl-devel==2026.2.1)

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build/gemm-venv}
python=${PYTHON:-python3}

if [[ ! -x $dir/bin/pip ]]; then
  "$python" -m venv "$dir"
fi
"$dir/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}"

for f in include/dnnl.h include/mkl_service.h lib/libdnnl.so.3; do
  [[ -e $dir/$f ]] || { echo "scripts/gemm-venv.sh: $dir/$f missing after pip install" >&2; exit 1; }
done
ls "$dir"/lib/libmkl_rt.so* >/dev/null
echo "$dir: ${pins[*]}"
