#!/usr/bin/env bash
# The test command: set up, build, run every test. CTest's summary is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest -j2 --output-on-failure
