#!/usr/bin/env bash
# Installs what trilemma needs from Debian's packages, only if something is missing.
#   scripts/install-deps.sh          build and run dependencies (gnuplot-nox draws `trilemma report`'s plots)
#   scripts/install-deps.sh --test   also PyTorch and h5py (reference values for the tests) and
#                                    tcmalloc (the tuned PyTorch of bench/vs_torch.py preloads it)
#   scripts/install-deps.sh --fuzz   also clang 14 with libFuzzer and its OpenMP (scripts/fuzz.sh)
set -euo pipefail

packages=(g++ cmake make pkg-config libopenblas-dev libdnnl-dev libboost-program-options-dev
          doctest-dev libhdf5-dev nlohmann-json3-dev gnuplot-nox openmpi-bin libopenmpi-dev)
case "${1:-}" in
  --test) packages+=(python3 python3-torch python3-h5py python3-numpy libtcmalloc-minimal4) ;;
  --fuzz) packages+=(clang-14 libclang-rt-14-dev libomp-14-dev) ;;
  "") ;;
  *) echo "scripts/install-deps.sh: unknown argument '$1' (allowed: --test, --fuzz)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "installing: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
