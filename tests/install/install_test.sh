#!/usr/bin/env bash
# The installed package, as a user meets it (CTest "install: ..."; docs/library.md):
#  1. cmake --install BUILD --prefix WORK/prefix;
#  2. each project in examples/ configured with only that prefix on CMAKE_PREFIX_PATH
#     (find_package(lmkit) finds LibTorch itself), built, and run on the bundled data;
#  3. a project that takes lmkit in with add_subdirectory() configures (no build).
#   install_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src="$(realpath "$1")" build="$(realpath "$2")" work="$(realpath -m "$3")"
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"
gen=() && command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/lmkit/version.h include/lmkit/models/bert.h lib/liblmkit.so lib/liblmkit_spm.so bin/lmkit-pretrain \
         share/lmkit/models/bert-tiny.json lib/cmake/lmkit/lmkitConfig.cmake lib/cmake/lmkit/lmkitConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || { echo "FAIL: the install lacks $f"; exit 1; }
done
# The installed apps run from the prefix (RPATH $ORIGIN/../lib), no environment needed.
env -u LD_LIBRARY_PATH -u LMKIT_SPM_MODULE "$prefix/bin/lmkit-info" "$prefix/share/lmkit/models/bert-tiny.json" >/dev/null

# SST-2 dev rows (the bundled fixture): the first 600 train, the rest evaluate.
data="$work/data" && mkdir -p "$data"
head -n 601 "$src/tests/fixtures/text/sst2.dev.tsv" >"$data/train.tsv"
{ head -n 1 "$src/tests/fixtures/text/sst2.dev.tsv"; tail -n +602 "$src/tests/fixtures/text/sst2.dev.tsv"; } >"$data/dev.tsv"

example="$work/pretrain_finetune"
cmake -S "$src/examples/pretrain_finetune" -B "$example/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$example.configure.log" 2>&1 || { cat "$example.configure.log"; exit 1; }
cmake --build "$example/build" >"$example.build.log" 2>&1 || { tail -40 "$example.build.log"; exit 1; }
env -u LD_LIBRARY_PATH -u LMKIT_SPM_MODULE OMP_NUM_THREADS=1 "$example/build/pretrain_finetune" \
  "$prefix/share/lmkit/models/bert-tiny.json" "$src/data/wikitext-2-sample/train.txt" "$data/train.tsv" "$data/dev.tsv" \
  "$example/out" | tee "$example.out"
grep -q "^lmkit 0\.[0-9]*\.[0-9]* on LibTorch " "$example.out"
grep -qE "^finetuned: dev accuracy 0\.[0-9]+, macro F1 [0-9.]+ over 272 examples$" "$example.out"
[ -f "$example/out/finetune/final/model.safetensors" ]

# add_subdirectory: lmkit's targets name no CMAKE_SOURCE_DIR, so it configures inside another project.
parent="$work/parent" && mkdir -p "$parent"
cat >"$parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.19)
project(parent LANGUAGES CXX)
add_subdirectory("$src" lmkit)
add_executable(user user.cpp)
target_link_libraries(user PRIVATE lmkit::lmkit)
CMAKE
echo 'int main() { return 0; }' >"$parent/user.cpp"
torch_prefix="$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")"
cmake -S "$parent" -B "$parent/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$torch_prefix" >"$parent.log" 2>&1 ||
  { tail -30 "$parent.log"; exit 1; }
if grep -q "lmkit_tests" "$parent/build/build.ninja" 2>/dev/null; then echo "FAIL: a subproject builds lmkit's tests"; exit 1; fi
echo "install: ok (prefix $prefix, example built and run, add_subdirectory configures)"
