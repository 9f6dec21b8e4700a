#!/usr/bin/env bash
# Installs what lmkit needs on Debian bookworm, and nothing else:
#  - system packages (compiler, CMake, sentencepiece, nlohmann_json, CLI11, Catch2;
#    clang with its sanitizer and libFuzzer runtimes for scripts/sanitize.sh);
#  - the project's Python environment .venv with the pinned packages of
#    scripts/requirements.txt: torch provides LibTorch (requirements-main.txt),
#    the others are the HuggingFace peers of the interop tests and benchmarks.
# --main installs only what building and running lmkit needs (no clang, only
# requirements-main.txt): scripts/demo.sh, the main job on a fresh machine.
# --build-deps installs what the test command's build needs (every system package,
# requirements-main.txt and pyarrow, whose Arrow C++ the build links for Parquet):
# scripts/test.sh installs the other Python peers while lmkit builds.
# Idempotent: packages already present are left as they are, the package lists
# are refreshed only when something is missing, and pip runs only when the
# requirements changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."

main=0 peers=1
case "${1:-}" in
  --main) main=1 peers=0 ;;
  --build-deps) peers=0 ;;
  "") ;;
  *) echo "error: scripts/setup.sh: unknown argument '$1' (expected --main, --build-deps or nothing)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "error: scripts/setup.sh: one argument at most (--main or --build-deps)" >&2; exit 2; }

packages=(
  build-essential cmake ninja-build pkgconf ccache
  python3 python3-venv
  libsentencepiece-dev sentencepiece libicu-dev libpcre2-dev libgloo-dev
  nlohmann-json3-dev libcli11-dev catch2 zlib1g-dev libzstd-dev zstd libpng-dev
)
# Fashion-MNIST (Debian's dataset-fashion-mnist: /usr/share/datasets/fashion-mnist) for ViT and MAE.
[ "$main" = 1 ] || packages+=(clang libclang-rt-14-dev doxygen dataset-fashion-mnist)

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
# A stamp holds the requirements of the last successful install: the full set
# (requirements-main.txt then requirements.txt), or the main set after --main,
# which the full set also satisfies.
# The build set (--build-deps) is the main set and requirements.txt's pyarrow pin.
main_set=$(cat scripts/requirements-main.txt)
pyarrow_pin=$(grep -m1 '^pyarrow==' scripts/requirements.txt)
build_set=$(printf '%s\n%s' "$main_set" "$pyarrow_pin")
full_set=$(cat scripts/requirements-main.txt scripts/requirements.txt)
stamp=$venv/.lmkit-requirements
have=$(cat "$stamp" 2>/dev/null || true)
torch_pin=$(grep -m1 '^torch==' scripts/requirements-main.txt)
up_to_date=0
case "$have" in
  "$full_set") up_to_date=1 ;;
  "$build_set") [ "$peers" = 0 ] && up_to_date=1 ;;
  "$main_set") [ "$main" = 1 ] && up_to_date=1 ;;
esac
if [ "$up_to_date" = 1 ] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "setup: $venv up to date ($torch_pin)"
else
  what=(-r scripts/requirements.txt) wanted=$full_set
  if [ "$main" = 1 ]; then what=(-r scripts/requirements-main.txt) wanted=$main_set
  elif [ "$peers" = 0 ]; then what=(-r scripts/requirements-main.txt "$pyarrow_pin") wanted=$build_set; fi
  echo "setup: installing ${what[*]} into $venv (LibTorch comes with torch: ~4.5 GB)"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${what[@]}"
  printf '%s\n' "$wanted" > "$stamp"
fi
echo "setup: all packages present"
