#!/usr/bin/env bash
# Installs what lmkit needs on Debian bookworm, and nothing else:
#  - system packages (compiler, CMake, sentencepiece, nlohmann_json, CLI11, Catch2;
#    clang with its sanitizer and libFuzzer runtimes for scripts/sanitize.sh);
#  - the project's Python environment .venv with the pinned packages of
#    scripts/requirements.txt: torch provides LibTorch, the others are the
#    HuggingFace peers of the interop tests and benchmarks.
# Idempotent: packages already present are left as they are, the package lists
# are refreshed only when something is missing, and pip runs only when the
# requirements changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkgconf ccache
  python3 python3-venv
  libsentencepiece-dev sentencepiece libicu-dev libpcre2-dev libgloo-dev
  nlohmann-json3-dev libcli11-dev catch2
  clang libclang-rt-14-dev
)

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Debian's interpreter, not whatever python3 comes first on PATH (pyenv, conda):
# the venv must not depend on a per-user installation.
venv=.venv
stamp=$venv/.lmkit-requirements
if [ -f "$stamp" ] && cmp -s "$stamp" scripts/requirements.txt && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "setup: $venv up to date ($(grep -m1 '^torch==' scripts/requirements.txt))"
else
  echo "setup: installing scripts/requirements.txt into $venv (LibTorch comes with torch: ~4.5 GB)"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
  cp scripts/requirements.txt "$stamp"
fi
echo "setup: all packages present"
