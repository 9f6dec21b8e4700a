#!/usr/bin/env bash
# The CUDA module (src/lmkit/core/cuda.h): liblmkit, the apps and the test binary need no CUDA
# library; liblmkit_cuda.so carries LibTorch's CUDA side; a run on the CPU never loads
# libtorch_cuda, and a question about CUDA after a CPU start-up loads the module and gets
# LibTorch's answer (not "CUDA turned off for this process").
#   tests/scripts/cuda_module_test.sh BIN_DIR LIB_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BIN_DIR LIB_DIR" >&2; exit 2; }
bin=$1 lib=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
cuda_libs='libtorch_cuda|libc10_cuda|libcudart|libnccl|libcudnn|libcublas'
for f in "$lib"/liblmkit.so "$bin"/lmkit-* "$bin"/lmkit_tests; do
  needed=$(readelf -d "$f" | grep NEEDED | grep -E "$cuda_libs" || true)
  [ -z "$needed" ] || fail "$f needs a CUDA library: $needed"
done
echo "liblmkit.so, $(ls "$bin"/lmkit-* | wc -l) apps and lmkit_tests need no CUDA library"
if [ ! -f "$lib/liblmkit_cuda.so" ]; then
  echo "LMKIT_SKIP: no CUDA module here (a LibTorch without CUDA, or a sanitizer build)"
  exit 0
fi
readelf -d "$lib/liblmkit_cuda.so" | grep NEEDED | grep -q libtorch_cuda || fail "liblmkit_cuda.so does not link libtorch_cuda"
# LD_DEBUG=files names every library the dynamic linker loads.
loads_cuda() {
  local log
  log=$(LD_DEBUG=files "$@" 2>&1 >/dev/null || true)
  grep -q "file=[^ ]*libtorch_cuda.so" <<<"$log"
}
! loads_cuda "$bin/lmkit_tests" "runtime: thread count defaults to OMP_NUM_THREADS, else every core" || fail "a CPU run loaded libtorch_cuda"
echo "a CPU run loads no CUDA library"
# lmkit-info starts on the CPU (seeded, threads set), then asks about CUDA.
out=$("$bin/lmkit-info" --json 2>&1) || fail "lmkit-info after a CPU start-up: $out"
loads_cuda "$bin/lmkit-info" --json || fail "lmkit-info's question about CUDA did not load the CUDA module"
echo "lmkit-info: $(grep -o '"cuda_devices":[0-9]*' <<<"$out") through the CUDA module"
# --device cuda: the module loads first; without a GPU the error says so.
if ! out=$("$bin/lmkit-info" --system --device cuda --json 2>&1); then
  grep -q "no CUDA device is available on this machine" <<<"$out" || fail "--device cuda: $out"
  echo "--device cuda on a machine without a GPU: $out"
fi
