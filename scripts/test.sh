#!/usr/bin/env bash
# The test command: set up, build, run every test. CTest's summary is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time, printed before CTest's summary (docs/testing.md: where the time goes).
t0=$SECONDS
# What the builds need (the system packages, torch) first; the tests' Python peers (transformers,
# pyarrow, ...) install while the fuzzers build, and the main build waits for them (it looks for pyarrow).
bash scripts/setup.sh --build-deps
t_setup=$SECONDS
peers_log=$(mktemp)
bash scripts/setup.sh >"$peers_log" 2>&1 &
peers=$!
trap 'kill "$peers" 2>/dev/null || true; rm -f "$peers_log"' EXIT
# The libFuzzer harnesses, built with clang under AddressSanitizer + UBSan in build-asan;
# the main build's CTest runs each for LMKIT_FUZZ_RUNS executions from a fixed seed (docs/testing.md).
LMKIT_SETUP_DONE=1 bash scripts/sanitize.sh fuzzers
t_fuzzers=$SECONDS
rc=0
wait "$peers" || rc=$?
cat "$peers_log"
[ "$rc" -eq 0 ] || { echo "error: scripts/setup.sh (the tests' Python peers) failed, exit $rc" >&2; exit 1; }
t_peers=$SECONDS
bash scripts/build.sh -DLMKIT_FUZZ_BIN="$PWD/build-asan/bin"
t_build=$SECONDS
cd build
rc=0
ctest -j2 --output-on-failure 2>&1 | tee ctest.log || rc=$?
# CTest lists the skipped tests (those that need a CUDA device) after its summary:
# repeat the summary so that it is the last line.
echo
phase() { printf '%s %d s' "$1" "$2"; }
echo "test.sh: $(phase setup $((t_setup - t0))), $(phase "the fuzzers' ASan build" $((t_fuzzers - t_setup))), $(phase "then waiting for the Python peers" $((t_peers - t_fuzzers))), $(phase build $((t_build - t_peers))), $(phase CTest $((SECONDS - t_build))); $((SECONDS - t0)) s in all"
grep -E "^[0-9]+% tests passed" ctest.log | tail -1
exit "$rc"
