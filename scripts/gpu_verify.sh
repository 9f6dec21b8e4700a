#!/usr/bin/env bash
# The CUDA path of every app, per family (the GPU issue's first item), in one call on a GPU
# machine: lmkit_tests "[cuda]", then for each family a short bf16 pretraining with an exact
# resume (--deterministic, stopped half-way), TensorBoard's event file, lmkit-evaluate of its
# objective, the tiny suite (classification, pairs, regression, NER, text-to-text, in-context:
# whatever applies to the family) and, for generators, sampled generation with the KV cache
# equal to a full recompute; a SIGTERM stop and its resume once. Every check is one line of
# OUT/summary.md (pass/FAIL, seconds, its log); the script goes on after a failure and exits 1
# if any failed.
#
#   BIN=/tmp/lmkit/bin OUT=$OUT bash scripts/gpu_verify.sh      (from scripts/gpu_bundle.sh's tarball)
#   DEVICE=cpu DTYPE=fp32 STEPS=4 FAMILIES="bert gpt" bash scripts/gpu_verify.sh   (its own check on a CPU)
#
# Optional: DEVICE (cuda), DTYPE (bf16), STEPS (pretraining steps, even; 20), FAMILIES (every
# one below), PLUGIN (liblmkit_electra.so: adds the electra family), THREADS (CPU threads, 0 = all),
# CUDA_TESTS (1: run lmkit_tests "[cuda]" first; 0 where a parallel group already does), SIGTERM
# (1: the SIGTERM check; 0 where a parallel group already runs it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/script_args.sh
no_args "$@" || exit 2
BIN=${BIN:-build/bin}
OUT=${OUT:-runs/gpu-verify}
DEVICE=${DEVICE:-cuda}
DTYPE=${DTYPE:-bf16}
STEPS=${STEPS:-20}
THREADS=${THREADS:-0}
FAMILIES=${FAMILIES:-bert roberta spanbert t5 gpt llama mistral bloom${PLUGIN:+ electra}}
[ $((STEPS % 2)) -eq 0 ] && [ "$STEPS" -ge 2 ] || { echo "error: STEPS must be even and at least 2 (got $STEPS)" >&2; exit 2; }
[ -x "$BIN/lmkit-pretrain" ] || { echo "error: $BIN/lmkit-pretrain is missing (set BIN)" >&2; exit 1; }
mkdir -p "$OUT/logs" && OUT=$(realpath "$OUT")
summary=$OUT/summary.md failed=0
printf '| check | result | seconds | log |\n|---|---|---|---|\n' >"$summary"
sample=data/wikitext-2-sample

# check NAME COMMAND...: runs it, its output into logs/NAME.log, one summary line.
check() {
  local name=$1 log=$OUT/logs/$1.log start=$SECONDS result=pass
  shift
  "$@" >"$log" 2>&1 || { result=FAIL; failed=$((failed + 1)); }
  printf '| %s | %s | %d | logs/%s.log |\n' "$name" "$result" $((SECONDS - start)) "$name" >>"$summary"
  echo "$name: $result ($((SECONDS - start)) s)"
  [ $result = pass ]
}

# The preset and objective of a family's short pretraining.
preset() {
  case $1 in
    bert) echo "models/bert-mini.json mlm+nsp" ;;
    roberta) echo "models/roberta-mini.json mlm" ;;
    spanbert) echo "models/bert-mini.json mlm+sbo" ;;
    t5) echo "models/t5-mini.json span" ;;
    gpt) echo "models/gpt-mini.json clm" ;;
    llama) echo "models/llama-mini.json clm" ;;
    mistral) echo "models/mistral-mini.json clm" ;;
    bloom) echo "models/bloom-mini.json clm" ;;
    electra) echo "examples/electra/electra-mini.json electra" ;;
    *) echo "error: unknown family '$1'" >&2; return 2 ;;
  esac
}

plugin=()
[ -n "${PLUGIN:-}" ] && plugin=(--plugin "$(realpath "$PLUGIN")")
common=("${plugin[@]}" --device "$DEVICE" --threads "$THREADS")

# Pretraining: uninterrupted, then stopped half-way and resumed; both deterministic, so the two
# final checkpoints (and ELECTRA's generator) must be byte-identical.
same_models() {
  local a=$1 b=$2 f
  for f in model.safetensors generator/model.safetensors; do
    [ -f "$a/$f" ] || continue
    cmp "$a/$f" "$b/$f" || { echo "FAIL: $f differs between the uninterrupted and the resumed run"; return 1; }
  done
  echo "byte-identical: $a and $b"
}

has_events() { ls "$1"/events.out.tfevents.* >/dev/null 2>&1 || { echo "FAIL: no TensorBoard event file in $1"; return 1; }; }

# Continuations with the KV cache and with a full recompute must be the same ids. Top-k sampling
# with one seed (each step draws the same numbers): a barely trained model's greedy output
# repeats one token and would hide a wrong cache.
same_generation() {
  local ckpt=$1 a b
  local gen=("$BIN/lmkit-generate" "${common[@]}" --checkpoint "$ckpt" --prompt "The history of the" --max-new-tokens 24
    --ids --top-k 50 --seed 7)
  a=$("${gen[@]}") || return 1
  b=$("${gen[@]}" --no-cache) || return 1
  echo "cache:    $a"; echo "no cache: $b"
  [ "$a" = "$b" ] || { echo "FAIL: the cached and the recomputed continuations differ"; return 1; }
}

family() {
  local f=$1 model objective w=$OUT/$1
  read -r model objective <<<"$(preset "$f")"
  [ -n "$objective" ] || { failed=$((failed + 1)); return; }
  local run=("${common[@]}" --model "$model" --objective "$objective" --train "$sample/train.txt" --valid "$sample/valid.txt"
    --steps "$STEPS" --batch-size 8 --seq-len 64 --vocab-size 1000 --save-every $((STEPS / 2)) --eval-every $((STEPS / 2))
    --eval-batches 2 --log-every 2 --seed 1 --dtype "$DTYPE" --deterministic)
  check "$f-pretrain" "$BIN/lmkit-pretrain" "${run[@]}" --output "$w/full" --overwrite || return
  local tok=(--tokenizer "$w/full/final/tokenizer.model")
  check "$f-stop-half-way" "$BIN/lmkit-pretrain" "${run[@]}" "${tok[@]}" --output "$w/cut" --overwrite --stop-at $((STEPS / 2)) &&
    check "$f-resume" "$BIN/lmkit-pretrain" "${run[@]}" "${tok[@]}" --output "$w/cut" --resume &&
    check "$f-resume-exact" same_models "$w/full/final" "$w/cut/final"
  check "$f-tensorboard" has_events "$w/full"
  check "$f-evaluate" "$BIN/lmkit-evaluate" "${common[@]}" --checkpoint "$w/full/final" --metric objective \
    --data "$sample/valid.txt" --output "$w/objective.json"
  check "$f-suite" "$BIN/lmkit-suite" "${common[@]}" --suite tests/fixtures/suite/tiny.json --checkpoint "$w/full/final" \
    --seeds 1 --output "$w/suite"
  case $f in t5|gpt|llama|mistral|bloom) check "$f-generate-cache" same_generation "$w/full/final" ;; esac
}

# SIGTERM during a run: exit 3 with a checkpoint, then --resume goes on from it.
sigterm() {
  local w=$OUT/sigterm rc=0
  local run=("${common[@]}" --model models/bert-mini.json --objective mlm+nsp --train "$sample/train.txt" --output "$w"
    --steps 100000 --batch-size 8 --seq-len 64 --vocab-size 1000 --log-every 1 --seed 1 --dtype "$DTYPE")
  "$BIN/lmkit-pretrain" "${run[@]}" --overwrite &
  local pid=$!
  for _ in $(seq 600); do grep -q '"split":"train"' "$w/metrics.jsonl" 2>/dev/null && break; sleep 0.5; done
  kill -TERM "$pid"; wait "$pid" || rc=$?
  [ $rc -eq 3 ] || { echo "FAIL: exit $rc after SIGTERM, not 3"; return 1; }
  local step
  step=$(sed -n 's/.*"step": *\([0-9]*\).*/\1/p' "$w/checkpoints/$(cat "$w/checkpoints/latest")/trainer_state.json")
  echo "stopped after step $step"
  "$BIN/lmkit-pretrain" "${run[@]}" --resume --stop-at $((step + 2)) || { echo "FAIL: --resume after SIGTERM"; return 1; }
}

# The test binary reads the checkout and the apps from here, not from the build machine's paths.
export LMKIT_TEST_SOURCE_DIR=${LMKIT_TEST_SOURCE_DIR:-$PWD} LMKIT_TEST_BIN_DIR=${LMKIT_TEST_BIN_DIR:-$(realpath "$BIN")}
echo "gpu_verify: $DEVICE $DTYPE, $STEPS steps, families: $FAMILIES; summary in $summary"
if [ -x "$BIN/lmkit_tests" ] && [ "$DEVICE" != cpu ] && [ "${CUDA_TESTS:-1}" = 1 ]; then
  check cuda-tests "$BIN/lmkit_tests" "[cuda]"
fi
for f in $FAMILIES; do family "$f"; done
[ "${SIGTERM:-1}" = 1 ] && check sigterm-resume sigterm
echo "$failed failed; $summary"
[ $failed -eq 0 ]
