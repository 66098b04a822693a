#!/usr/bin/env bash
# build-carry.sh: builds on a development machine what scripts/gpu/validate.sh needs on a GPU
# machine, and packs it into a small folder to carry there.
#
# The GPU machine has the CUDA toolkit but not the Debian libraries (spdlog, CLI11, GoogleTest...)
# the full build needs, so the preload library, gswapd, gswapctl, minitrain and the GPU programs are
# built here and copied, with the spdlog and fmt libraries gswapd and gswapctl link (in lib/). The
# pack keeps the build layout (interpose/libgswap.so, bin/gswapd, tests/workloads/minitrain and its
# fatbin, tests/gpu/*), so `validate.sh --build-dir <pack>` finds everything, and it holds only
# those files (about 26 MiB with a RelWithDebInfo build, CUPTI included), not the object files of the whole build.
#
# Usage: scripts/gpu/build-carry.sh [BUILD_DIR [PACK_DIR]]
#   BUILD_DIR  where to configure and build (default: build)
#   PACK_DIR   where to copy the files to carry (default: build-carry; ignored by git)
# Then, on the GPU machine, from the repository root: scripts/gpu/validate.sh --build-dir build-carry
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
pack=${2:-build-carry}
[[ $build = /* ]] || build=$root/$build
[[ $pack = /* ]] || pack=$root/$pack

if [[ ! -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
  echo "build-carry.sh: nvcc is needed to build the CUDA kernels" >&2
  exit 2
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${GSWAP_BUILD_TYPE:-RelWithDebInfo}" >/dev/null
targets=(gswap gswapd gswapctl minitrain hook_paths_test vmm_remap_test stream_free_test meminfo_test
  gpu_micro)
# runtime_check exists only where cuBLAS and cuDNN were found.
# (The list is read whole first: grep -q would close the pipe early and fail under pipefail.)
available=$(cmake --build "$build" --target help 2>/dev/null || true)
if grep -qw runtime_check <<<"$available"; then
  targets+=(runtime_check)
fi
cmake --build "$build" -j "${GSWAP_JOBS:-$(nproc)}" --target "${targets[@]}"

rm -rf "$pack"
files=(
  interpose/libgswap.so
  tests/workloads/minitrain
  tests/workloads/minitrain_kernels.fatbin
  tests/gpu/hook_paths_test
  tests/gpu/vmm_remap_test
  tests/gpu/stream_free_test
  tests/gpu/meminfo_test
  tests/gpu/gpu_micro
  tests/gpu/runtime_check
  bin/gswapd
  bin/gswapctl
)
for f in "${files[@]}"; do
  if [[ -e $build/$f ]]; then
    mkdir -p "$pack/$(dirname "$f")"
    cp -p "$build/$f" "$pack/$f"
    # Debug information makes gswapd and gswapctl about 30 MiB each; symbols stay for backtraces.
    [[ $f = bin/* ]] && strip --strip-debug "$pack/$f"
  else
    echo "build-carry.sh: note: $f was not built, it is not in the pack" >&2
  fi
done
# gswapd and gswapctl link spdlog and fmt, which the GPU machine lacks: their shared objects go in
# lib/, and validate.sh puts that folder on LD_LIBRARY_PATH for the daemon and gswapctl.
if [[ -e $pack/bin/gswapd ]]; then
  mkdir -p "$pack/lib"
  ldd "$pack/bin/gswapd" "$pack/bin/gswapctl" | awk '/=> \// { print $1, $3 }' | sort -u |
    while read -r soname path; do
      case $soname in
        libspdlog.so* | libfmt.so*) cp -pL "$path" "$pack/lib/$soname" ;;
      esac
    done
fi
# The toolkit's CUPTI (4 MiB) for validate.sh --timing cupti, which the GPU machine may lack.
for f in /usr/local/cuda/lib64/libcupti.so.13 /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13; do
  if [[ -e $f ]]; then
    mkdir -p "$pack/lib"
    cp -pL "$f" "$pack/lib/libcupti.so.13"
    break
  fi
done
du -sh "$pack"
echo "carry $pack to the GPU machine, then run there from the repository root:"
echo "  scripts/gpu/validate.sh --build-dir ${pack#"$root"/}"
