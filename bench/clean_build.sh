#!/usr/bin/env bash
# Clean-build time of this checkout, without ccache, in three nested steps:
# the main job's targets (scripts/demo.sh: lmkit-info, lmkit-pretrain), then the
# library and every app, then everything (tests, benchmarks, tools). Arguments
# go to CMake's configure step, e.g. the file-by-file build the unity build replaced:
#
#   bash bench/clean_build.sh -DLMKIT_UNITY_BUILD=OFF
#   bash bench/clean_build.sh                      # the default (unity batches of 8)
#
# DIR names the build folder (default: a temporary one, removed after; KEEP=1 keeps
# it, e.g. to run its tests); LMKIT_JOBS the parallelism (2).
set -euo pipefail
shopt -s inherit_errexit  # a failed step inside $(...) stops the script, not a time
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "error: .venv missing: run scripts/setup.sh" >&2; exit 1; }
dir=${DIR:-$(mktemp -d /tmp/lmkit-clean-build.XXXXXX)}
if [ -e "$dir/CMakeCache.txt" ]; then echo "error: $dir already holds a build; name an empty DIR" >&2; exit 2; fi
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
jobs=${LMKIT_JOBS:-2}
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLMKIT_PYTHON="$PWD/.venv/bin/python"
      -DCMAKE_PREFIX_PATH="$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')")
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  args+=(-DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
export CCACHE_DISABLE=1
t0=$(date +%s.%N)
cmake -S . -B "$dir" "${args[@]}" "$@" >/dev/null
t_conf=$(date +%s.%N)
apps=$(sed -n 's/^lmkit_app(\([^ ]*\) .*/\1/p' CMakeLists.txt | tr '\n' ' ')
# A failed step prints the end of ninja's output and stops the script (before, it stopped silently).
step() {
  ninja -C "$dir" -j"$jobs" "$@" >"$dir/step.log" 2>&1 ||
    { echo "error: bench/clean_build.sh: 'ninja $*' failed; the end of its output:" >&2; tail -20 "$dir/step.log" >&2; exit 1; }
  date +%s.%N
}
t_main=$(step lmkit-info lmkit-pretrain)
t_apps=$(step lmkit $apps)
t_all=$(step)
s() { awk -v a="$1" -v b="$2" 'BEGIN { t = int(b - a + 0.5); printf "%6d s  (%d min %02d s)", t, t / 60, t % 60 }'; }
echo "clean build of $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes') ${*:-(defaults)}, -j$jobs, no ccache, $(nproc) cores:"
echo "  configure                             $(s "$t0" "$t_conf")"
echo "  main job (lmkit-info, lmkit-pretrain) $(s "$t_conf" "$t_main")"
echo "  library + every app                   $(s "$t_conf" "$t_apps")"
echo "  everything (tests, bench, tools)      $(s "$t_conf" "$t_all")"
