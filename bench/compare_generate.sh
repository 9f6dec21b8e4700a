#!/usr/bin/env bash
# Greedy generation with the KV cache, lmkit against HuggingFace Transformers' generate(),
# side by side in one run on the same LibTorch (the .venv's torch), the same preset JSON with
# random weights, prompt length, number of new tokens (no early stop on either side) and threads.
#
#   bash bench/compare_generate.sh [OUT_DIR]        (default runs/bench-generate; one log per run)
#   ROUNDS=3 NEW_TOKENS=256 PROMPT=16 BATCH=1 THREADS=2 SHAPES="gpt-mini-8000 gpt2-small" bash bench/compare_generate.sh
#
# For each shape it runs `lmkit-bench generate --cache-only` and bench/hf_generate.py (HF with
# SDPA attention) interleaved ROUNDS times, and prints the best tokens/s of each and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/bench-generate "$@") || exit 2
rounds=${ROUNDS:-3} new=${NEW_TOKENS:-256} prompt=${PROMPT:-16} batch=${BATCH:-1} threads=${THREADS:-$(nproc)}
py=${PYTHON:-.venv/bin/python}
lmkit=${LMKIT_BENCH:-build/bin/lmkit-bench}
shapes=${SHAPES:-"gpt-mini-8000 llama-mini-8000 gpt2-small"}

shape_args() {  # NAME -> the model arguments both sides take
  case $1 in
    gpt-mini-8000) echo "--model models/gpt-mini.json --vocab-size 8000" ;;
    llama-mini-8000) echo "--model models/llama-mini.json --vocab-size 8000" ;;
    gpt2-small) echo "--model models/gpt2-small.json --vocab-size 50257" ;;
    *) echo "error: bench/compare_generate.sh: unknown shape '$1' (gpt-mini-8000, llama-mini-8000, gpt2-small)" >&2; exit 2 ;;
  esac
}
rate() { grep -E '^tokens_per_sec' "$1" | awk '{print $2}'; }
best() { printf '%s\n' "$@" | sort -n | tail -1; }
for shape in $shapes; do shape_args "$shape" > /dev/null; done  # every name checked before anything runs
mkdir -p "$out"

printf '%-18s %10s %10s %7s\n' shape lmkit "HF sdpa" ratio
for shape in $shapes; do
  args=$(shape_args "$shape")
  common=(--new-tokens "$new" --prompt-len "$prompt" --batch-size "$batch" --threads "$threads")
  ours="" theirs=""
  for round in $(seq "$rounds"); do
    log=$out/$shape-lmkit-$round.log
    $lmkit generate $args "${common[@]}" --cache-only > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
    ours="$ours $(rate "$log")"
    log=$out/$shape-hf-$round.log
    $py bench/hf_generate.py $args "${common[@]}" > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
    theirs="$theirs $(rate "$log")"
  done
  l=$(best $ours) h=$(best $theirs)
  printf '%-18s %10.0f %10.0f %6.2fx\n' "$shape" "$l" "$h" "$(awk -v a="$l" -v b="$h" 'BEGIN { print a / b }')"
done
echo "new tokens/s, greedy with the KV cache, best of $rounds interleaved rounds; prompt $prompt, $new new tokens, batch $batch, $threads threads, CPU;"
echo "HF: $($py -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)'); logs in $out"
