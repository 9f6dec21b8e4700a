#!/usr/bin/env bash
# "Train short, test long" (docs/results.md, section 9): four decoders of the same size,
# tokens and seed, pretrained at 128 tokens, scored on WikiText-2 test at 128 to 2,048
# tokens a window (Press et al. 2022's evaluation); then the cost of full attention and of
# a sliding window from 512 to 16,384 tokens.
#
#   scripts/length_extrapolation.sh corpus     WikiText-2 train + enwiki-extract train as one text file
#   scripts/length_extrapolation.sh pretrain   gpt2 (learned positions, n_positions 2048), llama (rotary),
#                                              bloom (ALiBi), mistral (rotary, sliding window 64), relative
#                                              (gpt2 with Shaw et al.'s relative attention, k = 20, and no
#                                              absolute positions)
#   scripts/length_extrapolation.sh evaluate   lmkit-evaluate --seq-len L for every model and LENGTHS
#   scripts/length_extrapolation.sh table      the perplexity table (markdown) and $OUT/extrapolation.svg
#   scripts/length_extrapolation.sh cost       lmkit-bench train: step time and peak memory against length,
#                                              full attention (llama-mini) and a window of 256 (mistral)
#
# DATA=<folder> names a datasets folder with wikitext-2/ and enwiki-extract/ (not part
# of the project). Optional: MODELS (default "gpt2 llama bloom mistral relative"), STEPS (of
# BATCH x 128 tokens; default 800), BATCH (default 16), LENGTHS (default "128 256 512
# 1024 2048"), COST_LENGTHS (default "512 1024 2048 4096 8192 16384"), THREADS (default
# 2), OUT (default runs/positions).
# Every stage skips what is already finished, so a killed run goes on where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
OUT=${OUT:-runs/positions}
MODELS=${MODELS:-gpt2 llama bloom mistral relative}
STEPS=${STEPS:-800}
BATCH=${BATCH:-16}
LENGTHS=${LENGTHS:-128 256 512 1024 2048}
COST_LENGTHS=${COST_LENGTHS:-512 1024 2048 4096 8192 16384}
THREADS=${THREADS:-2}
CORPUS=$OUT/corpus

need_data() {
  D=${DATA:-}
  [ -n "$D" ] && [ -d "$D/wikitext-2" ] && [ -d "$D/enwiki-extract" ] ||
    { echo "error: set DATA to the datasets folder (wikitext-2/, enwiki-extract/)" >&2; exit 2; }
}

corpus() {
  need_data
  mkdir -p "$CORPUS"
  local f=$CORPUS/train.txt
  [ -s "$f" ] && return
  { cat "$D/wikitext-2/train.txt"; echo; cat "$D/enwiki-extract/train.txt"; } > "$f.tmp" && mv "$f.tmp" "$f"
}

# The preset of each name; gpt2's with 2,048 learned positions, of which training at 128 reaches the first 128.
preset() {
  case $1 in
    gpt2) sed 's/"n_positions": 1024/"n_positions": 2048/' models/gpt-mini.json > "$OUT/gpt-mini-2048.json"
          echo "$OUT/gpt-mini-2048.json" ;;
    llama|bloom|mistral) echo "models/$1-mini.json" ;;
    relative) sed 's/"n_positions": 1024/"n_positions": 2048, "attention": "relative", "max_relative_position": 20, "position_embedding_type": "none"/' \
                models/gpt-mini.json > "$OUT/gpt-mini-relative.json"
              echo "$OUT/gpt-mini-relative.json" ;;
    *) echo "error: unknown model '$1' (gpt2, llama, bloom, mistral, relative)" >&2; exit 2 ;;
  esac
}

pretrain_one() {
  local name=$1 run=$OUT/$1
  [ -f "$run/final/model.safetensors" ] && return
  local model tok=() again=(--overwrite)
  model=$(preset "$name")
  # Mistral's tokenizer is Llama's: the same family, so the same pieces.
  [ "$name" = mistral ] && [ -f "$OUT/llama/final/tokenizer.model" ] && tok=(--tokenizer "$OUT/llama/final/tokenizer.model")
  [ -f "$run/checkpoints/latest" ] && again=(--resume)
  $B/lmkit-pretrain --model "$model" --objective clm --train "$CORPUS/train.txt" --output "$run" "${again[@]}" "${tok[@]}" \
    --vocab-size 8000 --steps "$STEPS" --batch-size "$BATCH" --seq-len 128 --lr 1e-3 --warmup $((STEPS / 10)) \
    --save-every $((STEPS / 4)) --log-every 20 --seed 1 --threads "$THREADS"
}

pretrain() {
  corpus
  for name in $MODELS; do pretrain_one "$name"; done
}

evaluate() {
  need_data
  mkdir -p "$OUT/eval"
  for name in $MODELS; do
    for len in $LENGTHS; do
      local out=$OUT/eval/$name-$len.json
      [ -s "$out" ] && continue
      $B/lmkit-evaluate --checkpoint "$OUT/$name/final" --data "$D/wikitext-2/test.txt" --metric perplexity \
        --seq-len "$len" --batch-size 4 --threads "$THREADS" --output "$out"
    done
  done
}

table() {
  .venv/bin/python scripts/plot_lengths.py "$OUT/eval" --models $MODELS --lengths $LENGTHS -o "$OUT/extrapolation.svg"
}

# Step time and peak resident memory of one training step (batch 1) at each length, as lmkit-bench prints them.
cost() {
  mkdir -p "$OUT/cost"
  sed 's/"sliding_window": 64/"sliding_window": 256/' models/mistral-mini.json > "$OUT/cost/mistral-window-256.json"
  printf '| tokens | full: ms a step | full: peak MiB | window 256: ms a step | window 256: peak MiB |\n|---|---|---|---|---|\n'
  for len in $COST_LENGTHS; do
    local row="| $len"
    for model in models/llama-mini.json "$OUT/cost/mistral-window-256.json"; do
      local log=$OUT/cost/$(basename "$model" .json)-$len.log
      [ -s "$log" ] || $B/lmkit-bench train --model "$model" --batch-size 1 --seq-len "$len" --vocab-size 8000 \
        --warmup 1 --steps 2 --threads "$THREADS" > "$log.tmp" 2>&1 && mv "$log.tmp" "$log"
      row="$row | $(grep -oP '^step \(median of \d+\)\s+\K[0-9.]+' "$log") | $(grep -oP '^peak RSS\s+\K[0-9]+' "$log")"
    done
    echo "$row |"
  done
}

case ${1:-} in
  corpus) corpus ;;
  pretrain) pretrain ;;
  evaluate) evaluate ;;
  table) table ;;
  cost) cost ;;
  *) echo "usage: scripts/length_extrapolation.sh corpus|pretrain|evaluate|table|cost" >&2; exit 2 ;;
esac
