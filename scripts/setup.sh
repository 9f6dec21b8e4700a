#!/usr/bin/env bash
# Installs every system package lmkit needs on Debian bookworm, and nothing else.
# Idempotent: packages already present are left as they are, and the package
# lists are refreshed only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkgconf ccache
  libtorch-dev libopenblas0-openmp libgloo-dev
  libsentencepiece-dev sentencepiece
  nlohmann-json3-dev libcli11-dev catch2
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
  # --no-install-recommends: libtorch's recommends pull libopenblas0-pthread,
  # which ignores the torch thread count and oversubscribes (DESIGN.md, BLAS).
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Without OpenBLAS (openmp flavour) LibTorch falls back to reference BLAS: ~20x slower matmuls.
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
if [ -e "$openblas" ]; then
  $sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu "$openblas" >/dev/null
fi
echo "setup: all packages present"
