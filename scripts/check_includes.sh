#!/usr/bin/env bash
# Each source of the library and the tests must compile on its own: the unity build
# batches sources differently in every configuration (build-asan drops the CUDA kernels,
# a new file shifts every batch), so a source that borrows a header from a neighbour in
# one batch fails in another. This checks each one alone (syntax only, with the main
# build's precompiled LibTorch header, which holds no lmkit header).
#
#   scripts/check_includes.sh [FILE.cpp]...     (default: every src/ and tests/ source)
#
# Needs a configured main build (scripts/build.sh). About ten minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${LMKIT_BUILD_DIR:-build}"
ninja="$build/build.ninja"
[ -f "$ninja" ] || { echo "error: no $ninja: run scripts/build.sh first" >&2; exit 1; }
# The flags of one unity batch of each target: the PCH include, the defines, the include dirs.
flags_of() {
  awk -v t="$1" '
    $1 == "build" && index($2, "CMakeFiles/" t ".dir/Unity/") == 1 { on = 1; next }
    on && /^  (DEFINES|FLAGS|INCLUDES) = / { sub(/^  [A-Z]+ = /, ""); printf "%s ", $0 }
    on && /^$/ { exit }' "$ninja"
}
lib_flags="$(flags_of lmkit)"
test_flags="$(flags_of lmkit_tests)"
[ -n "$lib_flags" ] && [ -n "$test_flags" ] ||
  { echo "error: $ninja has no unity batches (configure with LMKIT_UNITY_BUILD=ON)" >&2; exit 1; }
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(find src/lmkit tests -name '*.cpp' ! -path 'tests/fuzz/*' \
    ! -path 'tests/install/*' ! -path 'tests/plugins/*' ! -name parquet.cpp | sort)
fi
check_one() {
  local f="$1" flags
  case "$f" in tests/*) flags="$test_flags" ;; *) flags="$lib_flags" ;; esac
  # eval: the defines carry quoted strings (-DLMKIT_BIN_DIR=\"...\").
  if ! out="$(eval "c++ $flags -fsyntax-only -w \"\$f\"" 2>&1)"; then
    printf 'error: %s does not compile on its own (a missing #include?):\n%s\n' "$f" "$(grep -m3 'error' <<<"$out")"
    return 1
  fi
}
export -f check_one
export lib_flags test_flags
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} bash -c 'check_one "$@"' _ {} && rc=0 || rc=$?
[ "$rc" -eq 0 ] && echo "${#files[@]} sources compile on their own" || exit 1
