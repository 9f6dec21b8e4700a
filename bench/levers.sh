#!/usr/bin/env bash
# Re-checks each hand-made speed-up against what LibTorch does natively: the same
# lmkit-bench train run with the lever on and with it off (LMKIT_DISABLE=NAME, see
# core/runtime.h), interleaved ROUNDS times; prints the best tokens/s of each and the gain.
#   bash bench/levers.sh [OUT_DIR]        (default runs/levers)
#   STEPS=8 ROUNDS=2 LEVERS="allocator dropout" SHAPES="bert gpt" bash bench/levers.sh
#   LEVERS=cpu_fused SHAPES="llama gpt" bash bench/levers.sh
#   DEVICE=cuda DTYPE=bf16 LEVERS="flash chunked_ce" SHAPES="gpt2-small bert-base" bash bench/levers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/levers "$@") || exit 2
mkdir -p "$out"
steps=${STEPS:-8} rounds=${ROUNDS:-2} threads=${THREADS:-$(nproc)} device=${DEVICE:-cpu} dtype=${DTYPE:-fp32}
lmkit=${LMKIT_BENCH:-build/bin/lmkit-bench}
levers=${LEVERS:-"allocator dropout"}
shapes=${SHAPES:-"bert gpt"}
args_of() {
  case $1 in
    bert) echo "--model models/bert-mini.json --batch-size 32 --seq-len 128" ;;  # vocab 30522, MLM
    gpt) echo "--model models/gpt-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    llama) echo "--model models/llama-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    gpt2-small) echo "--model models/gpt2-small.json --batch-size 16 --seq-len 1024" ;;
    bert-base) echo "--model models/bert-base.json --batch-size 32 --seq-len 512" ;;
  esac
}
rate() { grep -E '^tokens_per_sec' "$1" | awk '{print $2}'; }
best() { printf '%s\n' "$@" | sort -n | tail -1; }
printf '%-6s %-10s %12s %12s %7s\n' shape lever "on tok/s" "off tok/s" gain
for shape in $shapes; do
  for lever in $levers; do
    on=() off=()
    for round in $(seq "$rounds"); do
      common=(--steps "$steps" --threads "$threads" --device "$device" --dtype "$dtype")
      $lmkit train $(args_of "$shape") "${common[@]}" > "$out/$shape-$lever-on-$round.log" 2>&1
      on+=("$(rate "$out/$shape-$lever-on-$round.log")")
      LMKIT_DISABLE=$lever $lmkit train $(args_of "$shape") "${common[@]}" > "$out/$shape-$lever-off-$round.log" 2>&1
      off+=("$(rate "$out/$shape-$lever-off-$round.log")")
    done
    a=$(best "${on[@]}") b=$(best "${off[@]}")
    printf '%-6s %-10s %12.0f %12.0f %6.2fx\n' "$shape" "$lever" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')"
  done
done
echo "$dtype on $device, $threads threads, best of $rounds interleaved rounds of $steps timed steps; logs in $out"
