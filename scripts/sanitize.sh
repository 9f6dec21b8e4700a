#!/usr/bin/env bash
# The sanitizer job (docs/testing.md), built with clang in its own folders:
#   asan  build-asan: AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer);
#         runs the C++ test suite (every Catch2 case, the apps end to end) and each
#         libFuzzer harness for LMKIT_FUZZ_RUNS executions from a fixed seed (scripts/fuzz.sh runs longer).
#   tsan  build-tsan: ThreadSanitizer over the data, loader and trainer tests
#         (the prefetch thread, dropout masks made in parallel, checkpoint writes).
#   fuzzers  only the libFuzzer harnesses of build-asan (what scripts/fuzz.sh runs).
#
#   scripts/sanitize.sh [asan|tsan|fuzzers]...    (default: asan tsan)
#
# Any report fails the run. Interop tests against HuggingFace run in the main
# build (scripts/test.sh): they check numbers, which the sanitizers do not change.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${LMKIT_SETUP_DONE:-}" = 1 ] || bash scripts/setup.sh
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(asan tsan)
# -O1 and line tables only (libFuzzer's and the sanitizers' advice): reports keep their file:line,
# and the library's ASan build compiles faster than at -O2 -g (docs/testing.md).
common=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG")
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
for job in "${jobs[@]}"; do
  case "$job" in
    fuzzers)
      targets=""
      for f in tests/fuzz/*_fuzz.cpp; do n="$(basename "$f" _fuzz.cpp)"; targets="$targets lmkit-fuzz-$n"; done
      LMKIT_BUILD_DIR=build-asan LMKIT_TARGETS="${targets# }" bash scripts/build.sh "${common[@]}" \
        -DLMKIT_SANITIZE=address,undefined -DLMKIT_FUZZ=ON
      ;;
    asan)
      LMKIT_BUILD_DIR=build-asan bash scripts/build.sh "${common[@]}" -DLMKIT_SANITIZE=address,undefined -DLMKIT_FUZZ=ON \
        -DLMKIT_BUILD_BENCH=ON
      # LibTorch keeps some allocations until exit on purpose; leaks are reported, these are not.
      # allocator_may_return_null: a 10^12-element model is an error the tests expect, not an ASan abort.
      export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:suppressions=$PWD/tests/sanitizers/asan.supp"
      export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
      # Not here: tests of the main build or of packaging — the docs' blocks run build/bin, the
      # examples and install tests (and ELECTRA's, after them) compile against the library with
      # the system compiler, which cannot link an instrumented one, gpu call bundles build/.
      (cd build-asan && ctest -j2 --output-on-failure \
         -E "^(hf interop|tokenizer interop|distributed|docs:|examples:|install:|electra:|gpu call:)" 2>&1 |
        tee ctest.log | grep -E "tests passed|Failed|\*\*\*|^ *[0-9]+/[0-9]+ Test .*(fuzz|Failed)") || status=1
      ;;
    tsan)
      LMKIT_BUILD_DIR=build-tsan bash scripts/build.sh "${common[@]}" -DLMKIT_SANITIZE=thread -DLMKIT_BUILD_BENCH=OFF
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp"
      build-tsan/bin/lmkit_tests "[data],[train],[pretrain]" 2>&1 | tail -4 || status=1
      ;;
    *) echo "error: unknown sanitizer job '$job' (asan, tsan, fuzzers)" >&2; exit 2 ;;
  esac
done
exit "$status"
