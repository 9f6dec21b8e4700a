#!/usr/bin/env bash
# The finetuning results of docs/results.md (section 7): what pretraining buys on
# token classification (CoNLL-2003 NER) and text-to-text tasks (SST-2 as text,
# Multi30k de→en), each against the same model from random initialisation.
#
#   scripts/finetune_results.sh conll   bert-mini (result 1's checkpoint) vs random, 3 seeds
#   scripts/finetune_results.sh t2t     t5-mini (result 3) and gpt-mini (result 2) vs random
#   scripts/finetune_results.sh icl     gpt-mini (result 2): LAMBADA and every ICL set, 0 and 5 shots
#   scripts/finetune_results.sh gpt-corpus  the same gpt-mini on WikiText-2 + enwiki-extract, then the same figures
#
# Needs the pretrained checkpoints of sections 1-3 (runs/bert-mini-wt2, runs/gpt-mini-wt2,
# runs/t5-mini-wt2; their commands are in docs/results.md) and DATA=<folder> naming a
# datasets folder with conll2003/, sst2/, multi30k/, lambada/, icl/ and wikitext-2/ (gpt-corpus:
# also enwiki-extract/; not part of the project; CoNLL-2003 is research use only:
# bring your own copy).
# Every run uses one thread, so two of these can run side by side on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
D=${DATA:-}
[ -n "$D" ] && [ -d "$D" ] || { echo "error: set DATA to the datasets folder (conll2003/, sst2/, multi30k/, lambada/, icl/)" >&2; exit 2; }
T=(--threads 1)

conll() {
  local C=$D/conll2003
  for seed in 1 2 3; do
    for init in pretrained random; do
      local out=runs/conll-$init-s$seed
      local from=(--checkpoint runs/bert-mini-wt2/final)
      [ "$init" = random ] && from=(--init random --model models/bert-mini.json --tokenizer runs/bert-mini-wt2/final/tokenizer.model)
      [ -f "$out/result.json" ] || $B/lmkit-finetune --task token-classification "${from[@]}" --train "$C/train.txt" \
        --dev "$C/valid.txt" --output "$out" --overwrite --epochs 1 --lr 3e-4 --batch-size 32 --max-length 64 \
        --seed "$seed" "${T[@]}"
      $B/lmkit-evaluate --checkpoint "$out/best" --data "$C/test.txt" --metric token-classification \
        --output "$out/test.json" "${T[@]}" > /dev/null
    done
  done
}

# SST-2 as text: "sst2 sentence: ..." -> positive / negative (T5's layout); the first
# 8,000 training sentences (of 67,349: the budget of a two-core machine), the whole dev set.
# Multi30k de-en: the first 10,000 training pairs.
subsets() {
  mkdir -p runs/sst2-text runs/m30k-10k
  for split in train dev; do
    awk -F'\t' 'NR == 1 { print "source\ttarget"; next } { sub(/ +$/, "", $1); print $1 "\t" ($2 == 1 ? "positive" : "negative") }' \
      "$D/sst2/$split.tsv" > "runs/sst2-text/$split.all.tsv"
  done
  head -n 8001 runs/sst2-text/train.all.tsv > runs/sst2-text/train.tsv
  mv runs/sst2-text/dev.all.tsv runs/sst2-text/dev.tsv
  for lang in de en; do head -n 10000 "$D/multi30k/train.$lang" > "runs/m30k-10k/train.$lang"; done
}

t2t() {
  subsets
  local M=$D/multi30k common=(--overwrite --seed 1 "${T[@]}")
  for init in pretrained random; do
    local t5=(--checkpoint runs/t5-mini-wt2/final) gpt=(--checkpoint runs/gpt-mini-wt2/final)
    if [ "$init" = random ]; then
      t5=(--init random --model models/t5-mini.json --tokenizer runs/t5-mini-wt2/final/tokenizer.model)
      gpt=(--init random --model models/gpt-mini.json --tokenizer runs/gpt-mini-wt2/final/tokenizer.model)
    fi
    for model in t5 gpt; do
      local from=("${t5[@]}")
      [ "$model" = gpt ] && from=("${gpt[@]}")
      [ -f "runs/sst2-text-$model-$init/result.json" ] || $B/lmkit-finetune --task seq2seq "${from[@]}" \
        --train runs/sst2-text/train.tsv --dev runs/sst2-text/dev.tsv --source-prefix "sst2 sentence: " --separator " =" \
        --output "runs/sst2-text-$model-$init" --epochs 1 --lr 5e-4 --batch-size 32 --max-length 96 \
        --max-target-length 4 --best-metric exact_match "${common[@]}"
    done
    [ -f "runs/m30k-t5-$init/result.json" ] || $B/lmkit-finetune --task seq2seq "${t5[@]}" --train runs/m30k-10k/train \
      --dev "$M/val" --source-lang de --target-lang en --source-prefix "translate German to English: " \
      --output "runs/m30k-t5-$init" --epochs 1 --lr 1e-3 --batch-size 32 --max-length 96 --max-target-length 64 "${common[@]}"
    $B/lmkit-evaluate --checkpoint "runs/m30k-t5-$init/best" --data "$M/test_2016_flickr" --metric generation \
      --output "runs/m30k-t5-$init/test.json" --predictions "runs/m30k-t5-$init/test.en" --overwrite "${T[@]}" > /dev/null
  done
}

# The in-context figures of a GPT run directory (default runs/gpt-mini-wt2): LAMBADA, every ICL set at 0 and 5 shots,
# and WikiText-2 valid/test perplexity.
icl() {
  local R=${1:-runs/gpt-mini-wt2}
  local G=$R/final
  $B/lmkit-evaluate --checkpoint $G --metric completion --data "$D/lambada/lambada_test.jsonl" --batch-size 16 \
    --output $R/lambada.json --overwrite "${T[@]}"
  $B/lmkit-evaluate --checkpoint $G --metric in-context --data "$D/icl" --batch-size 16 \
    --output $R/icl-0.json --predictions $R/icl-0.jsonl --overwrite "${T[@]}"
  # 5-shot: the sets with short examples, then BoolQ's passages and LAMBADA (about 45 minutes on one thread here).
  local five=()
  for t in arc_easy arc_challenge piqa openbook_qa winograd_wsc; do five+=(--data "$D/icl/$t.jsonl"); done
  $B/lmkit-evaluate --checkpoint $G --metric in-context "${five[@]}" --shots 5 --batch-size 16 \
    --output $R/icl-5.json --predictions $R/icl-5.jsonl --overwrite "${T[@]}"
  $B/lmkit-evaluate --checkpoint $G --metric in-context --data "$D/icl/boolq.jsonl" --data "$D/icl/lambada_openai.jsonl" \
    --shots 5 --batch-size 16 --output $R/icl-5-long.json --predictions $R/icl-5-long.jsonl --overwrite "${T[@]}"
  # WikiText-2's own splits, as section 2 measures them: what the in-domain corpus is worth.
  for split in valid test; do
    $B/lmkit-evaluate --checkpoint $G --data "$D/wikitext-2/$split.txt" --metric perplexity --context 128 --stride 64 \
      --batch-size 16 --output $R/eval-$split.json --overwrite "${T[@]}" > /dev/null
  done
}

# The gpt-mini of section 7's in-context table (500 steps of 32 x 128 tokens, cosine, lr 1e-3) on WikiText-2 +
# the Wikipedia extract (the corpus of scripts/objective_comparison.sh) instead of WikiText-2 alone, then the same
# in-context figures: what 4.4x more distinct text moves at the same token budget.
gpt_corpus() {
  OUT=runs/objectives bash scripts/objective_comparison.sh corpus
  local C=runs/objectives/corpus R=runs/gpt-mini-wt2-enwiki
  [ -f $R/final/model.safetensors ] || $B/lmkit-pretrain --model models/gpt-mini.json --train $C/train.txt --valid $C/valid.txt \
    --output $R --overwrite --vocab-size 8000 --steps 500 --batch-size 32 --seq-len 128 --lr 1e-3 --warmup 50 \
    --schedule cosine --eval-every 100 --eval-batches 60 --save-every 200 --log-every 10 --seed 1 "${T[@]}"
  icl $R
}

case "${1:-}" in
  conll) conll ;;
  t2t) t2t ;;
  icl) icl ;;
  gpt-corpus) gpt_corpus ;;
  *) echo "usage: $0 conll|t2t|icl|gpt-corpus" >&2; exit 2 ;;
esac
