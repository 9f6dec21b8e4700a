#!/usr/bin/env bash
# lmkit against HuggingFace Transformers, side by side in one run, on the same LibTorch
# (the .venv's torch), the same shapes and thread count: every ratio in
# docs/benchmarks.md's table comes from this command.
#
#   bash bench/compare_hf.sh [OUT_DIR]          (default runs/bench-hf; one log per run)
#   STEPS=10 ROUNDS=2 THREADS=2 DEVICE=cpu SHAPES="bert-mini-30522 gpt-mini-8000" bash bench/compare_hf.sh
#
# For each shape and dtype it runs lmkit-bench train, HF with eager attention and HF with
# SDPA, interleaved ROUNDS times (so a slow minute hurts all three alike), and prints the
# best tokens/s of each and lmkit's ratio to each HF variant. On a GPU (DEVICE=cuda) the
# HF runs also include torch.compile (HF_COMPILE=1).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/bench-hf}
mkdir -p "$out"
steps=${STEPS:-10} rounds=${ROUNDS:-2} threads=${THREADS:-$(nproc)} device=${DEVICE:-cpu}
py=${PYTHON:-.venv/bin/python}
lmkit=${LMKIT_BENCH:-build/bin/lmkit-bench}
shapes=${SHAPES:-"bert-mini-30522 gpt-mini-8000 t5-mini-8000"}
dtypes=${DTYPES:-"fp32 bf16"}
peers="eager sdpa"
[ "${HF_COMPILE:-0}" = 1 ] && peers="$peers sdpa-compiled"

shape_args() {  # NAME -> the model and shape arguments both sides take
  case $1 in
    bert-mini-30522) echo "--model models/bert-mini.json --batch-size 32 --seq-len 128" ;;
    bert-mini-8000) echo "--model models/bert-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    gpt-mini-8000) echo "--model models/gpt-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    t5-mini-8000) echo "--model models/t5-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --target-len 32" ;;
    gpt2-small-b16x1024) echo "--model models/gpt2-small.json --batch-size 16 --seq-len 1024" ;;
    bert-base-b32x512) echo "--model models/bert-base.json --batch-size 32 --seq-len 512" ;;
    *) echo "unknown shape $1" >&2; exit 2 ;;
  esac
}
rate() { grep -E '^tokens_per_sec' "$1" | awk '{print $2}'; }
best() { printf '%s\n' "$@" | sort -n | tail -1; }

printf '%-20s %-5s %10s' shape dtype lmkit
for p in $peers; do printf ' %14s %7s' "HF $p" ratio; done
printf '\n'
for shape in $shapes; do
  for dtype in $dtypes; do
    args=$(shape_args "$shape")
    declare -A r=()
    for round in $(seq "$rounds"); do
      log=$out/$shape-$dtype-lmkit-$round.log
      $lmkit train $args --steps "$steps" --dtype "$dtype" --threads "$threads" --device "$device" > "$log" 2>&1
      r[lmkit]="${r[lmkit]:-} $(rate "$log")"
      for p in $peers; do
        log=$out/$shape-$dtype-hf-$p-$round.log
        extra=(--attn "${p%%-*}")
        [ "$p" = sdpa-compiled ] && extra+=(--compile)
        $py bench/hf_train.py $args --steps "$steps" --dtype "$dtype" --threads "$threads" --device "$device" \
          "${extra[@]}" > "$log" 2>&1
        r[$p]="${r[$p]:-} $(rate "$log")"
      done
    done
    l=$(best ${r[lmkit]})
    printf '%-20s %-5s %10.0f' "$shape" "$dtype" "$l"
    for p in $peers; do
      h=$(best ${r[$p]})
      printf ' %14.0f %6.2fx' "$h" "$(awk -v a="$l" -v b="$h" 'BEGIN { print a / b }')"
    done
    printf '\n'
    unset r
  done
done
echo "tokens/s, best of $rounds interleaved rounds of $steps timed steps (median step each); $threads threads, device $device;"
echo "HF: $($py -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)'); logs in $out"
