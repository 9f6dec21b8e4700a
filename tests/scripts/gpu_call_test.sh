#!/usr/bin/env bash
# The prepared GPU call's own harness, checked here without a GPU (CTest):
#  1. a phase cut off by its limit is reported as one and fails the call (a cut-off once
#     passed unnoticed: its check grepped a word the start line always printed);
#  2. the bundle's test binary, run from another folder, reads the checkout and the apps
#     from LMKIT_TEST_SOURCE_DIR / LMKIT_TEST_BIN_DIR, not from this build's paths (on the GPU
#     machine those paths do not exist, and every app call exited 127).
#   gpu_call_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$(realpath "$1") build=$(realpath "$2")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cd "$src" || exit 1
VERIFY_S=5 DEVICE=cpu BIN="$build/bin" OUT="$work/out" WORK="$work/call" bash scripts/gpu_call.sh A >"$work/a.log" 2>&1
rc=$?
[ $rc = 1 ] || { cat "$work/a.log"; fail "gpu_call.sh A exited $rc after a cut-off, not 1"; }
grep -q 'did not finish within 5 s' "$work/out/verify.md" || { cat "$work/out/verify.md"; fail "the cut-off is not in verify.md"; }
grep -q 'cut off before its last check' "$work/out/failures/verify-0.log" || fail "failures/verify-0.log does not say it was cut off"
echo "1. a cut-off: exit 1, reported in verify.md and failures/"

# The bundle, unpacked elsewhere; one test that runs an app, from another folder.
(cd "$src" && XZ_LEVEL=0 bash scripts/gpu_bundle.sh "$work/b.tar.xz" >/dev/null) || fail "gpu_bundle.sh"
mkdir -p "$work/b" && xz -dc "$work/b.tar.xz" | tar -C "$work/b" -xf - || fail "cannot unpack the bundle"
torch_lib=$(dirname "$(find "$build" -maxdepth 1 -name CMakeCache.txt -exec grep -m1 -oP '(?<=Torch_DIR:PATH=).*' {} \;)")
case_name="apps: lmkit-info reports the reference parameter counts"
cd "$work" || exit 1
export LD_LIBRARY_PATH="$work/b/lib:$work/b/deps:$torch_lib/../../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LMKIT_TEST_SOURCE_DIR="$src" LMKIT_TEST_BIN_DIR="$work/b/bin" "$work/b/bin/lmkit_tests" "$case_name" >"$work/t.log" 2>&1 ||
  { tail -20 "$work/t.log"; fail "the bundle's lmkit_tests with the overrides"; }
LMKIT_TEST_SOURCE_DIR="$src" LMKIT_TEST_BIN_DIR="$work/nowhere" "$work/b/bin/lmkit_tests" "$case_name" >"$work/n.log" 2>&1 &&
  fail "LMKIT_TEST_BIN_DIR naming no folder still passed: the override is not read"
echo "2. the bundle's lmkit_tests runs from $work with LMKIT_TEST_SOURCE_DIR/BIN_DIR (and fails without the apps)"
