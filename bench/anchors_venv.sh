#!/usr/bin/env bash
# Creates (once) the virtual environment of the benchmark anchors beyond Debian's PyTorch 1.13:
# PyTorch 2.x (eager and torch.compile) and JAX (jit) on the CPU, at the exact versions below, so
# the anchors are reproducible. Only bench/vs_torch.py and the anchors' --check need it; nothing in
# the build or the tests does. Prints the path of its python, then the versions.
#   bench/anchors_venv.sh            create or reuse $TRILEMMA_BENCH_VENV (default build/bench-venv)
#   bench/anchors_venv.sh --check    also run both anchors' --check (correctness against models.py)
#
# PyPI's Linux torch wheel is a CUDA build: it names multi-GB CUDA wheels as requirements and its
# libraries link CUDA's at load time even on the CPU. So torch is installed without its
# requirements, plus the CPU-side ones (TORCH_CPU_DEPS) and only the four CUDA libraries that this
# machine's CUDA 13 toolkit (/usr/local/cuda, the cpp-kernels machine) lacks or has too old for it
# (TORCH_LOAD_LIBS, about 660 MB). inductor compiles its CPU kernels with the system g++ and the
# interpreter's headers (pyenv's 3.11 has them).
set -euo pipefail -o noglob  # noglob: the pins (jax[cpu]) split into words, never into file names
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${TRILEMMA_BENCH_VENV:-$root/build/bench-venv}
base_python=${TRILEMMA_BENCH_PYTHON:-python3}

TORCH="torch==2.15.0"
TORCH_CPU_DEPS="filelock==4.3.1 fsspec==2026.9.0 jinja2==3.1.6 markupsafe==3.0.4 mpmath==1.3.0
  networkx==3.6.1 numpy==2.4.6 setuptools==84.2.1 sympy==1.14.0 typing-extensions==4.16.0"
TORCH_LOAD_LIBS="nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2
  nvidia-nccl-cu13==2.30.7"
JAX="jax[cpu]==0.10.2 jaxlib==0.10.2 ml-dtypes==0.7.0 opt-einsum==3.4.0 scipy==1.17.1"
pins="$TORCH $TORCH_CPU_DEPS $TORCH_LOAD_LIBS $JAX"

python="$venv/bin/python"
stamp="$venv/anchors-pins.txt"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$pins" ]]; then
  echo "creating $venv ($TORCH, $JAX)" >&2
  "$base_python" -c 'import sysconfig, os, sys
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else
         "the base python has no headers (Python.h): torch.compile needs them")'
  "$base_python" -m venv "$venv"
  "$python" -m pip install -q --disable-pip-version-check $TORCH_CPU_DEPS $JAX
  "$python" -m pip install -q --disable-pip-version-check --no-deps $TORCH $TORCH_LOAD_LIBS
fi

# A new venv proves a matmul, torch.compile and jax work before it is stamped; a stamped one is reused.
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$pins" ]] && ! "$python" - <<'EOF' >&2
import torch
a = torch.randn(64, 64)
compiled = torch.compile(lambda x: torch.nn.functional.gelu(x @ x).sum())
assert torch.allclose(compiled(a), torch.nn.functional.gelu(a @ a).sum(), rtol=1e-4)
import jax.numpy as jnp
assert float(jnp.ones((4, 4)).sum()) == 16.0
EOF
then
  lib="$("$python" -c 'import os, importlib.util as u; print(os.path.dirname(u.find_spec("torch").origin))')/lib"
  echo "torch or jax does not work in $venv; CUDA libraries torch's wheel links and this machine lacks:" >&2
  set +o noglob
  for so in "$lib"/*.so; do ldd "$so" | grep "not found" || true; done | sort -u >&2
  echo "(on a machine without CUDA 13 in /usr/local/cuda, install torch's listed requirements instead)" >&2
  exit 1
fi
echo "$pins" > "$stamp"
echo "$python"
"$python" -c 'import torch, jax, jaxlib, numpy, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "jax", jax.__version__,
      "jaxlib", jaxlib.__version__, "numpy", numpy.__version__)'
if [[ "${1:-}" == "--check" ]]; then
  OMP_NUM_THREADS=1 "$python" "$root/bench/torch_models.py" --check --threads 1
  "$python" "$root/bench/jax_models.py" --check --threads 1
fi
