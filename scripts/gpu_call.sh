#!/usr/bin/env bash
# The GPU issue's one prepared call (docs/testing.md, "The prepared GPU call"): on a GPU
# machine, from a checkout of the repository with scripts/gpu_bundle.sh's tarball beside it,
# in under 8 minutes:
#   1. scripts/gpu_verify.sh for every family, in four parallel groups (the [cuda] tests,
#      fused-kernel parity and exact resume among them, in the first);
#   2. bench/compare_hf.sh, bf16, one round, HF compiled and the compact GPT-2 peers, lmkit
#      with its fused kernels (LMKIT_ENABLE=fused) and without them (the "lmkit-unfused" column),
#      for gpt2-small B16x1024, bert-base B32x512 and t5-base B32x512;
#   3. a kernel-time profile of one gpt2-small step with and without the fused kernels, and
#      with them under --dtype bf16-weights (bench/trace_summary.py: the top kernels by GPU time),
#      and the unfused step again with --recompute (its peak GPU memory beside the unfused one's).
# It writes at most 8 small files into OUT (summaries and logs; checkpoints and traces stay in
# WORK) and prints their table. Each phase has a time limit; what it reached is written.
#
#   OUT=$OUT bash scripts/gpu_call.sh lmkit-gpu.tar.xz     (on the GPU machine)
#   DEVICE=cpu bash scripts/gpu_call.sh                   (its own check here: build/bin, small shapes)
#
# Optional: WORK (/tmp/lmkit-call), VERIFY_S (150), BENCH_S (230), PROFILE_S (35 each), SHAPES, PLUGIN.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
DEVICE=${DEVICE:-cuda}
OUT=${OUT:-runs/gpu-call}
WORK=${WORK:-/tmp/lmkit-call}
bundle=${1:-}
mkdir -p "$OUT" "$WORK" && OUT=$(realpath "$OUT") WORK=$(realpath "$WORK")
log=$OUT/call.log
: >"$log"
say() { echo "$*" | tee -a "$log"; }
start=$SECONDS

if [ -n "$bundle" ]; then
  [ -f "$bundle" ] || { echo "error: $bundle: no such bundle (scripts/gpu_bundle.sh makes it)" >&2; exit 2; }
  mkdir -p /tmp/lmkit && xz -dc "$bundle" | tar -C /tmp/lmkit -xf - || { echo "error: $bundle: cannot unpack" >&2; exit 1; }
  PY=${PYTHON:-python3}
  torch_lib=$($PY -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib
  export LD_LIBRARY_PATH=/tmp/lmkit/lib:/tmp/lmkit/deps:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  BIN=/tmp/lmkit/bin
  [ -f /tmp/lmkit/lib/liblmkit_electra.so ] && PLUGIN=${PLUGIN:-/tmp/lmkit/lib/liblmkit_electra.so}
else
  BIN=${BIN:-build/bin} PY=${PYTHON:-.venv/bin/python}
fi
[ -x "$BIN/lmkit-bench" ] || { echo "error: $BIN/lmkit-bench is missing (build, or pass the bundle)" >&2; exit 1; }
if [ "$DEVICE" = cuda ]; then
  dtype=bf16 steps=10 shapes=${SHAPES:-"gpt2-small-b16x1024 bert-base-b32x512 t5-base-b32x512"} compile=1
  profile_shape=(--model models/gpt2-small.json --batch-size 16 --seq-len 1024)
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
else
  dtype=fp32 steps=4 shapes=${SHAPES:-"gpt-mini-8000"} compile=0
  profile_shape=(--model models/gpt-mini.json --vocab-size 8000 --batch-size 4 --seq-len 64)
fi
say "gpu_call: device $DEVICE, bin $BIN, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# 1. Every app's CUDA path per family, four groups at once (each group its own folders).
phase=$SECONDS
groups=("gpt llama" "bert roberta spanbert" "t5 mistral" "bloom${PLUGIN:+ electra}") threads=4
[ "$DEVICE" = cuda ] || groups=("gpt" "bert") threads=1  # the CPU self-check: two families, one thread each
pids=()
for i in "${!groups[@]}"; do
  FAMILIES=${groups[$i]} CUDA_TESTS=$([ "$i" = 0 ] && echo 1 || echo 0) BIN=$BIN DEVICE=$DEVICE DTYPE=$dtype \
    STEPS=$steps THREADS=$threads PLUGIN=${PLUGIN:-} OUT=$WORK/verify-$i \
    timeout "${VERIFY_S:-150}" bash scripts/gpu_verify.sh >"$WORK/verify-$i.out" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
{
  printf '| check | result | seconds | log |\n|---|---|---|---|\n'
  for i in "${!groups[@]}"; do grep -E '^\| [a-z0-9-]+ \| (pass|FAIL)' "$WORK/verify-$i/summary.md" 2>/dev/null |
    sed "s#logs/#verify-$i/logs/#"; done
} >"$OUT/verify.md"
# The failing checks' logs (their last lines), so that a failure is readable from OUT alone.
: >"$OUT/verify-failures.log"
for i in "${!groups[@]}"; do
  grep -h ' FAIL ' "$WORK/verify-$i/summary.md" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $5); print $5}' |
    while read -r f; do echo "---- verify-$i/$f"; tail -30 "$WORK/verify-$i/$f"; done >>"$OUT/verify-failures.log"
  grep -q 'summary' "$WORK/verify-$i.out" || echo "---- group $i (${groups[$i]}) did not finish within ${VERIFY_S:-150} s" >>"$OUT/verify-failures.log"
done
pass=$(grep -c '| pass |' "$OUT/verify.md") fail=$(grep -c '| FAIL |' "$OUT/verify.md")
say "1. verify: $pass passed, $fail failed in $((SECONDS - phase)) s ($OUT/verify.md)"

# 2. Throughput against HF (eager, sdpa, compiled) and the compact GPT-2, fused and unfused lmkit.
phase=$SECONDS
PYTHON=$PY LMKIT_BENCH=$BIN/lmkit-bench DEVICE=$DEVICE DTYPES=$dtype HF_COMPILE=$compile ROUNDS=1 STEPS=10 FUSED=1 \
  SHAPES=$shapes THREADS=8 timeout "${BENCH_S:-230}" bash bench/compare_hf.sh "$WORK/bench" >"$OUT/bench.txt" 2>&1 ||
  echo "(compare_hf.sh stopped: exit $?, limit ${BENCH_S:-230} s)" >>"$OUT/bench.txt"
say "2. bench: $((SECONDS - phase)) s ($OUT/bench.txt)"

# 3. Where one step's GPU time goes, with and without the fused kernels.
phase=$SECONDS
: >"$OUT/profile.txt"
for mode in fused unfused bf16-weights; do
  trace=$WORK/trace-$mode.json
  mode_dtype=$dtype
  [ $mode = bf16-weights ] && mode_dtype=bf16-weights
  env $([ $mode != unfused ] && echo LMKIT_ENABLE=fused) timeout "${PROFILE_S:-35}" "$BIN/lmkit-bench" train \
    "${profile_shape[@]}" --steps 3 --dtype "$mode_dtype" --device "$DEVICE" --threads 8 --profile "$trace" --overwrite \
    >"$WORK/profile-$mode.log" 2>&1
  { echo "== $mode: $(grep -E '^tokens_per_sec' "$WORK/profile-$mode.log")"
    $PY bench/trace_summary.py "$trace" 15 2>&1 || tail -5 "$WORK/profile-$mode.log"; } >>"$OUT/profile.txt"
done
# --recompute on the GPU (its CUDA generator replay): the unfused run's shape again, peak memory beside it.
timeout "${RECOMPUTE_S:-30}" "$BIN/lmkit-bench" train "${profile_shape[@]}" --steps 3 --dtype "$dtype" --device "$DEVICE" \
  --threads 8 --recompute >"$WORK/recompute.log" 2>&1
{ echo "== recompute (unfused, --recompute) against unfused:"
  grep -E '^(step \(|peak GPU memory|tokens_per_sec)' "$WORK/recompute.log" || tail -5 "$WORK/recompute.log"
  grep -E '^(step \(|peak GPU memory|tokens_per_sec)' "$WORK/profile-unfused.log"; } >>"$OUT/profile.txt"
say "3. profile: $((SECONDS - phase)) s ($OUT/profile.txt)"
say "gpu_call: $((SECONDS - start)) s in all"

echo; cat "$OUT/verify.md" | grep -v '| pass |'; echo; cat "$OUT/bench.txt"; echo; head -40 "$OUT/profile.txt"
[ "$fail" -eq 0 ]
