#!/usr/bin/env bash
# Document masking against plain packing on the same tokens (docs/results.md, "Document masking"):
# gpt-mini causal LM on packed blocks with and without --document-mask (positions restart with the
# mask), 3 seeds, one tokenizer and one encoded corpus for all; then each checkpoint's validation
# perplexity twice: on the packed stream (documents run together, as plain training sees them) and
# on each document alone (lmkit-evaluate --per-document). Prints each run's figures and each
# setting's mean and spread over the seeds.
#   bash bench/document_mask_results.sh [OUT_DIR]
#   (default runs/document-mask; DATA=DIR holding train.txt and valid.txt (default: the bundled
#   WikiText-2 sample); STEPS=400 BATCH=8 SEQ=256 SEEDS="1 2 3" THREADS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/document-mask "$@") || exit 2
data_dir=${DATA:-data/wikitext-2-sample}
steps=${STEPS:-400} batch=${BATCH:-8} seq=${SEQ:-256} seeds=${SEEDS:-1 2 3} threads=${THREADS:-2}
for v in "STEPS=$steps" "BATCH=$batch" "SEQ=$seq" "THREADS=$threads" $(printf 'SEEDS=%s ' $seeds); do
  [[ "${v#*=}" =~ ^[1-9][0-9]*$ ]] || { echo "error: ${v%%=*}: '${v#*=}' is not a positive whole number" >&2; exit 2; }
done
[ -n "$seeds" ] || { echo "error: SEEDS: no seed given" >&2; exit 2; }
for f in train.txt valid.txt; do
  [ -f "$data_dir/$f" ] || { echo "error: $data_dir/$f: no such file (DATA names a folder with train.txt and valid.txt)" >&2; exit 2; }
done
rm -rf "$out" && mkdir -p "$out"
# One tokenizer (trained on the validation text: quick, and the same for every run) and one corpus.
build/bin/lmkit-tokenize train --input "$data_dir/valid.txt" --family gpt2 --vocab-size 8000 \
  --output "$out/tokenizer" > "$out/tokenizer.log" 2>&1 || { tail -5 "$out/tokenizer.log"; exit 1; }
tok=$out/tokenizer
for split in train valid; do
  build/bin/lmkit-tokenize encode --tokenizer "$tok" --input "$data_dir/$split.txt" --output "$out/$split" \
    --threads "$threads" > "$out/encode-$split.log" 2>&1 || { tail -5 "$out/encode-$split.log"; exit 1; }
done
run() {  # name seed, then flags
  local name=$1 seed=$2
  shift 2
  build/bin/lmkit-pretrain --model models/gpt-mini.json --train "$out/train" --valid "$out/valid" --tokenizer "$tok" \
    --output "$out/$name" --steps "$steps" --batch-size "$batch" --seq-len "$seq" --lr 1e-3 --warmup $((steps / 10)) \
    --schedule cosine --log-every 10 --seed "$seed" --threads "$threads" "$@" > "$out/$name.log" 2>&1 ||
    { tail -5 "$out/$name.log"; exit 1; }
  for how in stream per-document; do
    local flag=()
    [ "$how" = per-document ] && flag=(--per-document)
    build/bin/lmkit-evaluate --checkpoint "$out/$name/final" --metric perplexity --data "$out/valid" --context "$seq" \
      "${flag[@]}" --threads "$threads" --output "$out/$name-$how.json" > "$out/$name-$how.log" 2>&1 ||
      { tail -5 "$out/$name-$how.log"; exit 1; }
  done
}
for seed in $seeds; do
  run "plain-$seed" "$seed"
  run "masked-$seed" "$seed" --document-mask
done
.venv/bin/python - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, statistics, sys
out = sys.argv[1]
def figure(name, how):
    return json.load(open(os.path.join(out, f"{name}-{how}.json")))["perplexity"]
for setting in ("plain", "masked"):
    runs = sorted(d for d in os.listdir(out) if d.startswith(setting + "-") and os.path.isdir(os.path.join(out, d)))
    for how in ("stream", "per-document"):
        values = [figure(r, how) for r in runs]
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        print(f"{setting:<7} {how:<13} perplexity {statistics.mean(values):8.2f} +- {spread:6.2f} "
              f"(seeds: {', '.join(f'{v:.2f}' for v in values)})")
PY
