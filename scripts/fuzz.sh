#!/usr/bin/env bash
# Runs the libFuzzer harnesses (tests/fuzz) of a fuzz build over seed corpora made
# from the test fixtures (tests/fuzz/make_seeds.py), and prints executions, coverage
# and the verdict per target. Inputs the fuzzer found interesting are kept in
# WORK/TARGET/corpus for the next run; a crash is saved as WORK/TARGET/crash-* and
# fails the run (turn it into a regression test; docs/testing.md).
#
#   scripts/fuzz.sh [--bin DIR] [--work DIR] [--seconds N | --runs N] [--jobs N] [TARGET...]
#
# Defaults: build-asan/bin (scripts/sanitize.sh builds it), build-asan/fuzz,
# 60 seconds per target, every target, one target at a time.
# The long run recorded in docs/testing.md: scripts/fuzz.sh --runs 1000000 --jobs 2
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/build-asan/bin" work="$root/build-asan/fuzz" limit=(-max_total_time=60) jobs=1 targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/tests/fuzz/*_fuzz.cpp; do n="$(basename "$f" _fuzz.cpp)"; targets+=("$n"); done
fi
bin="$(realpath -m "$bin")" work="$(realpath -m "$work")"
python="$root/.venv/bin/python"
[ -x "$python" ] || { echo "error: $python missing: run scripts/setup.sh" >&2; exit 1; }
mkdir -p "$work"
# Seeds are made once per work folder (deterministic; remake with rm -r WORK/seeds).
if [ ! -d "$work/seeds" ]; then
  "$python" "$root/tests/fuzz/make_seeds.py" "$work/seeds.tmp.$$" >"$work/seeds.$$.log" 2>&1 ||
    { echo "error: making the seed corpora failed (see $work/seeds.$$.log)" >&2; rm -rf "$work/seeds.tmp.$$"; exit 1; }
  # -T: a concurrent run that made them first wins; this copy goes.
  mv -T "$work/seeds.tmp.$$" "$work/seeds" 2>/dev/null || rm -rf "$work/seeds.tmp.$$"
fi
# UBSan and ASan findings abort (the harness's own verdict for stray exceptions too).
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS=1

run_target() {
  local t="$1" exe="$bin/lmkit-fuzz-$1" dir="$work/$1"
  [ -x "$exe" ] || { echo "$t: error: $exe missing (configure with -DLMKIT_FUZZ=ON: scripts/sanitize.sh)"; return 1; }
  mkdir -p "$dir/corpus"
  local log="$dir/fuzz.log" rc=0 seeds=("$work/seeds/$t")
  # Past findings (tests/fuzz/regressions) are seeds too: a regression shows at once.
  [ -d "$root/tests/fuzz/regressions/$t" ] && seeds+=("$root/tests/fuzz/regressions/$t")
  # -max_len: the largest seed is a 19 KB tokenizer.json; room to grow past it.
  (cd "$dir" && "$exe" "${limit[@]}" -max_len=65536 -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$dir/" "$dir/corpus" "${seeds[@]}") >"$log" 2>&1 || rc=$?
  local runs cov secs
  runs="$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}')"
  secs="$(grep -E '^stat::' "$log" >/dev/null && grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | awk '{print $5}')"
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
  if [ "$rc" -eq 0 ]; then
    echo "$t: ok: ${runs:-?} executions${secs:+ in ${secs} s}, coverage ${cov:-?} edges, corpus $(ls "$dir/corpus" | wc -l) inputs"
  else
    echo "$t: FAILED (exit $rc) after ${runs:-?} executions: $(ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* 2>/dev/null | head -3 | tr '\n' ' ')"
    grep -E "ERROR|runtime error|fuzz: |SUMMARY|Test unit written" "$log" | head -8
  fi
  return "$rc"
}
export -f run_target
export bin work root
export limit_str="${limit[*]}"
status=0
if [ "$jobs" -gt 1 ]; then
  printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'limit=($limit_str); run_target {}' || status=1
else
  for t in "${targets[@]}"; do run_target "$t" || status=1; done
fi
exit "$status"
