#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, pretrain a
# small BERT (bert-mini, MLM + NSP) on the bundled WikiText-2 sample for about
# 2.5 minutes on 2 cores (150 steps: the whole job then fits in 8 minutes on a fresh
# machine, bench/fresh_clone.sh demo), and report its validation MLM loss, perplexity and NSP accuracy.
#
#   RUN=runs/demo STEPS=150 bash scripts/demo.sh
# RUN is replaced when it holds an earlier run of lmkit-pretrain (its --overwrite), and
# refused when it holds anything else: the script deletes nothing it did not make.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --main
# Only what the job runs (the library, its sentencepiece module and two apps): the tests,
# benchmarks and tools are for scripts/test.sh.
LMKIT_TARGETS="lmkit-info lmkit-pretrain" bash scripts/build.sh
run=${RUN:-runs/demo}
build/bin/lmkit-info --system models/bert-mini.json | tail -5
# The tokenizer (8000 pieces) is trained on the training text, and the text is
# encoded once into a token corpus under $run/cache.
build/bin/lmkit-pretrain \
  --model models/bert-mini.json \
  --train data/wikitext-2-sample/train.txt \
  --valid data/wikitext-2-sample/valid.txt \
  --output "$run" \
  --objective mlm+nsp --vocab-size 8000 \
  --steps "${STEPS:-150}" --batch-size 32 --seq-len 128 --lr 5e-4 --warmup 15 \
  --eval-every 50 --save-every 50 --seed 1 --overwrite
# The last validation as a person reads it (every figure of $run/metrics.jsonl's last "valid" line).
python3 - "$run/metrics.jsonl" <<'PY'
import json, sys
valid = [j for j in map(json.loads, open(sys.argv[1])) if j.get("split") == "valid"]
if valid:
    v = valid[-1]
    figures = [f"{k} {v[k]:.4g}" for k in sorted(v) if k not in ("step", "epoch", "split", "elapsed_s", "batches", "targets", "tokens") and isinstance(v[k], (int, float))]
    print(f"validation at step {v['step']}: " + ", ".join(figures))
PY
echo "checkpoint: $run/final (config.json, model.safetensors, tokenizer.json + tokenizer.model) — loads in Python with"
echo "  transformers.BertForPreTraining.from_pretrained(\"$run/final\") and AutoTokenizer.from_pretrained(\"$run/final\")"
echo "next: 'bash scripts/build.sh' builds the other apps (lmkit-finetune, lmkit-evaluate, ...; about 6 min on 2 cores),"
echo "  then the README's research loop runs as written"
