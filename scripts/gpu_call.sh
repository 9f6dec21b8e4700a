#!/usr/bin/env bash
# The GPU issue's prepared calls (docs/testing.md, "The prepared GPU call"), run on a GPU machine
# from a checkout of the repository with scripts/gpu_bundle.sh's tarball beside it. Two calls,
# each well under 5 minutes, so that a lent machine (15 minutes, 10 a call) can run one, take a
# fix and run it again:
#
#   A, verify: 1. lmkit_tests "[fused]" alone, CUDA_LAUNCH_BLOCKING=1 (an illegal access names
#      its kernel and poisons nothing after it), then under compute-sanitizer's memcheck where the
#      machine has it; 2. at once, the rest of "[cuda]" (exact resume among it), NCCL under
#      torchrun (tests/distributed/ddp_test.py nccl: plain, --shard-optimizer with its
#      all-gather overlapped and not, --recompute with --dtype bf16-weights) and scripts/gpu_verify.sh for every family in parallel groups. A failing check's whole log
#      (the full Catch report for the test binary) comes back in OUT/failures/.
#   B, measure: bench/compare_hf.sh, bf16, one round, lmkit with its fused kernels
#      (the default) and without (LMKIT_DISABLE=fused: "lmkit-unfused"), HF sdpa compiled and the compact
#      GPT-2 (eager and compiled) for gpt2-small B16x1024, then t5-base and bert-base B32x512
#      (t5-base before bert-base: both GPU calls so far spent the phase's time before reaching it);
#      gpt2-small with the fused path's pre-norm hand-over on and off (bench/levers.sh, fused_prenorm),
#      and with --dtype bf16-weights against autocast (bf16);
#      then a kernel-time profile of one gpt2-small step fused and unfused.
#   AB: A then B in one call (when a machine may not come back for a second).
#
#   OUT=$OUT bash scripts/gpu_call.sh A gpu/lmkit.tar.xz     (on the GPU machine; B, AB likewise)
#   DEVICE=cpu bash scripts/gpu_call.sh A                    (its own check here: build/bin, small shapes)
#   VERIFY_S=5 DEVICE=cpu bash scripts/gpu_call.sh A         (a cut-off, reported as one)
#
# Every phase runs under its own limit (FUSED_S 60, VERIFY_S 170, BENCH_S 270, LEVERS_S 60, DTYPE_S 45 and
# PROFILE_S 30 each);
# a phase cut off by it is reported as "did not finish" and the call exits 1. OUT gets small
# files only (call.log, verify.md, failures/, bench.txt, levers.txt, profile.txt); checkpoints and traces
# stay in WORK (/tmp/lmkit-call). Optional: SHAPES, PLUGIN, PYTHON.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mode=${1:-}
case $mode in
  A | B | AB) shift ;;
  *) echo "error: gpu_call.sh: the first argument must be A (verify), B (measure) or AB, not '$mode'" >&2; exit 2 ;;
esac
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-runs/gpu-call}
WORK=${WORK:-/tmp/lmkit-call}
bundle=${1:-}
mkdir -p "$OUT/failures" "$WORK" && OUT=$(realpath "$OUT") WORK=$(realpath "$WORK")
log=$OUT/call.log
: >>"$log"
say() { echo "$*" | tee -a "$log"; }
start=$SECONDS failed=0

if [ -n "$bundle" ]; then
  [ -f "$bundle" ] || { echo "error: $bundle: no such bundle (scripts/gpu_bundle.sh makes it)" >&2; exit 2; }
  if [ ! -x /tmp/lmkit/bin/lmkit-bench ] || [ "$bundle" -nt /tmp/lmkit/bin/lmkit-bench ]; then
    mkdir -p /tmp/lmkit && xz -dc "$bundle" | tar -C /tmp/lmkit -xf - || { echo "error: $bundle: cannot unpack" >&2; exit 1; }
    touch /tmp/lmkit/bin/lmkit-bench
  fi
  PY=${PYTHON:-python3}
  torch_lib=$($PY -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
  export LD_LIBRARY_PATH=/tmp/lmkit/lib:/tmp/lmkit/deps:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  BIN=/tmp/lmkit/bin
  [ -f /tmp/lmkit/lib/liblmkit_electra.so ] && PLUGIN=${PLUGIN:-/tmp/lmkit/lib/liblmkit_electra.so}
else
  BIN=${BIN:-build/bin} PY=${PYTHON:-.venv/bin/python}
fi
[ -x "$BIN/lmkit-bench" ] || { echo "error: $BIN/lmkit-bench is missing (build, or pass the bundle)" >&2; exit 1; }
BIN=$(realpath "$BIN")
# The test binary reads the checkout and the apps from here, not from the build machine's paths.
export LMKIT_TEST_SOURCE_DIR=$PWD LMKIT_TEST_BIN_DIR=$BIN
if [ "$DEVICE" = cuda ]; then
  dtype=bf16 steps=20 cores=$(nproc)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
else
  dtype=fp32 steps=4 cores=1
fi
say "gpu_call $mode: device $DEVICE, bin $BIN, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# run_limited NAME LIMIT_S COMMAND...: one line of verify.md; on failure or cut-off the whole
# log goes to OUT/failures/NAME.log. A cut-off (timeout's 124/137) counts as a failure.
run_limited() {
  local name=$1 limit=$2 t0=$SECONDS rc=0 result=pass
  shift 2
  timeout -k 5 "$limit" "$@" >"$WORK/$name.log" 2>&1 || rc=$?
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    result="FAIL (did not finish within $limit s)"
  elif [ $rc != 0 ]; then
    result="FAIL (exit $rc)"
  fi
  printf '| %s | %s | %d |\n' "$name" "$result" $((SECONDS - t0)) >>"$OUT/verify.md"
  if [ "$result" != pass ]; then
    cp "$WORK/$name.log" "$OUT/failures/$name.log"
    # A family group's own failing checks, whole.
    [ -f "$WORK/$name/summary.md" ] && grep -h ' FAIL ' "$WORK/$name/summary.md" | awk -F'|' '{gsub(/ /, "", $5); print $5}' |
      while read -r f; do cp "$WORK/$name/$f" "$OUT/failures/$name-$(basename "$f")"; done
    # A family group cut off: the checks it never reached.
    case $name in verify-*) grep -q "^[0-9]* failed;" "$WORK/$name.log" ||
      echo "---- $name: cut off before its last check" >>"$OUT/failures/$name.log" ;; esac
  fi
  [ "$result" = pass ]
}

verify() {
  local phase=$SECONDS
  printf '| check | result | seconds |\n|---|---|---|\n' >"$OUT/verify.md"
  if [ "$DEVICE" = cuda ]; then
    # 1. The fused kernels alone first, synchronously, then under memcheck.
    CUDA_LAUNCH_BLOCKING=1 run_limited fused-tests "${FUSED_S:-60}" "$BIN/lmkit_tests" "[fused]" -d yes ||
      failed=$((failed + 1))
    sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
    if [ -n "$sanitizer" ]; then
      run_limited fused-memcheck "${FUSED_S:-60}" "$sanitizer" --tool memcheck --error-exitcode 9 \
        "$BIN/lmkit_tests" "[fused]" || failed=$((failed + 1))
    else
      say "(no compute-sanitizer on this machine: memcheck skipped)"
    fi
  fi
  # 2. The rest of [cuda] and the families, all at once (each its own folders and threads).
  local groups=("gpt" "llama mistral" "bert roberta" "spanbert" "t5" "bloom${PLUGIN:+ electra}") threads=2
  [ "$DEVICE" = cuda ] || groups=("gpt" "bert") threads=1
  local pids=() i
  if [ "$DEVICE" = cuda ]; then
    (run_limited cuda-tests "${VERIFY_S:-170}" "$BIN/lmkit_tests" "[cuda]~[fused]" -d yes) & pids+=($!)
    # NCCL under torchrun, plain and with --shard-optimizer (its all-gather overlapped and not).
    (run_limited nccl "${VERIFY_S:-170}" "$PY" tests/distributed/ddp_test.py nccl --bin "$BIN" --work "$WORK/nccl") & pids+=($!)
  fi
  for i in "${!groups[@]}"; do
    (run_limited "verify-$i" "${VERIFY_S:-170}" env FAMILIES="${groups[$i]}" CUDA_TESTS=0 BIN="$BIN" DEVICE="$DEVICE" \
      DTYPE=$dtype STEPS=$steps THREADS=$threads PLUGIN="${PLUGIN:-}" OUT="$WORK/verify-$i" \
      SIGTERM=$([ "$i" = 0 ] && echo 1 || echo 0) bash scripts/gpu_verify.sh) & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
  # The families' own check lines, after the groups'.
  for i in "${!groups[@]}"; do
    grep -E '^\| [a-z0-9-]+ \| (pass|FAIL)' "$WORK/verify-$i/summary.md" 2>/dev/null | cut -d'|' -f1-4 | sed 's/$/|/'
  done >>"$OUT/verify.md"
  local pass fail
  pass=$(grep -c '| pass |' "$OUT/verify.md") fail=$(grep -c '| FAIL' "$OUT/verify.md")
  say "A. verify: $pass passed, $fail failed in $((SECONDS - phase)) s ($OUT/verify.md)"
}

measure() {
  local phase=$SECONDS shapes profile_shape compile=0 lever_shape lever_steps
  if [ "$DEVICE" = cuda ]; then
    shapes=${SHAPES:-"gpt2-small-b16x1024 t5-base-b32x512 bert-base-b32x512"} compile=1
    profile_shape=(--model models/gpt2-small.json --batch-size 16 --seq-len 1024)
    lever_shape=gpt2-small lever_steps=10
  else
    shapes=${SHAPES:-"gpt-mini-8000"}
    profile_shape=(--model models/gpt-mini.json --vocab-size 8000 --batch-size 4 --seq-len 64)
    lever_shape=gpt lever_steps=1
  fi
  # Only the peers the targets name: HF sdpa compiled, the compact GPT-2 eager and compiled.
  local rc=0
  PYTHON=$PY LMKIT_BENCH=$BIN/lmkit-bench DEVICE=$DEVICE DTYPES=$dtype HF_COMPILE=$compile \
    HF_PEERS=$([ $compile = 1 ] && echo ' ' || echo sdpa) ROUNDS=1 STEPS=10 FUSED=1 SHAPES=$shapes THREADS=8 \
    timeout -k 5 "${BENCH_S:-270}" bash bench/compare_hf.sh "$WORK/bench" >"$OUT/bench.txt" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    echo "(compare_hf.sh stopped: exit $rc, limit ${BENCH_S:-270} s)" >>"$OUT/bench.txt"
    failed=$((failed + 1))
  fi
  say "B. bench: $((SECONDS - phase)) s ($OUT/bench.txt)"
  phase=$SECONDS
  # The fused path's pre-norm hand-over and bf16 norm outputs on and off (LMKIT_DISABLE=fused_prenorm).
  rc=0
  LMKIT_BENCH=$BIN/lmkit-bench DEVICE=$DEVICE DTYPE=$dtype STEPS=$lever_steps ROUNDS=1 THREADS=8 \
    LEVERS=fused_prenorm SHAPES=$lever_shape timeout -k 5 "${LEVERS_S:-60}" bash bench/levers.sh "$WORK/levers" \
    >"$OUT/levers.txt" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    echo "(levers.sh stopped: exit $rc, limit ${LEVERS_S:-60} s)" >>"$OUT/levers.txt"
    failed=$((failed + 1))
  fi
  say "B. levers: $((SECONDS - phase)) s ($OUT/levers.txt)"
  phase=$SECONDS
  # bf16 weights in the step with float32 masters (--dtype bf16-weights) against autocast over float32
  # weights, whose per-step bf16 copies of the weights the profile books under copies: never run on a GPU.
  local weights_dtype
  {
    echo; echo "dtype (${profile_shape[*]}, ${lever_steps} steps): tokens/s, peak GPU memory"
    for weights_dtype in "$dtype" bf16-weights; do
      rc=0
      timeout -k 5 "${DTYPE_S:-45}" "$BIN/lmkit-bench" train "${profile_shape[@]}" --steps "$lever_steps" \
        --dtype "$weights_dtype" --device "$DEVICE" --threads 8 >"$WORK/dtype-$weights_dtype.log" 2>&1 || rc=$?
      echo "$weights_dtype: $(grep -E '^tokens_per_sec' "$WORK/dtype-$weights_dtype.log") $(grep -E 'peak GPU memory' "$WORK/dtype-$weights_dtype.log")$([ $rc = 0 ] || echo " (stopped: exit $rc)")"
      [ $rc = 0 ] || tail -5 "$WORK/dtype-$weights_dtype.log"
    done
  } >>"$OUT/levers.txt"
  say "B. dtype: $((SECONDS - phase)) s ($OUT/levers.txt)"
  phase=$SECONDS
  : >"$OUT/profile.txt"
  local mode
  for mode in fused unfused; do
    env $([ $mode = unfused ] && echo LMKIT_DISABLE=fused) timeout -k 5 "${PROFILE_S:-30}" "$BIN/lmkit-bench" train \
      "${profile_shape[@]}" --steps 3 --dtype "$dtype" --device "$DEVICE" --threads 8 --profile "$WORK/trace-$mode.json" \
      --overwrite >"$WORK/profile-$mode.log" 2>&1
    { echo "== $mode: $(grep -E '^tokens_per_sec' "$WORK/profile-$mode.log") $(grep -E 'peak GPU memory' "$WORK/profile-$mode.log")"
      $PY bench/trace_summary.py "$WORK/trace-$mode.json" 15 2>&1 || tail -5 "$WORK/profile-$mode.log"; } >>"$OUT/profile.txt"
  done
  say "B. profile: $((SECONDS - phase)) s ($OUT/profile.txt)"
}

case $mode in
  A) verify ;;
  B) measure ;;
  AB) verify; measure ;;
esac
say "gpu_call $mode: $((SECONDS - start)) s in all, $failed failed"
if [ -f "$OUT/verify.md" ]; then echo; grep -v '| pass |' "$OUT/verify.md"; fi
if [ -f "$OUT/bench.txt" ]; then echo; cat "$OUT/bench.txt" "$OUT/levers.txt"; echo; head -40 "$OUT/profile.txt"; fi
for f in "$OUT"/failures/*; do [ -f "$f" ] && { echo "---- $f (last 40 lines)"; tail -40 "$f"; }; done
[ "$failed" -eq 0 ]
