#!/usr/bin/env bash
# lmkit against HuggingFace Transformers, side by side in one run, on the same LibTorch
# (the .venv's torch), the same shapes and thread count: every ratio in
# docs/benchmarks.md's table comes from this command.
#
#   bash bench/compare_hf.sh [OUT_DIR]          (default runs/bench-hf; one log per run)
#   STEPS=10 ROUNDS=2 THREADS=2 DEVICE=cpu SHAPES="bert-mini-30522 gpt-mini-8000" bash bench/compare_hf.sh
#
# For each shape and dtype it runs lmkit-bench train, HF with eager attention and HF with
# SDPA, interleaved ROUNDS times (so a slow minute hurts all three alike), and prints the
# best tokens/s of each and lmkit's ratio to each HF variant. On a GPU (DEVICE=cuda) the
# HF runs also include torch.compile (HF_COMPILE=1), and GPT-2 shapes add the compact
# plain-PyTorch peer bench/gpt_peer.py, eager and (HF_COMPILE=1) compiled. TF32=1 lets fp32
# matmuls use TensorFloat-32 on every side. Peak GPU memory (MiB, allocated) follows each
# row, from the last round, lmkit first. HF_PEERS="sdpa" runs fewer HF variants. lmkit runs
# with its fused CUDA kernels and CPU paths (the default); FUSED=1 adds lmkit without them as
# a peer ("lmkit-unfused", LMKIT_DISABLE=fused,cpu_fused: its ratio is their speed-up).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/bench-hf "$@") || exit 2
mkdir -p "$out"
steps=${STEPS:-10} rounds=${ROUNDS:-2} threads=${THREADS:-$(nproc)} device=${DEVICE:-cpu}
py=${PYTHON:-.venv/bin/python}
lmkit=${LMKIT_BENCH:-build/bin/lmkit-bench}
shapes=${SHAPES:-"bert-mini-30522 gpt-mini-8000 t5-mini-8000"}
dtypes=${DTYPES:-"fp32 bf16"}
hf_peers=${HF_PEERS:-"eager sdpa"}
[ "${HF_COMPILE:-0}" = 1 ] && hf_peers="$hf_peers sdpa-compiled"
if [ "${FUSED:-0}" = 1 ]; then hf_peers="lmkit-unfused $hf_peers"; fi
tf32=(); [ "${TF32:-0}" = 1 ] && tf32=(--tf32)

shape_args() {  # NAME -> the model and shape arguments both sides take
  case $1 in
    bert-mini-30522) echo "--model models/bert-mini.json --batch-size 32 --seq-len 128" ;;
    bert-mini-8000) echo "--model models/bert-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    gpt-mini-8000) echo "--model models/gpt-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    t5-mini-8000) echo "--model models/t5-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128 --target-len 32" ;;
    llama-mini-8000) echo "--model models/llama-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    mistral-mini-8000) echo "--model models/mistral-mini.json --vocab-size 8000 --batch-size 32 --seq-len 128" ;;
    gpt2-small-b16x1024) echo "--model models/gpt2-small.json --batch-size 16 --seq-len 1024" ;;
    bert-base-b32x512) echo "--model models/bert-base.json --batch-size 32 --seq-len 512" ;;
    t5-base-b32x512) echo "--model models/t5-base.json --batch-size 32 --seq-len 512" ;;
    *) echo "unknown shape $1" >&2; exit 2 ;;
  esac
}
rate() { grep -E '^tokens_per_sec' "$1" | awk '{print $2}'; }
memory() { grep -oE 'peak GPU memory +[0-9]+' "$1" | grep -oE '[0-9]+$' || echo -; }
best() { printf '%s\n' "$@" | sort -n | tail -1; }
peers_of() {  # SHAPE -> the peers that run it
  local peers=$hf_peers
  if [ "$device" = cuda ] && [ "${1#gpt}" != "$1" ]; then
    peers="$peers compact"
    [ "${HF_COMPILE:-0}" = 1 ] && peers="$peers compact-compiled"
  fi
  echo $peers
}
run_peer() {  # PEER LOG ARGS...
  local p=$1 log=$2; shift 2
  case $p in
    lmkit-unfused) env LMKIT_DISABLE=fused,cpu_fused $lmkit train "$@" "${tf32[@]}" ;;
    compact*) $py bench/gpt_peer.py "$@" "${tf32[@]}" $([ "$p" = compact-compiled ] && echo --compile) ;;
    *) $py bench/hf_train.py "$@" "${tf32[@]}" --attn "${p%%-*}" $([ "$p" = sdpa-compiled ] && echo --compile) ;;
  esac > "$log" 2>&1
}

for shape in $shapes; do
  peers=$(peers_of "$shape")
  printf '%-20s %-5s %10s' shape dtype lmkit
  for p in $peers; do printf ' %16s %7s' "$([ "${p#compact}" = "$p" ] && [ "${p#lmkit}" = "$p" ] && echo "HF $p" || echo "$p")" ratio; done
  printf '\n'
  for dtype in $dtypes; do
    args=$(shape_args "$shape")
    declare -A r=() m=()
    for round in $(seq "$rounds"); do
      log=$out/$shape-$dtype-lmkit-$round.log
      $lmkit train $args --steps "$steps" --dtype "$dtype" --threads "$threads" --device "$device" \
        "${tf32[@]}" > "$log" 2>&1
      r[lmkit]="${r[lmkit]:-} $(rate "$log")" m[lmkit]=$(memory "$log")
      for p in $peers; do
        log=$out/$shape-$dtype-hf-$p-$round.log
        run_peer "$p" "$log" $args --steps "$steps" --dtype "$dtype" --threads "$threads" --device "$device"
        r[$p]="${r[$p]:-} $(rate "$log")" m[$p]=$(memory "$log")
      done
    done
    l=$(best ${r[lmkit]})
    printf '%-20s %-5s %10.0f' "$shape" "$dtype" "$l"
    for p in $peers; do
      h=$(best ${r[$p]})
      printf ' %16.0f %6.2fx' "${h:-0}" "$(awk -v a="$l" -v b="${h:-0}" 'BEGIN { print (b > 0 ? a / b : 0) }')"
    done
    printf '\n'
    if [ "$device" = cuda ]; then
      printf '%-26s %10s' "  peak GPU memory, MiB" "${m[lmkit]}"
      for p in $peers; do printf ' %16s %7s' "${m[$p]}" ""; done
      printf '\n'
    fi
    unset r m
  done
done
echo "tokens/s, best of $rounds interleaved rounds of $steps timed steps (median step each); $threads threads, device $device${tf32:+, TF32};"
echo "HF: $($py -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)'); logs in $out"
