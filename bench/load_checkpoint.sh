#!/usr/bin/env bash
# Loading a checkpoint directory: lmkit's load_pretrained (the random initialisation skipped),
# the same load with the initialisation drawn first (lmkit before 2026-11-29), and HF's
# from_pretrained of the same directory, in one run. The checkpoints are the presets' configs
# with HF's random weights, written by HF's save_pretrained (no hub needed).
#   bash bench/load_checkpoint.sh                         (gpt2-small bert-base t5-base)
#   PRESETS="gpt2-small" ROUNDS=3 THREADS=2 bash bench/load_checkpoint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || { echo "error: bench/load_checkpoint.sh takes no arguments (PRESETS, ROUNDS, THREADS are environment variables), got '$1'" >&2; exit 2; }
presets=${PRESETS:-"gpt2-small bert-base t5-base"} rounds=${ROUNDS:-3} threads=${THREADS:-$(nproc)}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS '$rounds': expected a positive integer" >&2; exit 2; }
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || { echo "error: THREADS '$threads': expected a positive integer" >&2; exit 2; }
for p in $presets; do
  [ -f "models/$p.json" ] || { echo "error: PRESETS: no models/$p.json" >&2; exit 2; }
done
bench=${LMKIT_BENCH:-build/bin/lmkit-bench}
[ -x "$bench" ] || { echo "error: $bench is missing: build first (scripts/build.sh)" >&2; exit 1; }
python=${PYTHON:-.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-12s %11s %10s %10s %10s %9s %9s\n' preset parameters lmkit drawn HF "vs drawn" "vs HF"
for p in $presets; do
  "$python" - "models/$p.json" "$work/$p" <<'EOF'
import json, sys
import transformers
config = json.load(open(sys.argv[1]))
kind = config.pop("model_type")
head = {"gpt2": "GPT2LMHeadModel", "bert": "BertForPreTraining", "t5": "T5ForConditionalGeneration"}[kind]
model = getattr(transformers, head)(transformers.AutoConfig.for_model(kind, **config))
model.save_pretrained(sys.argv[2])
EOF
  lmkit=$("$bench" load --checkpoint "$work/$p" --rounds "$rounds" --threads "$threads")
  grep -q "^same tensors *yes" <<<"$lmkit" || { echo "error: $p: the two loads differ" >&2; echo "$lmkit" >&2; exit 1; }
  hf=$(OMP_NUM_THREADS=$threads "$python" - "$work/$p" "$rounds" "$threads" <<'EOF'
import statistics, sys, time
import torch, transformers
torch.set_num_threads(int(sys.argv[3]))
cls = {"gpt2": "GPT2LMHeadModel", "bert": "BertForPreTraining", "t5": "T5ForConditionalGeneration"}
kind = transformers.AutoConfig.from_pretrained(sys.argv[1]).model_type
times = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    getattr(transformers, cls[kind]).from_pretrained(sys.argv[1])
    times.append(time.perf_counter() - t0)
print(f"{statistics.median(times):.3f}")
EOF
)
  fast=$(sed -n 's/^load_pretrained *\([0-9.]*\) s.*/\1/p' <<<"$lmkit")
  slow=$(sed -n 's/^drawn, then read *\([0-9.]*\) s.*/\1/p' <<<"$lmkit")
  params=$(sed -n 's/^checkpoint.*(\([0-9]*\) parameters).*/\1/p' <<<"$lmkit")
  python3 -c "import sys; p, n, f, s, h = sys.argv[1:]; f, s, h = float(f), float(s), float(h)
print(f'{p:<12} {int(n):>11,} {f:>9.2f}s {s:>9.2f}s {h:>9.2f}s {s / f:>8.2f}x {h / f:>8.2f}x')" "$p" "$params" "$fast" "$slow" "$hf"
done
