#!/usr/bin/env bash
# The test command: set up, build, run every test. CTest's summary is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The libFuzzer harnesses, built with clang under AddressSanitizer + UBSan in build-asan;
# the main build's CTest runs each for LMKIT_FUZZ_RUNS executions from a fixed seed (docs/testing.md).
LMKIT_SETUP_DONE=1 bash scripts/sanitize.sh fuzzers
bash scripts/build.sh -DLMKIT_FUZZ_BIN="$PWD/build-asan/bin"
cd build
rc=0
ctest -j2 --output-on-failure 2>&1 | tee ctest.log || rc=$?
# CTest lists the skipped tests (those that need a CUDA device) after its summary:
# repeat the summary so that it is the last line.
echo
grep -E "^[0-9]+% tests passed" ctest.log | tail -1
exit "$rc"
