#!/usr/bin/env bash
# ListOps accuracy for each attention (Long Range Arena, Tay et al. 2021, Table 1's first
# column), several seeds, at a budget this 2-core machine reaches.
#
#   bash scripts/listops_experiment.sh [--bin build/bin] [--work runs/listops-exp] [--train 2400]
#        [--epochs 2] [--lr 2e-3] [--max-tokens 2000] [--seeds "1 2 3"] [--attentions "full linformer longformer bigbird"]
#        [--plugin FILE]
#
# Data: scripts/listops.py with seed 0, LRA's trees (depth <= 10, 2 to 10 arguments) and input
# (the parentheses stripped), lengths from 500 to --max-tokens (LRA's: 2,000), --train
# examples, 200 for dev and 500 for test, the same for every run. Each attention gets the same small encoder trained from scratch with
# lmkit-finetune --init random (2 layers, d 64, 4 heads, FFN 128, batch 16, --lr with warmup and
# linear decay, --epochs); the tokenizer is each family's SentencePiece model on the training text (its ~20
# symbols and the specials, one token a symbol):
#   full       BERT, full attention
#   linformer  BERT with "attention": "linformer", k 128, headwise sharing
#   longformer Longformer, attention_window 128; the classifier's <s> global (HF's default)
#   bigbird    BigBird, block_size 32, 2 random blocks
#   relative   BERT with "attention": "relative" (Shaw et al. 2018), max_relative_position 20
#   performer  BERT with "attention": "performer", 64 random features: the Performer plugin
#              (examples/performer_plugin, built against the installed package), given as --plugin FILE
# The seed sets the initialisation, the batch order and dropout. Each run's test accuracy is
# lmkit-evaluate's on the best dev epoch's model; the script prints a row per attention: the
# seeds' accuracies, their mean and spread, and the majority class's share of the test set.
set -euo pipefail
bin=build/bin
work=runs/listops-exp
train=2400
epochs=2
lr=2e-3
max_tokens=2000
seeds="1 2 3"
attentions="linformer longformer bigbird full"
plugin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --train) train="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --lr) lr="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --attentions) attentions="$2"; shift 2 ;;
    --plugin) plugin="$2"; shift 2 ;;
    *) echo "error: unknown option '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
family_of() { case "$1" in full|linformer|relative|performer) echo bert ;; longformer) echo roberta ;; bigbird) echo big_bird ;; esac; }
for a in $attentions; do
  [[ -n "$(family_of "$a")" ]] || { echo "error: unknown attention '$a' (full, linformer, longformer, bigbird, relative or performer)" >&2; exit 2; }
  [[ "$a" != performer || -f "$plugin" ]] || { echo "error: --attentions performer needs --plugin FILE (the Performer plugin, examples/performer_plugin)" >&2; exit 2; }
done
plugin_flags=()
[[ -n "$plugin" ]] && plugin_flags=(--plugin "$plugin")
[[ -x "$bin/lmkit-finetune" ]] || { echo "error: $bin/lmkit-finetune not found (build first: bash scripts/build.sh)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"

data="$work/data"
if [[ ! -f "$data/test.tsv" ]]; then
  python3 "$here/listops.py" --output "$data" --overwrite --seed 0 --train "$train" --valid 200 --test 500 --no-parens \
    --max-length "$max_tokens"
fi
tail -n +2 "$data/train.tsv" | cut -f1 > "$work/train.txt"

common='"vocab_size": 64, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128'
preset() {  # attention -> a config.json
  case "$1" in
    full) echo "{\"model_type\": \"bert\", $common, \"max_position_embeddings\": 2048}" ;;
    linformer) echo "{\"model_type\": \"bert\", $common, \"max_position_embeddings\": 2048, \"attention\": \"linformer\", \"linformer_k\": 128}" ;;
    longformer) echo "{\"model_type\": \"longformer\", $common, \"max_position_embeddings\": 2050, \"pad_token_id\": 1, \"type_vocab_size\": 1, \"attention_window\": 128}" ;;
    relative) echo "{\"model_type\": \"bert\", $common, \"max_position_embeddings\": 2048, \"attention\": \"relative\", \"max_relative_position\": 20}" ;;
    performer) echo "{\"model_type\": \"bert\", $common, \"max_position_embeddings\": 2048, \"attention\": \"performer\", \"performer_features\": 64}" ;;
    bigbird) echo "{\"model_type\": \"big_bird\", $common, \"max_position_embeddings\": 2048, \"block_size\": 32, \"num_random_blocks\": 2}" ;;
  esac
}

for a in $attentions; do
  fam=$(family_of "$a")
  tok="$work/tokenizers/$fam"
  if [[ ! -f "$tok/tokenizer.model" ]]; then
    "$bin/lmkit-tokenize" train --input "$work/train.txt" --family "$fam" --vocab-size 32 --no-byte-fallback \
      --output "$tok" > /dev/null
  fi
  preset "$a" > "$work/$a.json"
  for seed in $seeds; do
    run="$work/$a-seed$seed"
    if [[ ! -f "$run/test.json" ]]; then
      "$bin/lmkit-finetune" "${plugin_flags[@]}" --init random --model "$work/$a.json" --tokenizer "$tok/tokenizer.model" \
        --train "$data/train.tsv" --dev "$data/valid.tsv" --output "$run" --overwrite --epochs "$epochs" \
        --batch-size 16 --max-length $((max_tokens + 48)) --lr "$lr" --seed "$seed" > "$run.log" 2>&1
      "$bin/lmkit-evaluate" "${plugin_flags[@]}" --checkpoint "$run/best" --data "$data/test.tsv" --metric classification \
        --output "$run/test.json" >> "$run.log" 2>&1
    fi
  done
done

python3 - "$work" "$seeds" "$attentions" <<'EOF'
import collections, json, statistics, sys
work, seeds, attentions = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
labels = [line.rstrip("\n").split("\t")[1] for line in open(f"{work}/data/test.tsv")][1:]
majority = collections.Counter(labels).most_common(1)[0][1] / len(labels)
print(f"ListOps test accuracy, {len(labels)} examples (majority class {majority:.1%})")
for a in attentions:
    acc = [json.load(open(f"{work}/{a}-seed{s}/test.json"))["accuracy"] for s in seeds]
    spread = statistics.stdev(acc) if len(acc) > 1 else 0.0
    print(f"{a:<11} " + " ".join(f"{x:.3f}" for x in acc) + f"  mean {statistics.mean(acc):.3f} ± {spread:.3f}")
EOF
