#!/usr/bin/env bash
# Bundles lmkit's binaries for a GPU machine that has PyTorch (the same torch wheel as the
# .venv here, e.g. 2.11.0+cu130) but none of Debian's dev packages nor package access: the
# binaries built here, the Debian runtime libraries they need beyond LibTorch (ICU, PCRE2,
# SentencePiece), and optionally data directories, in one tarball (~16 MB with WikiText-2
# and SST-2). Building here and carrying the result saves the build on the GPU machine.
#
#   bash scripts/gpu_bundle.sh OUT.tar.xz [DATA_DIR ...]
#   PLUGIN=build/examples/build/electra/liblmkit_electra.so bash scripts/gpu_bundle.sh OUT.tar.xz
#
# There (with the repository checked out, for models/ and bench/):
#   mkdir -p /tmp/lmkit && xz -dc OUT.tar.xz | tar -C /tmp/lmkit -xf -
#   export LD_LIBRARY_PATH=/tmp/lmkit/lib:/tmp/lmkit/deps:$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib
#   LMKIT_BENCH=/tmp/lmkit/bin/lmkit-bench PYTHON=python3 DEVICE=cuda bash bench/compare_hf.sh
#   BIN=/tmp/lmkit/bin PLUGIN=/tmp/lmkit/lib/liblmkit_electra.so OUT=$OUT bash scripts/gpu_verify.sh
# Data directories land in /tmp/lmkit/data/NAME; a PLUGIN in /tmp/lmkit/lib.
set -euo pipefail
out=${1:?usage: gpu_bundle.sh OUT.tar.xz [DATA_DIR ...]}; shift
# XZ_LEVEL: xz's preset, 0-9 (default 6: the smallest upload; the harness test takes 0, the quickest).
level=${XZ_LEVEL:-6}
[[ "$level" =~ ^[0-9]$ ]] || { echo "error: XZ_LEVEL '$level': expected 0-9" >&2; exit 2; }
cd "$(dirname "$0")/.."
apps=(lmkit-bench lmkit-pretrain lmkit-finetune lmkit-evaluate lmkit-generate lmkit-suite lmkit-forward lmkit-tokenize
  lmkit-info lmkit-dist-check lmkit_tests)
for b in "${apps[@]}"; do
  [ -x build/bin/$b ] || { echo "error: build/bin/$b is missing: build first (scripts/build.sh)" >&2; exit 1; }
done
# The test command's build is -O1 (scripts/test.sh): fine for call A's checks, not for call B's figures.
opt=$(sed -n 's/^LMKIT_OPT_LEVEL:STRING=//p' build/CMakeCache.txt 2>/dev/null)
[ "${opt:-3}" = 3 ] || echo "warning: build/ is an -O$opt build (the test command's): scripts/build.sh rebuilds it at -O3 for figures" >&2
[ -z "${PLUGIN:-}" ] || [ -f "$PLUGIN" ] || { echo "error: PLUGIN $PLUGIN: no such file (tests/install/build_examples.sh builds it)" >&2; exit 1; }
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/deps" "$stage/data"
for b in "${apps[@]}"; do cp build/bin/$b "$stage/bin/"; done
# lmkit's library (the apps' RUNPATH names this machine's build tree), the SentencePiece module and the CUDA module.
cp -P build/lib/liblmkit.so* build/lib/liblmkit_spm.so "$stage/lib/"
[ ! -f build/lib/liblmkit_cuda.so ] || cp build/lib/liblmkit_cuda.so "$stage/lib/"
[ -z "${PLUGIN:-}" ] || cp "$PLUGIN" "$stage/lib/"
# Every library the binaries and the modules load that is neither LibTorch's nor glibc's.
{ ldd "$stage"/bin/* "$stage"/lib/*.so 2>/dev/null || true; } | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/torch/lib/|/nvidia/|/liblmkit|/(libc|libm|libdl|librt|libpthread|libutil|libgcc_s|libstdc\+\+)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/deps/"; done
for d in "$@"; do cp -r "$d" "$stage/data/"; done
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cf - . | xz -T0 -"$level" > "$out"
echo "$out: $(du -h "$out" | cut -f1) ($(ls "$stage/deps" | tr '\n' ' '))"
