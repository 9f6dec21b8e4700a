#!/usr/bin/env bash
# Behaviour check for refactors: pretrains gpt-mini (clm), bert-tiny (mlm and mlm+nsp),
# t5-mini (span) and transformer-small (seq2seq, a copy task on the sample's lines) for
# 30 steps with a fixed seed and one thread with the apps in two build folders, and
# compares the logged losses and the final weights bit for bit.
#
#   scripts/compare_runs.sh BIN_BEFORE BIN_AFTER [WORK]
#
# e.g. build the old commit with `git worktree add /tmp/old REV && LMKIT_BUILD_DIR=build
# bash /tmp/old/scripts/build.sh`, then scripts/compare_runs.sh /tmp/old/build/bin build/bin.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "error: scripts/compare_runs.sh: expected BIN_BEFORE BIN_AFTER [WORK], got $# argument(s)" >&2; sed -n '2,10p' "$0" >&2; exit 2; }
for d in "$1" "$2"; do [ -x "$d/lmkit-pretrain" ] || { echo "error: scripts/compare_runs.sh: $d holds no lmkit-pretrain (a build's bin folder)" >&2; exit 2; }; done
before=$1 after=$2 work=${3:-/tmp/lmkit-compare}
status=0
mkdir -p "$work"
grep -v '^ *$' data/wikitext-2-sample/valid.txt | cut -c1-120 | head -400 | tee "$work/pairs.src" > "$work/pairs.tgt"
for spec in "gpt-mini clm" "bert-tiny mlm" "bert-tiny mlm+nsp" "t5-mini span" "transformer-small seq2seq"; do
  set -- $spec
  name="$1-$2"
  data=(--train data/wikitext-2-sample/train.txt --valid data/wikitext-2-sample/valid.txt)
  [ "$2" = seq2seq ] && data=(--train "$work/pairs" --valid "$work/pairs" --source-lang src --target-lang tgt)
  for side in before after; do
    bin=$before; [ "$side" = after ] && bin=$after
    rm -rf "${work:?}/$side/$name"
    "$bin/lmkit-pretrain" --model "models/$1.json" --objective "$2" "${data[@]}" --output "$work/$side/$name" \
      --steps 30 --batch-size 8 --seq-len 64 --vocab-size 2000 --eval-every 30 --log-every 10 --threads 1 --seed 7 \
      >/dev/null 2>&1 || { echo "$name: lmkit-pretrain failed in $bin"; status=1; }
  done
  losses() { python3 -c "import json,sys; print(' '.join(repr(json.loads(l)['loss']) for l in open(sys.argv[1]) if 'loss' in json.loads(l)))" "$1"; }
  a=$(losses "$work/before/$name/metrics.jsonl") b=$(losses "$work/after/$name/metrics.jsonl")
  if [ "$a" = "$b" ] && cmp -s "$work/before/$name/final/model.safetensors" "$work/after/$name/final/model.safetensors"; then
    echo "$1 $2: identical losses ($a) and final weights"
  else
    echo "$1 $2: DIFFERENT: before $a, after $b"; status=1
  fi
done
exit "$status"
