#!/usr/bin/env bash
# The test command: set up, build, run every test. CTest's summary is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time, printed before CTest's summary (docs/testing.md: where the time goes).
t0=$SECONDS
# What the build needs (the system packages, torch, pyarrow) first; the tests' Python peers
# (transformers, ...) install while lmkit builds, and CTest waits for them.
bash scripts/setup.sh --build-deps
t_setup=$SECONDS
peers_log=$(mktemp)
bash scripts/setup.sh >"$peers_log" 2>&1 &
peers=$!
trap 'kill "$peers" 2>/dev/null || true; rm -f "$peers_log"' EXIT
# lmkit's own code at -O1 (LMKIT_OPT_LEVEL, CMakeLists.txt): the build takes about 40% less
# than at -O3 and the suite's time is LibTorch's. The sanitizers and the fuzzers are their
# own commands (scripts/sanitize.sh, scripts/fuzz.sh; docs/testing.md).
LMKIT_OPT_LEVEL=1 bash scripts/build.sh
t_build=$SECONDS
rc=0
wait "$peers" || rc=$?
cat "$peers_log"
[ "$rc" -eq 0 ] || { echo "error: scripts/setup.sh (the tests' Python peers) failed, exit $rc" >&2; exit 1; }
t_peers=$SECONDS
cd build
rc=0
ctest -j2 --output-on-failure 2>&1 | tee ctest.log || rc=$?
# CTest lists the skipped tests (those that need a CUDA device) after its summary:
# repeat the summary so that it is the last line.
echo
phase() { printf '%s %d s' "$1" "$2"; }
echo "test.sh: $(phase setup $((t_setup - t0))), $(phase build $((t_build - t_setup))), $(phase "then waiting for the Python peers" $((t_peers - t_build))), $(phase CTest $((SECONDS - t_peers))); $((SECONDS - t0)) s in all"
grep -E "^[0-9]+% tests passed" ctest.log | tail -1
exit "$rc"
