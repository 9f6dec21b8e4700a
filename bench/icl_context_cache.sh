#!/usr/bin/env bash
# In-context scoring with each example's context read once through the KV cache (the default)
# against once per choice (--no-context-cache, lm-evaluation-harness' way): the same
# lmkit-evaluate call both ways, interleaved ROUNDS times; prints each task's best examples/s
# of each, the gain, and whether the accuracies agree.
#   bash bench/icl_context_cache.sh CHECKPOINT DATA [DATA...]     (ICL JSONL files or folders)
#   SHOTS="0 5" ROUNDS=2 THREADS=1 BATCH=16 DEVICE=cpu bash bench/icl_context_cache.sh runs/gpt-mini-wt2/final icl/
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 CHECKPOINT DATA [DATA...]" >&2; exit 2; }
ckpt=$1
shift
data=()
for d in "$@"; do data+=(--data "$d"); done
shots=${SHOTS:-"0 5"} rounds=${ROUNDS:-2} threads=${THREADS:-$(nproc)} batch=${BATCH:-16} device=${DEVICE:-cpu}
evaluate=${LMKIT_EVALUATE:-build/bin/lmkit-evaluate}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for k in $shots; do
  for round in $(seq "$rounds"); do
    for mode in cache plain; do
      flag=()
      [ $mode = plain ] && flag=(--no-context-cache)
      "$evaluate" --checkpoint "$ckpt" --metric in-context "${data[@]}" --shots "$k" --batch-size "$batch" \
        --threads "$threads" --device "$device" --output "$out/$k-$mode-$round.json" "${flag[@]}" > /dev/null
    done
  done
done
python3 - "$out" "$rounds" $shots <<'EOF'
import json, sys
out, rounds, shots = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'task':<16} {'shots':>5} {'shared':>7} {'cache ex/s':>11} {'plain ex/s':>11} {'gain':>6}  same accuracy")
for k in shots:
    runs = {m: [json.load(open(f"{out}/{k}-{m}-{r}.json"))["tasks"] for r in range(1, rounds + 1)] for m in ("cache", "plain")}
    for i, task in enumerate(runs["cache"][0]):
        best = {m: max(r[i]["examples_per_second"] for r in runs[m]) for m in runs}
        plain = runs["plain"][0][i]
        same = task["accuracy"] == plain["accuracy"] and task.get("accuracy_norm") == plain.get("accuracy_norm")
        shared = f"{task['shared_contexts']}/{task['examples']}"
        print(f"{task['task']:<16} {k:>5} {shared:>7} {best['cache']:>11.1f} {best['plain']:>11.1f} "
              f"{best['cache'] / best['plain']:>5.2f}x  {'yes' if same else 'NO'}")
EOF
