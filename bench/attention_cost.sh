#!/usr/bin/env bash
# Long Range Arena's cost table (Tay et al. 2021, Table 2: training steps per second and
# peak memory relative to the full Transformer at 1K-4K tokens), measured here with
# lmkit-bench train for the attentions lmkit has, at 1K to 16K, with recomputation off and on.
#
#   bash bench/attention_cost.sh [--bin build/bin] [--lengths "1024 2048 3072 4096 8192 16384"]
#        [--batch-size 2] [--budget-gib 16] [--attentions "linformer longformer bigbird"]
#        [--plugin liblmkit_performer.so]   (needed by --attentions performer)
#
# The model is LRA-shaped but CPU-sized: a BERT encoder of 4 layers, d 256, 4 heads, FFN 1024,
# a vocabulary of 512 (ListOps-like), masked-LM step on random tokens, fp32, every core.
# Linformer: linformer_k 256, headwise sharing. Longformer: attention_window 256 (128 keys either
# side; a masked-LM batch marks no global token, so this is also the encoder's sliding window).
# BigBird: block_size 64, 3 random blocks (HF's defaults). Relative: Shaw et al.'s, k = 20 (full
# attention's T² plus the distance terms). Performer: the plugin of examples/performer_plugin,
# 256 random features (LRA's setting). Each row's ratios are against the full
# attention of the same length and the same recompute setting, measured in the same run.
# A full-attention configuration whose attention matrices alone would pass --budget-gib
# (batch x heads x T^2 x 4 bytes x 3 — scores, probabilities, their gradient — x the layers
# held: all of them, or one with recomputation) is not run and says so.
set -euo pipefail
bin=build/bin
lengths="1024 2048 3072 4096 8192 16384"
batch=2
budget=16
attentions="linformer longformer bigbird"
plugin=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin | --lengths | --batch-size | --budget-gib | --attentions | --plugin)
      [[ $# -ge 2 ]] || { echo "error: $1 needs a value (see the comment at the top of $0)" >&2; exit 2; } ;;&
    --bin) bin="$2"; shift 2 ;;
    --lengths) lengths="$2"; shift 2 ;;
    --batch-size) batch="$2"; shift 2 ;;
    --budget-gib) budget="$2"; shift 2 ;;
    --attentions) attentions="$2"; shift 2 ;;
    --plugin) [[ -f "$2" ]] || { echo "error: --plugin: no file '$2'" >&2; exit 2; }; plugin=(--plugin "$2"); shift 2 ;;
    *) echo "error: unknown option '$1' (see the comment at the top of $0)" >&2; exit 2 ;;
  esac
done
# Every argument checked before anything runs (an empty, negative or unknown one gave empty rows and exit 0).
usage_error() { echo "error: $*" >&2; exit 2; }
is_count() { [[ $1 =~ ^[0-9]+$ ]] && (( 10#$1 > 0 )); }
[[ -n ${lengths// /} ]] || usage_error "--lengths is empty: give one or more sequence lengths, e.g. \"1024 2048\""
for t in $lengths; do
  is_count "$t" || usage_error "--lengths: '$t' is not a positive whole number of tokens"
  [[ " $attentions " != *" bigbird "* ]] || (( 10#$t % 64 == 0 )) ||
    usage_error "--lengths: $t is not a multiple of 64 (BigBird's block_size)"
done
is_count "$batch" || usage_error "--batch-size: '$batch' is not a positive whole number"
[[ $budget =~ ^[0-9]+([.][0-9]+)?$ ]] && [[ $budget != 0 ]] && [[ ! $budget =~ ^0+([.]0*)?$ ]] ||
  usage_error "--budget-gib: '$budget' is not a positive number of GiB"
[[ -n ${attentions// /} ]] || usage_error "--attentions is empty: name one or more of linformer, longformer, bigbird, relative, performer"
for a in $attentions; do
  case $a in
    linformer | longformer | bigbird | relative) ;;
    performer) [[ ${#plugin[@]} -gt 0 ]] || usage_error "--attentions performer needs --plugin PATH/liblmkit_performer.so (examples/performer_plugin)" ;;
    *) usage_error "--attentions: unknown attention '$a' (linformer, longformer, bigbird, relative or performer)" ;;
  esac
done
[[ -x "$bin/lmkit-bench" ]] || { echo "error: $bin/lmkit-bench not found (build first: bash scripts/build.sh)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
max=0
for t in $lengths; do (( t > max )) && max=$t; done
cat > "$work/full.json" <<EOF
{"model_type": "bert", "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
 "intermediate_size": 1024, "max_position_embeddings": $max, "type_vocab_size": 1}
EOF
sed 's/"type_vocab_size": 1}/"type_vocab_size": 1, "attention": "linformer", "linformer_k": 256}/' "$work/full.json" \
  > "$work/linformer.json"
sed 's/"type_vocab_size": 1}/"type_vocab_size": 1, "attention": "relative", "max_relative_position": 20}/' "$work/full.json" \
  > "$work/relative.json"
sed 's/"type_vocab_size": 1}/"type_vocab_size": 1, "attention": "performer", "performer_features": 256}/' "$work/full.json" \
  > "$work/performer.json"
cat > "$work/longformer.json" <<EOF
{"model_type": "longformer", "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
 "intermediate_size": 1024, "max_position_embeddings": $((max + 2)), "type_vocab_size": 1, "pad_token_id": 1,
 "attention_window": 256}
EOF
cat > "$work/bigbird.json" <<EOF
{"model_type": "big_bird", "vocab_size": 512, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
 "intermediate_size": 1024, "max_position_embeddings": $max, "type_vocab_size": 1, "hidden_act": "gelu",
 "block_size": 64, "num_random_blocks": 3}
EOF

# One configuration: "STEP_MS PEAK_MIB", or "- -" when it is over the budget or fails.
measure() {  # attention length recompute
  local attention=$1 t=$2 recompute=$3
  if [[ $attention == full || $attention == relative ]]; then  # recomputation holds one layer's at a time
    local layers=4 need
    [[ -n $recompute ]] && layers=1
    need=$(python3 -c "print(int($batch * 4 * $t * $t * 4 * $layers * 3 / 2**30 > $budget))")
    if [[ $need == 1 ]]; then echo "- -"; return; fi
  fi
  local out
  if ! out=$("$bin/lmkit-bench" train "${plugin[@]}" --model "$work/$attention.json" --batch-size "$batch" --seq-len "$t" --steps 2 \
        --warmup 1 --objective mlm $recompute 2>&1); then
    echo "- -"
    return
  fi
  local ms mib
  ms=$(awk '/^step \(median/ {print $5}' <<<"$out")
  mib=$(awk '/^peak RSS/ {print $3}' <<<"$out")
  echo "$ms $mib"
}

echo "attention cost, batch $batch, lmkit-bench train (masked LM, fp32), $(date -u +%Y-%m-%d), $(nproc) cores"
printf '%-8s %-10s %-11s %10s %10s %12s %12s\n' length recompute attention "step ms" "steps/s" "peak MiB" "vs full"
for t in $lengths; do
  for recompute in "" --recompute; do
    read -r full_ms full_mib < <(measure full "$t" "$recompute")
    label=${recompute:+on}
    label=${label:-off}
    for name in full $attentions; do
      if [[ $name == full ]]; then ms=$full_ms mib=$full_mib; else read -r ms mib < <(measure "$name" "$t" "$recompute"); fi
      if [[ $ms == - ]]; then
        printf '%-8s %-10s %-11s %10s %10s %12s %12s\n' "$t" "$label" "$name" "-" "-" "-" "not run"
        continue
      fi
      ratio="1.00x speed, 1.00x memory"
      if [[ $name != full && $full_ms != - ]]; then
        ratio=$(python3 -c "print(f'{$full_ms / $ms:.2f}x speed, {$mib / $full_mib:.2f}x memory')")
      elif [[ $name != full ]]; then
        ratio="(full not run)"
      fi
      printf '%-8s %-10s %-11s %10s %10s %12s   %s\n' "$t" "$label" "$name" "$ms" \
        "$(python3 -c "print(f'{1000 / $ms:.3f}')")" "$mib" "$ratio"
    done
  done
done
