#!/usr/bin/env bash
# "Which pretraining objective?" (docs/results.md, section 8): the same model size
# and token budget pretrained on WikiText-2 + the English Wikipedia extract with
# each objective, then every checkpoint and a random-init baseline of each family
# through the same suite (lmkit-suite), 3 seeds.
#
#   scripts/objective_comparison.sh corpus     WikiText-2 train + enwiki-extract train as one text file
#   scripts/objective_comparison.sh pretrain   mlm+nsp (BERT), mlm (RoBERTa), mlm+sbo (SpanBERT), span (T5), clm (GPT);
#                                              electra (the plugin's RTD), bert-flops (BERT given ELECTRA's FLOPs)
#   scripts/objective_comparison.sh suite      every checkpoint and the random baselines through SUITE
#   scripts/objective_comparison.sh table      one table of every run's suite average and tasks
#
# DATA=<folder> names a datasets folder with wikitext-2/, enwiki-extract/ and the
# suite's task folders (not part of the project). Optional:
#   OBJECTIVES  default "bert roberta spanbert t5 gpt"; also electra, bert-flops
#   STEPS       pretraining steps of BATCH x 128 tokens (default 600); bert-flops gets
#               STEPS x ELECTRA's FLOPs per step / BERT's, from lmkit-bench
#   BATCH       pretraining's sequences a step (default 32)
#   SUITE       default data/suites/glue-cpu.json
#   SEEDS       default "1 2 3"
#   THREADS     default 2
#   DEVICE      cpu (default) or cuda: pretraining and every suite run
#   DTYPE       pretraining's fp32 (default) or bf16
#   BIN         the apps (default build/bin)
#   OUT         default runs/objectives
#   BASELINES   shared (default): the encoders share BERT's random baseline; own: one each
#   ELECTRA_PLUGIN  liblmkit_electra.so, built from examples/electra against the installed
#               lmkit (docs/library.md); needed for electra and bert-flops
# Every stage skips what is already finished, so a killed run goes on where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BIN:-build/bin}
D=${DATA:-}
[ -n "$D" ] && [ -d "$D" ] || { echo "error: set DATA to the datasets folder (wikitext-2/, enwiki-extract/, the suite's tasks)" >&2; exit 2; }
OUT=${OUT:-runs/objectives}
OBJECTIVES=${OBJECTIVES:-bert roberta spanbert t5 gpt}
STEPS=${STEPS:-600}
SUITE=${SUITE:-data/suites/glue-cpu.json}
SEEDS=${SEEDS:-1 2 3}
THREADS=${THREADS:-2}
DEVICE=${DEVICE:-cpu}
DTYPE=${DTYPE:-fp32}
BATCH=${BATCH:-32}
CORPUS=$OUT/corpus

corpus() {
  mkdir -p "$CORPUS"
  for split in train valid; do
    local f=$CORPUS/$split.txt
    [ -s "$f" ] && continue
    { cat "$D/wikitext-2/$split.txt"; echo; cat "$D/enwiki-extract/$split.txt"; } > "$f.tmp" && mv "$f.tmp" "$f"
  done
}

# The preset, objective and learning rate of each name. The BERT variants share one tokenizer.
preset() {
  case $1 in
    bert) echo "models/bert-mini.json mlm+nsp 5e-4" ;;
    roberta) echo "models/roberta-mini.json mlm 5e-4" ;;
    spanbert) echo "models/bert-mini.json mlm+sbo 5e-4" ;;
    t5) echo "models/t5-mini-matched.json span 1e-3" ;;
    gpt) echo "models/gpt-mini.json clm 1e-3" ;;
    electra) echo "examples/electra/electra-mini.json electra 5e-4" ;;
    bert-flops) echo "models/bert-mini.json mlm+nsp 5e-4" ;;
    *) echo "error: unknown objective '$1' (bert, roberta, spanbert, t5, gpt, electra, bert-flops)" >&2; exit 2 ;;
  esac
}

# The plugin flag of a name: ELECTRA is a plugin (examples/electra), the others are lmkit's.
plugin_of() {
  [ "$1" = electra ] || return 0
  [ -f "${ELECTRA_PLUGIN:-}" ] || { echo "error: set ELECTRA_PLUGIN to liblmkit_electra.so (examples/electra)" >&2; exit 2; }
  echo "--plugin $ELECTRA_PLUGIN"
}

# FLOPs of one training step of 32 x 128 (vocabulary 8,000) as lmkit-bench counts them: matmuls,
# forward and backward, ELECTRA's generator included.
step_gflop() {
  local model objective
  read -r model objective _ <<< "$(preset "$1")"
  local plugin
  plugin=$(plugin_of "$1")
  # shellcheck disable=SC2086
  $B/lmkit-bench $plugin train --model "$model" --objective "$objective" --batch-size 32 --seq-len 128 \
    --vocab-size 8000 --steps 1 --warmup 0 --threads "$THREADS" | sed -n 's/.*(\([0-9.]*\) GFLOP\/step).*/\1/p'
}

# Pretraining steps of a name: STEPS, or for bert-flops as many as give BERT the FLOPs ELECTRA
# spends in STEPS (the generator counted).
steps_of() {
  [ "$1" = bert-flops ] || { echo "$STEPS"; return; }
  local e b
  e=$(step_gflop electra) b=$(step_gflop bert)
  echo "bert-flops: electra $e GFLOP a step, bert $b: $STEPS x $e / $b steps" >&2
  awk -v s="$STEPS" -v e="$e" -v b="$b" 'BEGIN { printf "%d\n", s * e / b + 0.5 }'
}

pretrain_one() {
  local name=$1 run=$OUT/$1
  [ -f "$run/final/model.safetensors" ] && return
  read -r model objective lr <<< "$(preset "$name")"
  local steps
  steps=$(steps_of "$name")
  local tok=()
  case $name in spanbert|bert-flops)
    [ -f "$OUT/bert/final/tokenizer.model" ] && tok=(--tokenizer "$OUT/bert/final/tokenizer.model") ;;
  esac
  local again=(--overwrite)
  [ -f "$run/checkpoints/latest" ] && again=(--resume)
  local plugin
  plugin=$(plugin_of "$name")
  # shellcheck disable=SC2086 # the plugin flag is two words or none
  $B/lmkit-pretrain $plugin --model "$model" --objective "$objective" --train "$CORPUS/train.txt" --valid "$CORPUS/valid.txt" \
    --output "$run" "${again[@]}" "${tok[@]}" --vocab-size 8000 --steps "$steps" --batch-size "$BATCH" --seq-len 128 \
    --lr "$lr" --warmup $((steps / 10)) --eval-every $((steps / 3)) --eval-batches 40 --save-every $((steps / 6)) \
    --log-every 10 --seed 1 --threads "$THREADS" --device "$DEVICE" --dtype "$DTYPE"
}

pretrain() {
  corpus
  for name in $OBJECTIVES; do pretrain_one "$name"; done
}

# Each checkpoint through the suite beside its family's random initialisation. The encoders
# share one: SpanBERT and bert-flops have BERT's model and tokenizer, RoBERTa and ELECTRA's
# discriminator the same size (their own tokenizers of the same 8,000 pieces; ELECTRA's embeddings
# 128 wide, projected), so BERT's random runs are the baseline of all of them (BASELINES=own
# gives each its own). Run bert first: a shared baseline not yet there is left out, and the
# table stage shows every row with BERT's random one.
suite() {
  local seeds=${SEEDS// /,}
  for name in $OBJECTIVES; do
    local ckpt=$OUT/$name/final
    [ -f "$ckpt/model.safetensors" ] || { echo "error: $ckpt: not pretrained yet (run the pretrain stage)" >&2; exit 2; }
    local base=(--baseline random)
    case $name in spanbert|roberta|electra|bert-flops)
      if [ "${BASELINES:-shared}" = shared ]; then
        base=()
        [ -f "$OUT/suite-bert/random/results.json" ] && base=(--baseline "$OUT/suite-bert/random")
      fi ;;
    esac
    local plugin
    plugin=$(plugin_of "$name")
    # shellcheck disable=SC2086
    $B/lmkit-suite $plugin --suite "$SUITE" --data-root "$D" --checkpoint "$ckpt" --name "$name" "${base[@]}" \
      --output "$OUT/suite-$name" --seeds "$seeds" --threads "$THREADS" --device "$DEVICE"
  done
}

table() {
  local dirs=()
  for name in $OBJECTIVES; do
    [ -f "$OUT/suite-$name/results.json" ] && dirs+=("$OUT/suite-$name")
    [ -f "$OUT/suite-$name/random/results.json" ] && dirs+=("$OUT/suite-$name/random")
  done
  [ ${#dirs[@]} -gt 0 ] || { echo "error: no finished suite runs under $OUT" >&2; exit 2; }
  local plugin=()
  [ -f "${ELECTRA_PLUGIN:-}" ] && plugin=(--plugin "$ELECTRA_PLUGIN")
  $B/lmkit-suite "${plugin[@]}" --suite "$SUITE" --collect "$(IFS=,; echo "${dirs[*]}")"
}

case ${1:-} in
  corpus) corpus ;;
  pretrain) pretrain ;;
  suite) suite ;;
  table) table ;;
  *) echo "usage: DATA=<datasets> $0 corpus|pretrain|suite|table" >&2; exit 2 ;;
esac
