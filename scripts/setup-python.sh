#!/usr/bin/env bash
# Makes the Python environment of gswap's Python package and its tests: a virtual environment
# ($GSWAP_VENV, default .venv in the checkout) with PyTorch, torchvision, tqdm, pytest and
# scikit-build-core from PyPI. Idempotent: it does nothing when the environment is complete.
#
# PyTorch's wheel on PyPI depends on about fifteen CUDA wheels (several GiB). CPU-only use needs
# only the libraries `import torch` loads: those the CUDA toolkit in /usr/local/cuda provides are
# taken from there, and only the ones it lacks or has too old come from PyPI (cuFile, cuSPARSELt,
# NVSHMEM, NCCL), at the versions torch pins.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${GSWAP_VENV:-$root/.venv}
torch_version=2.15.0
torchvision_version=0.29.2
stamp=$venv/.gswap-setup-$torch_version-$torchvision_version

if [[ -f $stamp ]] && "$venv/bin/python" -c "import torch, torchvision, tqdm, pytest" 2>/dev/null; then
  exit 0
fi

if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  echo "setup-python: installing python3-venv"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-venv
fi

echo "setup-python: making $venv"
python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade pip
"${pip[@]}" install --no-deps "torch==$torch_version" "torchvision==$torchvision_version"
# torch's and torchvision's own dependencies, less the CUDA wheels.
"${pip[@]}" install filelock "typing-extensions>=4.13" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 \
  "fsspec>=0.8.5" "setuptools>=77.0.3" numpy "pillow>=5.3" \
  tqdm pytest "scikit-build-core>=0.10"
# The CUDA libraries that /usr/local/cuda does not provide, at the versions torch 2.15.0 pins
# (its requirements, and cuda-toolkit 13.2.2's for cuFile); change them with torch_version.
"${pip[@]}" install --no-deps nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 \
  nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7
"$venv/bin/python" -c "import torch, torchvision" ||
  { echo "setup-python: import torch failed in $venv" >&2; exit 1; }
touch "$stamp"
echo "setup-python: $venv has torch $torch_version (CPU use) and the test tools"
