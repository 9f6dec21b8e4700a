#!/usr/bin/env bash
# ViT on Fashion-MNIST finetuned from MAE pretraining against from random initialisation
# (docs/results.md, "ViT and MAE"): vit-mini, the same finetuning budget for both, several seeds;
# the best epoch picked on a dev split held out of the training images (scripts/split_idx.py: the
# last 5,000), then the test images (t10k) scored once with lmkit-evaluate. Prints each run's
# test accuracy and each start's mean and spread over the seeds.
#   bash scripts/vit_fashion_results.sh [OUT_DIR]
#   (default runs/vit-fashion; FASHION=DIR of the IDX files (default /usr/share/datasets/fashion-mnist,
#   scripts/setup.sh installs it); MAE=CHECKPOINT to finetune from (default: pretrain vit-mae-mini into
#   OUT/mae for MAE_STEPS=3000 steps, as docs/training.md's run); EPOCHS=2 BATCH=128 LR=1e-3
#   SEEDS="1 2 3" THREADS=1 (each of the two starts of a seed runs beside the other))
# A run whose test result is there already is kept (a stopped experiment continues where it was).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/vit-fashion "$@") || exit 2
fashion=${FASHION:-/usr/share/datasets/fashion-mnist}
epochs=${EPOCHS:-2} batch=${BATCH:-128} lr=${LR:-1e-3} seeds=${SEEDS:-1 2 3} threads=${THREADS:-1}
mae_steps=${MAE_STEPS:-3000}
for v in "EPOCHS=$epochs" "BATCH=$batch" "THREADS=$threads" "MAE_STEPS=$mae_steps" $(printf 'SEEDS=%s ' $seeds); do
  [[ "${v#*=}" =~ ^[1-9][0-9]*$ ]] || { echo "error: ${v%%=*}: '${v#*=}' is not a positive whole number" >&2; exit 2; }
done
[[ "$lr" =~ ^[0-9.]+(e-?[0-9]+)?$ ]] || { echo "error: LR: '$lr' is not a number" >&2; exit 2; }
[ -n "$seeds" ] || { echo "error: SEEDS: no seed given" >&2; exit 2; }
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [ -f "$fashion/$f" ] || { echo "error: $fashion/$f: no such file (FASHION names Fashion-MNIST's folder; scripts/setup.sh installs it)" >&2; exit 2; }
done
if [ -n "${MAE:-}" ] && [ ! -f "$MAE/config.json" ]; then
  echo "error: MAE=$MAE: not a checkpoint directory (no config.json)" >&2; exit 2
fi
mkdir -p "$out"
[ -f "$out/split/dev-images-idx3-ubyte.gz" ] ||
  python3 scripts/split_idx.py --images "$fashion/train-images-idx3-ubyte.gz" --dev 5000 --output "$out/split" --overwrite
mae=${MAE:-$out/mae/final}
if [ -z "${MAE:-}" ] && [ ! -f "$mae/config.json" ]; then
  resume=()
  [ -d "$out/mae/checkpoints" ] && resume=(--resume)
  build/bin/lmkit-pretrain --model models/vit-mae-mini.json --objective mae --train "$fashion/train-images-idx3-ubyte.gz" \
    --valid "$fashion/t10k-images-idx3-ubyte.gz" --output "$out/mae" --steps "$mae_steps" --batch-size 128 --lr 1.5e-3 \
    --schedule cosine --warmup 200 --weight-decay 0.05 --eval-every 500 --eval-batches 20 --seed 1 "${resume[@]}" \
    > "$out/mae.log" 2>&1 || { tail -5 "$out/mae.log"; exit 1; }
fi
finetune() {  # name seed, then the start's flags
  local name=$1 seed=$2
  shift 2
  [ -f "$out/$name-test.json" ] && return 0
  build/bin/lmkit-finetune --task image-classification "$@" --train "$out/split/train-images-idx3-ubyte.gz" \
    --dev "$out/split/dev-images-idx3-ubyte.gz" --output "$out/$name" --overwrite --keep best --epochs "$epochs" \
    --batch-size "$batch" --lr "$lr" --weight-decay 0.05 --seed "$seed" --threads "$threads" > "$out/$name.log" 2>&1 ||
    { tail -5 "$out/$name.log"; return 1; }
  build/bin/lmkit-evaluate --metric image-classification --checkpoint "$out/$name/best" \
    --data "$fashion/t10k-images-idx3-ubyte.gz" --batch-size 256 --threads "$threads" --output "$out/$name-test.json" \
    --overwrite > "$out/$name-test.log" 2>&1 || { tail -5 "$out/$name-test.log"; return 1; }
}
for seed in $seeds; do
  finetune "mae-$seed" "$seed" --checkpoint "$mae" &
  pretrained=$!
  finetune "random-$seed" "$seed" --init random --model models/vit-mini.json || exit 1
  wait "$pretrained" || exit 1
done
python3 - "$out" $seeds <<'PY' | tee "$out/summary.txt"
import json, os, statistics, sys
out, seeds = sys.argv[1], sys.argv[2:]
for start in ("mae", "random"):
    test = [json.load(open(os.path.join(out, f"{start}-{s}-test.json")))["accuracy"] * 100 for s in seeds]
    dev = [json.load(open(os.path.join(out, f"{start}-{s}", "result.json")))["accuracy"] * 100 for s in seeds]
    spread = statistics.stdev(test) if len(test) > 1 else 0.0
    print(f"{start:<7} test accuracy {statistics.mean(test):6.2f} +- {spread:4.2f} "
          f"(seeds: {', '.join(f'{v:.2f}' for v in test)}; dev {', '.join(f'{v:.2f}' for v in dev)})")
PY
