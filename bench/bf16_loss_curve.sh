#!/usr/bin/env bash
# bf16 autocast and bf16 weights against fp32 over 200 steps of real pretraining: bert-mini,
# masked LM, the bundled WikiText-2 sample, batch 32 x 128. Four runs: fp32 with seed 1,
# fp32 with seed 2 (the seed-to-seed spread is the noise), bf16 autocast with seed 1 and
# --dtype bf16-weights with seed 1 (same initialisation, data order and masks as the first:
# any difference is precision).
#   bash bench/bf16_loss_curve.sh [OUT_DIR]     (default runs/bf16-curve; ~10 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/bf16-curve "$@") || exit 2
steps=${STEPS:-200}
rm -rf "$out"
mkdir -p "$out"
train() {  # name, seed, dtype, then extra flags
  local name=$1 seed=$2 dtype=$3
  shift 3
  echo "== $name (seed $seed, $dtype)"
  build/bin/lmkit-pretrain --model models/bert-mini.json \
    --train data/wikitext-2-sample/train.txt --valid data/wikitext-2-sample/valid.txt \
    --output "$out/$name" --objective mlm --steps "$steps" --batch-size 32 --seq-len 128 \
    --lr 5e-4 --warmup 30 --log-every 1 --eval-every 50 --seed "$seed" --dtype "$dtype" "$@" 2>&1 | tail -2
}
train fp32-seed1 1 fp32 --vocab-size 8000
tok="$out/fp32-seed1/tokenizer.model"
train fp32-seed2 2 fp32 --tokenizer "$tok"
train bf16-seed1 1 bf16 --tokenizer "$tok"
train bf16-weights-seed1 1 bf16-weights --tokenizer "$tok"
for candidate in bf16-seed1 bf16-weights-seed1; do
  echo "== $candidate against fp32 (seed 1), the seed-to-seed spread as the noise"
  python3 bench/compare_curves.py "$out/fp32-seed1/metrics.jsonl" "$out/fp32-seed2/metrics.jsonl" \
    "$out/$candidate/metrics.jsonl"
done | tee "$out/summary.txt"
python3 scripts/plot_metrics.py "$out"/{fp32-seed1,fp32-seed2,bf16-seed1,bf16-weights-seed1}/metrics.jsonl \
  --labels "fp32, seed 1" "fp32, seed 2" "bf16 autocast, seed 1" "bf16 weights, seed 1" --smooth 10 \
  --title "bert-mini MLM, WikiText-2 sample: bf16 autocast and bf16 weights vs fp32" -o "$out/bf16-vs-fp32.svg"
echo "picture: $out/bf16-vs-fp32.svg"
