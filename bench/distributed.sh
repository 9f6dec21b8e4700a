#!/usr/bin/env bash
# Data-parallel scaling on this machine: the same global batch trained by one
# process and by N processes under torchrun (Gloo over loopback), same steps,
# same data. Prints tokens/s (all ranks together, median of the logged steps
# after the first 5), the all-reduce wait per step, and the ratios.
#   bash bench/distributed.sh [OUT_DIR]              (default runs/distributed)
#   STEPS=30 BATCH=32 SEQ=128 MODEL=models/bert-mini.json bash bench/distributed.sh
# MODE=zero: the optimizer sharded or not (--shard-optimizer 0, 1, 2) at PROCS processes, same
# run: each rank's optimizer state in bytes, its peak resident memory, the most bytes of whole
# gradient buckets it held at once (stage 2: two buckets in backward) and the step time; stages 1
# and 2 also with --no-overlap-param-gather ("end": the all-gather at the step's end).
#   MODE=zero MODEL=models/gpt-small.json BATCH=8 SEQ=128 STEPS=12 bash bench/distributed.sh
# BUCKET_MB=M passes --bucket-mb M to every data-parallel run (the reducer's default: 25).
# FLAGS="..." adds lmkit-pretrain flags to every run (MODE=zero FLAGS="--dtype bf16-weights --recompute").
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/distributed "$@") || exit 2
steps=${STEPS:-30} batch=${BATCH:-32} seq=${SEQ:-128} model=${MODEL:-models/bert-mini.json}
cores=$(nproc)
procs=${PROCS:-2}
buckets=()
if [ -n "${BUCKET_MB:-}" ]; then
  [[ "$BUCKET_MB" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "error: BUCKET_MB must be a number of MiB, not '$BUCKET_MB'" >&2; exit 2; }
  buckets=(--bucket-mb "$BUCKET_MB")
fi
extra=()
if [ -n "${FLAGS:-}" ]; then
  read -r -a extra <<<"$FLAGS"
  for f in "${extra[@]}"; do
    case "$f" in
      --output* | --model* | --train* | --shard-optimizer* | --batch-size* | --threads* | --steps* | --tokenizer*)
        echo "error: FLAGS must not set $f: the benchmark sets it" >&2; exit 2 ;;
    esac
  done
fi
rm -rf "$out" && mkdir -p "$out"
common=(--model "$model" --train data/wikitext-2-sample/train.txt --seq-len "$seq" --log-every 1 --vocab-size 8000 --seed 1
        "${extra[@]}")
# The tokenizer and the encoded corpus once, outside the timings.
build/bin/lmkit-pretrain "${common[@]}" --steps 1 --batch-size 8 --output "$out/prep" > /dev/null 2>&1
tok=(--tokenizer "$out/prep/tokenizer.model" --steps "$steps")
stats() {  # median tokens/s, mean reduce wait and mean all-gather wait of the steps after the 5th
  .venv/bin/python - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l][5:]
rate = statistics.median(r["tokens_per_sec"] for r in rows)
wait = statistics.mean(r.get("reduce_wait_ms", 0.0) for r in rows)
gather = statistics.mean(r.get("gather_wait_ms", 0.0) for r in rows)
print(f"{rate:.0f} {wait:.1f} {gather:.1f}")
PY
}
run_one() {  # name threads batch
  build/bin/lmkit-pretrain "${common[@]}" "${tok[@]}" --threads "$2" --batch-size "$3" --output "$out/$1" > "$out/$1.log" 2>&1
  stats "$out/$1/metrics.jsonl"
}
run_ranks() {  # name threads-per-rank batch-per-rank
  .venv/bin/torchrun --no-python --nproc-per-node "$procs" --master-port "${PORT:-29561}" build/bin/lmkit-pretrain \
    "${common[@]}" "${tok[@]}" "${buckets[@]}" --threads "$2" --batch-size "$3" --output "$out/$1" > "$out/$1.log" 2>&1
  stats "$out/$1/metrics.jsonl"
}
per_rank=$((batch / procs)) threads_per_rank=$(( cores / procs > 0 ? cores / procs : 1 ))
if [ "${MODE:-scaling}" = zero ]; then
  echo "model $model, $procs processes x batch $per_rank x $seq, $steps steps, $threads_per_rank thread(s) each"
  printf '%-12s %-6s %16s %14s %16s %20s %14s %22s\n' "stage" "rank" "elements held" "state bytes" "peak RSS (MiB)" \
    "bucket bytes peak" "ms/step" "gather wait ms/step"
  # "1 end", "2 end": --no-overlap-param-gather (the all-gather at the end of the step, not during the next forward).
  for stage in 0 1 "1 end" 2 "2 end"; do
    name="zero-${stage/ /-}" flags=(--shard-optimizer "${stage%% *}")
    [ "${stage#* }" = end ] && flags+=(--no-overlap-param-gather)
    .venv/bin/torchrun --no-python --nproc-per-node "$procs" --master-port "${PORT:-29561}" build/bin/lmkit-pretrain \
      "${common[@]}" "${tok[@]}" "${buckets[@]}" --threads "$threads_per_rank" --batch-size "$per_rank" "${flags[@]}" \
      --output "$out/$name" > "$out/$name.log" 2>&1
    read -r rate _ gather < <(stats "$out/$name/metrics.jsonl")
    ms=$(.venv/bin/python -c "print(f'{$batch * $seq / $rate * 1000:.0f}')")
    .venv/bin/python - "$out/$name.log" "$stage" "$ms" "$gather" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
rows = re.findall(r"rank (\d+) of \d+: optimizer state of (\d+) of \d+ parameter elements, (\d+) bytes "
                  r"\([^)]*\); peak resident memory ([0-9.]+) MiB; gradient buckets: at most (\d+) of \d+ bytes", text)
for rank, held, nbytes, peak, buckets in sorted(rows):
    # The step time and the all-gather wait are rank 0's (its metrics.jsonl); stage 0 has no gather.
    print(f"{sys.argv[2]:<12} {rank:<6} {held:>16} {nbytes:>14} {peak:>16} {buckets:>20} {sys.argv[3]:>14} {sys.argv[4]:>22}")
PY
  done
  exit 0
fi
read -r single_all _ < <(run_one single-all-cores "$cores" "$batch")
read -r single_one _ < <(run_one single-one-rank-share "$threads_per_rank" "$per_rank")
read -r ranks wait _ < <(run_ranks ranks "$threads_per_rank" "$per_rank")
echo "model $model, global batch $batch x $seq, $steps steps, $cores cores, $procs processes"
printf '%-52s %12s\n' "configuration" "tokens/s"
printf '%-52s %12s\n' "1 process, $cores threads, batch $batch" "$single_all"
printf '%-52s %12s\n' "1 process, $threads_per_rank threads, batch $per_rank (one rank's share)" "$single_one"
printf '%-52s %12s   (all-reduce wait %s ms/step)\n' "$procs processes x $threads_per_rank threads, batch $per_rank each" "$ranks" "$wait"
.venv/bin/python - "$single_all" "$single_one" "$ranks" "$procs" <<'PY'
import sys
a, one, r, n = map(float, sys.argv[1:])
print(f"ratio {int(n)} processes / 1 process on the same cores: {r / a:.2f}x")
print(f"scaling efficiency against {int(n)} x one rank's share alone: {r / (n * one):.0%}")
PY
