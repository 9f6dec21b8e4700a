#!/usr/bin/env bash
# Re-checks each hand-made speed-up against what LibTorch does natively: the same
# lmkit-bench train run with the lever on and with it off (LMKIT_DISABLE=NAME, see
# core/runtime.h), interleaved ROUNDS times; prints the best tokens/s of each and the gain.
#   bash bench/levers.sh [OUT_DIR]        (default runs/levers)
#   STEPS=8 ROUNDS=2 LEVERS="allocator dropout" SHAPES="bert gpt" bash bench/levers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/levers}
mkdir -p "$out"
steps=${STEPS:-8} rounds=${ROUNDS:-2} threads=${THREADS:-$(nproc)}
levers=${LEVERS:-"allocator dropout"}
shapes=${SHAPES:-"bert gpt"}
args_of() {
  case $1 in
    bert) echo "--model models/bert-mini.json --batch-size 32 --seq-len 128" ;;  # vocab 30522, MLM
    gpt) echo "--model models/gpt-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
  esac
}
rate() { grep -E '^tokens_per_sec' "$1" | awk '{print $2}'; }
best() { printf '%s\n' "$@" | sort -n | tail -1; }
printf '%-6s %-10s %12s %12s %7s\n' shape lever "on tok/s" "off tok/s" gain
for shape in $shapes; do
  for lever in $levers; do
    on=() off=()
    for round in $(seq "$rounds"); do
      build/bin/lmkit-bench train $(args_of "$shape") --steps "$steps" --threads "$threads" > "$out/$shape-$lever-on-$round.log" 2>&1
      on+=("$(rate "$out/$shape-$lever-on-$round.log")")
      LMKIT_DISABLE=$lever build/bin/lmkit-bench train $(args_of "$shape") --steps "$steps" --threads "$threads" \
        > "$out/$shape-$lever-off-$round.log" 2>&1
      off+=("$(rate "$out/$shape-$lever-off-$round.log")")
    done
    a=$(best "${on[@]}") b=$(best "${off[@]}")
    printf '%-6s %-10s %12.0f %12.0f %6.2fx\n' "$shape" "$lever" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')"
  done
done
echo "fp32, $threads threads, best of $rounds interleaved rounds of $steps timed steps; logs in $out"
