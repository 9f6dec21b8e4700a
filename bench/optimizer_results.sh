#!/usr/bin/env bash
# Optimizers against each other on the same tokens (docs/results.md, "Optimizers"): t5-mini span
# corruption with AdamW and with Adafactor (T5's own recipe: the relative step min(1e-2, 1/sqrt(t)),
# the rate scaled by each parameter's RMS, no first moment), and gpt-mini causal LM with AdamW and
# with Muon (its matrices at AdamW's rate through match_rms_adamw, the rest AdamW), 3 seeds each,
# the bundled WikiText-2 sample, one tokenizer for all. Prints each run's final validation loss
# and each pair's mean and spread over the seeds.
#   bash bench/optimizer_results.sh [OUT_DIR]    (default runs/optimizers; STEPS=400 SEEDS="1 2 3")
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/optimizers "$@") || exit 2
steps=${STEPS:-400} seeds=${SEEDS:-1 2 3}
rm -rf "$out" && mkdir -p "$out"
data=(--train data/wikitext-2-sample/train.txt --valid data/wikitext-2-sample/valid.txt)
run() {  # name model objective seed steps, then flags
  local name=$1 model=$2 objective=$3 seed=$4 n=$5
  shift 5
  build/bin/lmkit-pretrain --model "models/$model.json" "${data[@]}" --objective "$objective" --output "$out/$name" \
    --steps "$n" --batch-size 16 --seq-len 128 --warmup $((n / 10)) --schedule cosine --log-every 10 \
    --seed "$seed" --threads "${THREADS:-2}" "$@" > "$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; exit 1; }
}
for family in t5 gpt; do
  model=$family-mini objective=$([ "$family" = t5 ] && echo span || echo clm)
  run "$family-tokenizer" "$model" "$objective" 1 1 --vocab-size 8000
  tok=(--tokenizer "$out/$family-tokenizer/tokenizer.model")
  for seed in $seeds; do
    run "$family-adamw-$seed" "$model" "$objective" "$seed" "$steps" "${tok[@]}" --optimizer adamw --lr 1e-3
    if [ "$family" = t5 ]; then
      run "$family-adafactor-$seed" "$model" "$objective" "$seed" "$steps" "${tok[@]}" --optimizer adafactor \
        --adafactor-relative-step true
    else
      run "$family-muon-$seed" "$model" "$objective" "$seed" "$steps" "${tok[@]}" --optimizer muon --lr 1e-3
    fi
  done
done
.venv/bin/python - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, statistics, sys
out = sys.argv[1]
def final_valid(name):
    rows = [json.loads(l) for l in open(os.path.join(out, name, "metrics.jsonl")) if '"valid"' in l]
    return rows[-1]["loss"]
for family, optimizers in (("t5", ("adamw", "adafactor")), ("gpt", ("adamw", "muon"))):
    for opt in optimizers:
        runs = sorted(d for d in os.listdir(out) if d.startswith(f"{family}-{opt}-") and not d.endswith(".log"))
        losses = [final_valid(r) for r in runs]
        spread = statistics.stdev(losses) if len(losses) > 1 else 0.0
        print(f"{family}-mini {opt:<10} validation loss {statistics.mean(losses):.4f} +- {spread:.4f} "
              f"(seeds: {', '.join(f'{x:.4f}' for x in losses)})")
PY
