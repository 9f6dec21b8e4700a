#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, pretrain a
# small BERT (bert-mini, MLM + NSP) on the bundled WikiText-2 sample for a few
# minutes, and report its validation MLM loss, perplexity and NSP accuracy.
#
#   RUN=runs/demo STEPS=300 bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --main
# Only what the job runs (the library, its sentencepiece module and two apps): the tests,
# benchmarks and tools are for scripts/test.sh.
LMKIT_TARGETS="lmkit-info lmkit-pretrain" bash scripts/build.sh
run=${RUN:-runs/demo}
rm -rf "$run"
build/bin/lmkit-info --system models/bert-mini.json | tail -5
# The tokenizer (8000 pieces) is trained on the training text, and the text is
# encoded once into a token corpus under $run/cache.
build/bin/lmkit-pretrain \
  --model models/bert-mini.json \
  --train data/wikitext-2-sample/train.txt \
  --valid data/wikitext-2-sample/valid.txt \
  --output "$run" \
  --objective mlm+nsp --vocab-size 8000 \
  --steps "${STEPS:-300}" --batch-size 32 --seq-len 128 --lr 5e-4 --warmup 30 \
  --eval-every 100 --save-every 100 --seed 1
echo "validation (from $run/metrics.jsonl):"
grep '"split":"valid"' "$run/metrics.jsonl" | tail -1
echo "checkpoint: $run/final (config.json, model.safetensors, tokenizer.json + tokenizer.model) — loads in Python with"
echo "  transformers.BertForPreTraining.from_pretrained(\"$run/final\") and AutoTokenizer.from_pretrained(\"$run/final\")"
echo "next: 'bash scripts/build.sh' builds the other apps (lmkit-finetune, lmkit-evaluate, ...; about 6 min on 2 cores),"
echo "  then the README's research loop runs as written"
