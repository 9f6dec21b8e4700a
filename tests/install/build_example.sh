#!/usr/bin/env bash
# Builds one project of examples/ against lmkit installed from BUILD_DIR, as a user
# would (CTest fixtures: the ELECTRA plugin's tests run the result).
#   build_example.sh SOURCE_DIR BUILD_DIR EXAMPLE WORK_DIR
# -> WORK_DIR/prefix (the install) and WORK_DIR/build (the example's build tree).
set -euo pipefail
src="$(realpath "$1")" build="$(realpath "$2")" example="$3" work="$(realpath -m "$4")"
rm -rf "$work" && mkdir -p "$work"
gen=() && command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
cmake -S "$src/examples/$example" -B "$work/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
  >"$work/build.log" 2>&1 && cmake --build "$work/build" >>"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
echo "examples/$example built against the lmkit installed in $work/prefix: $(ls "$work/build"/*.so 2>/dev/null | tr '\n' ' ')"
