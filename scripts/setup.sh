#!/usr/bin/env bash
# Installs the build and test dependencies of gswap on a Debian machine.
# Idempotent: it asks apt only for packages that are missing, and does nothing when all are there.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format python3
  coinor-libcbc-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit provides cuda.h and nvcc. It is not a Debian package on these machines;
# find_package(CUDAToolkit) looks in /usr/local/cuda.
if [[ ! -f /usr/local/cuda/include/cuda.h ]]; then
  echo "setup: the CUDA toolkit was not found in /usr/local/cuda (cuda.h is needed to build)" >&2
  exit 1
fi
