#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, then show
# what this machine gives lmkit and how fast one encoder layer trains here.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
build/bin/lmkit-info
build/bin/lmkit-bench layer
