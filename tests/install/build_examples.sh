#!/usr/bin/env bash
# Installs lmkit from BUILD_DIR into WORK_DIR/prefix and builds every project of examples/
# (and tests/install/toy_family) against it, in one tree that shares a precompiled header
# (tests/install/examples/CMakeLists.txt): the CTest fixture whose results the install and
# ELECTRA tests run. Each project's artifacts: WORK_DIR/build/NAME/ (e.g. electra/liblmkit_electra.so).
#   build_examples.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src="$(realpath "$1")" build="$(realpath "$2")" work="$(realpath -m "$3")"
rm -rf "$work" && mkdir -p "$work"
gen=() && command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
# No CMAKE_BUILD_TYPE: configured as docs/library.md and the examples' own comments configure them.
cmake -S "$src/tests/install/examples" -B "$work/build" "${gen[@]}" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DLMKIT_SOURCE_DIR="$src" >"$work/configure.log" 2>&1 ||
  { tail -40 "$work/configure.log"; exit 1; }
start=$SECONDS
cmake --build "$work/build" >"$work/build.log" 2>&1 || { grep -B2 -A20 -m3 "error" "$work/build.log" | head -80; exit 1; }
if grep -q "Winvalid-pch\|not using\|cannot be used" "$work/build.log"; then
  echo "FAIL: a project did not use the shared precompiled header:"; grep -m5 "invalid-pch\|not using\|cannot be used" "$work/build.log"; exit 1
fi
echo "examples built against the lmkit installed in $work/prefix in $((SECONDS - start)) s:" \
  $(cd "$work/build" && ls */*.so */pretrain_finetune 2>/dev/null)
