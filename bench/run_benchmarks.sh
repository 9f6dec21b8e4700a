#!/usr/bin/env bash
# Runs lmkit's own benchmarks (training step, generation, data pipeline, one layer) and
# prints the figures. The HuggingFace comparison is bench/compare_hf.sh (side by side),
# the lever re-check bench/levers.sh.
# Run it on an otherwise idle machine: every figure is a rate.
#   bash bench/run_benchmarks.sh [OUT_DIR]      (default runs/bench; one log per benchmark)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/bench "$@") || exit 2
mkdir -p "$out"
b=build/bin/lmkit-bench
steps=${STEPS:-10}
run() {  # name, then lmkit-bench arguments
  local name=$1
  shift
  echo "== $name: lmkit-bench $*"
  "$b" "$@" | tee "$out/$name.log" | grep -E "step \(|parts|achieved|GEMM|tokens/s|peak|RSS|heap|cache|speed-up|same tokens|x training|slowest|ratio"
}
# The shapes of the HuggingFace table (batch 32 x 128, AdamW).
run bert-mini-30522-fp32 train --model models/bert-mini.json --batch-size 32 --seq-len 128 --steps "$steps"
run bert-mini-30522-bf16 train --model models/bert-mini.json --batch-size 32 --seq-len 128 --steps "$steps" --dtype bf16
run bert-mini-8000-fp32 train --model models/bert-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --steps "$steps"
run bert-mini-8000-bf16 train --model models/bert-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --steps "$steps" --dtype bf16
run gpt-mini-8000-fp32 train --model models/gpt-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --steps "$steps"
run gpt-mini-8000-bf16 train --model models/gpt-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --steps "$steps" --dtype bf16
run t5-mini-8000-fp32 train --model models/t5-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --target-len 32 --steps "$steps"
run t5-mini-8000-bf16 train --model models/t5-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --target-len 32 --steps "$steps" --dtype bf16
run generate-gpt-mini generate --model models/gpt-mini.json --new-tokens 256 --prompt-len 16
run data data --batches 100
run layer layer
