#!/usr/bin/env bash
# Runs the libFuzzer harnesses (tests/fuzz) of a fuzz build over the committed seed
# corpora (tests/fuzz/seeds, made from the test fixtures by tests/fuzz/make_seeds.py),
# and prints executions, coverage and the verdict per target. Inputs the fuzzer found interesting are kept in
# WORK/TARGET/corpus for the next run; a crash is saved as WORK/TARGET/crash-* and
# fails the run (turn it into a regression test; docs/testing.md).
#
#   scripts/fuzz.sh [--bin DIR] [--work DIR] [--seconds N | --runs N] [--seed N] [--jobs N] [TARGET...]
#
# Defaults: build-asan/bin (scripts/sanitize.sh builds it), build-asan/fuzz,
# 60 seconds per target, every target, one target at a time.
# --seed N: a reproducible run (CI's: with --runs, the same executions every time):
# libFuzzer's -seed=N from the seeds and tests/fuzz/regressions alone (the corpus
# grown by earlier runs is left out; this one's is WORK/TARGET/corpus-seed-N),
# without comparison-guided mutations (docs/testing.md says why).
# The long run recorded in docs/testing.md: scripts/fuzz.sh --runs 1000000 --jobs 2
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build-asan/bin" work="$root/build-asan/fuzz" limit=(-max_total_time=60) jobs=1 seed="" targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$seed" in
  "") ;;
  *[!0-9]*) echo "error: --seed wants a non-negative integer, got '$seed'" >&2; exit 2 ;;
  # -use_cmp=0: the values the comparison tracer learns include heap addresses, which
  # differ from run to run, and so did the inputs it then built (measured: three runs,
  # three coverages). Dictionary words from memcmp (-use_memmem) stay deterministic.
  # -reload=0: no rereading of the corpus folder on a clock.
  *) limit+=(-seed="$seed" -use_cmp=0 -reload=0) ;;
esac
# And without address-space randomisation where the kernel allows it (setarch -R): with
# liblmkit.so loaded at a random address, json_config reached 3,070 or 3,071 edges from
# the same seed (three runs under setarch -R: 3,070 each time).
norandom=()
if [ -n "$seed" ] && setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/tests/fuzz/*_fuzz.cpp; do n="$(basename "$f" _fuzz.cpp)"; targets+=("$n"); done
fi
bin="$(realpath -m "$bin")" work="$(realpath -m "$work")"
mkdir -p "$work"
# Scratch and staged seeds in tmpfs, where there is one (fuzz_util.h's choice too).
tmp=/dev/shm
[ -d "$tmp" ] || tmp="${TMPDIR:-/tmp}"
# UBSan and ASan findings abort (the harness's own verdict for stray exceptions too).
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS=1

run_target() {
  local t="$1" exe="$bin/lmkit-fuzz-$1" dir="$work/$1"
  [ -x "$exe" ] || { echo "$t: error: $exe missing (configure with -DLMKIT_FUZZ=ON: scripts/sanitize.sh)"; return 1; }
  local corpus="$dir/corpus" log="$dir/fuzz.log" rc=0 seeds=("$root/tests/fuzz/seeds/$t") staged="" scratch
  # The harness's scratch files, removed after the run: a name of fuzz_util.h's length
  # (lmkit-fuzz- and 10 characters), since it ends up in the messages the harness sees.
  scratch="$(mktemp -d "$tmp/lmkit-fuzz-XXXXXXXXXX")"
  # Past findings (tests/fuzz/regressions) are seeds too: a regression shows at once.
  [ -d "$root/tests/fuzz/regressions/$t" ] && seeds+=("$root/tests/fuzz/regressions/$t")
  if [ -n "$seed" ]; then
    # A reproducible run grows a corpus of its own, emptied first (libFuzzer writes new
    # inputs to the first folder). It reads the seeds in the order the folder lists
    # them, which on ext4 follows a hash of the file system's own: staged in tmpfs,
    # which lists files in the reverse order of their creation, the order is the same
    # on every machine.
    corpus="$dir/corpus-seed-$seed"; rm -rf "$corpus"
    staged="$(mktemp -d "$tmp/lmkit-fuzz-seeds.XXXXXX")"
    local f i=0
    while IFS= read -r f; do
      cp "$f" "$staged/$(printf '%05d' $i)"; i=$((i + 1))
    done < <(find "${seeds[@]}" -type f ! -name README.md -printf '%P\t%p\n' | LC_ALL=C sort | cut -f2)
    seeds=("$staged")
  fi
  mkdir -p "$corpus"
  # -max_len: the largest seed is a 19 KB tokenizer.json; room to grow past it.
  (cd "$dir" && LMKIT_FUZZ_SCRATCH="$scratch" "${norandom[@]}" "$exe" "${limit[@]}" -max_len=65536 -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$dir/" "$corpus" "${seeds[@]}") >"$log" 2>&1 || rc=$?
  rm -rf "$scratch" ${staged:+"$staged"}
  local runs cov ft secs
  runs="$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}')"
  secs="$(grep -E '^stat::' "$log" >/dev/null && grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | awk '{print $5}')"
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
  ft="$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
  if [ "$rc" -eq 0 ]; then
    echo "$t: ok: ${runs:-?} executions${secs:+ in ${secs} s}, coverage ${cov:-?} edges, ${ft:-?} features, corpus $(ls "$corpus" | wc -l) inputs${seed:+ (seed $seed)}"
  else
    echo "$t: FAILED (exit $rc) after ${runs:-?} executions: $(ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* 2>/dev/null | head -3 | tr '\n' ' ')"
    grep -E "ERROR|runtime error|fuzz: |SUMMARY|Test unit written" "$log" | head -8
  fi
  return "$rc"
}
export -f run_target
export bin work root seed tmp
export limit_str="${limit[*]}" norandom_str="${norandom[*]}"
status=0
if [ "$jobs" -gt 1 ]; then
  printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'limit=($limit_str) norandom=($norandom_str); run_target {}' || status=1
else
  for t in "${targets[@]}"; do run_target "$t" || status=1; done
fi
exit "$status"
