#!/usr/bin/env bash
# Configures and builds lmkit into build/ (Release; Ninja and ccache when available);
# LMKIT_BUILD_DIR names another folder (scripts/sanitize.sh builds build-asan, build-tsan).
# LibTorch is the one in the project's .venv (scripts/setup.sh) unless the
# arguments, passed to cmake's configure step, name another with
# -DCMAKE_PREFIX_PATH=/path/to/libtorch (or its share/cmake folder).
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
# ccache caches translation units built with the precompiled header only with these sloppiness settings.
if command -v ccache >/dev/null 2>&1; then
  args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime;ccache")
fi
dir="${LMKIT_BUILD_DIR:-build}"
if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then args+=(-G Ninja); fi
if [ -x .venv/bin/python ]; then
  args+=(-DLMKIT_PYTHON="$PWD/.venv/bin/python")
  case " $* " in
    *CMAKE_PREFIX_PATH*) ;;
    # -W ignore: torch without NumPy (the main job's environment) warns on import about nothing lmkit uses.
    *) args+=(-DCMAKE_PREFIX_PATH="$(.venv/bin/python -W ignore -c 'import torch; print(torch.utils.cmake_prefix_path)')") ;;
  esac
fi
# A CUDA-enabled LibTorch needs the CUDA toolkit to configure; take the standard one when CMake would not find it.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  args+=(-DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
# LMKIT_OPT_LEVEL: -O of lmkit's own code in this Release build, 3 unless said (scripts/test.sh says 1);
# passed every time, so that a build after the test command's is -O3 again.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DLMKIT_OPT_LEVEL="${LMKIT_OPT_LEVEL:-3}" "${args[@]}" "$@" >/dev/null
# LMKIT_TARGETS: build only these targets (scripts/sanitize.sh fuzzers).
cmake --build "$dir" -j"${LMKIT_JOBS:-2}" ${LMKIT_TARGETS:+--target $LMKIT_TARGETS}
