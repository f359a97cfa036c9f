#!/usr/bin/env bash
# A kernel's arithmetic must not follow the tuning of the machine that compiles it: -march=native
# also sets -mtune, and GCC's tuning for Zen leaves a loop-carried multiply-add unfused where its
# other tunings fuse it (an FMA rounds once, a product then a sum twice). Compiles each source
# with -mtune=generic and with -mtune=znver3 (the same -march and flags) and compares, function by
# function, the number of fused multiply-add instructions. Exits 1 naming each difference.
#   tests/check_tuning.sh CXX "FLAGS" SOURCE...
set -euo pipefail
cxx=$1
read -r -a flags <<< "$2"
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fmas() {
  objdump -d --no-show-raw-insn "$1" |
    awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 } /vfn?m(add|sub)[0-9]*[ps][sd]/ { n[fn]++ } END { for (f in n) print n[f], f }' |
    sort -k2
}
status=0
for src in "$@"; do
  for tune in generic znver3; do "$cxx" "${flags[@]}" -mtune=$tune -c "$src" -o "$tmp/$tune.o"; done
  if ! diff <(fmas "$tmp/generic.o") <(fmas "$tmp/znver3.o") > "$tmp/diff"; then
    echo "error: $src: multiply-adds fused differently under -mtune=generic (<) and -mtune=znver3 (>):"
    c++filt < "$tmp/diff"
    status=1
  fi
done
[[ $status == 0 ]] && echo "$# source(s): the same fused multiply-adds under either tuning"
exit $status
