#!/usr/bin/env bash
# The ELECTRA plugin's objective end to end (CTest "electra: ..."; needs the fixture that
# builds examples/electra against the installed lmkit, and the project's Python):
#  1. lmkit-pretrain --plugin ... --objective electra on electra-mini: the discriminator and
#     generator/ are written, every loss term and metric is in metrics.jsonl;
#  2. a run stopped at step 4 and resumed ends byte-identical to an uninterrupted one, both
#     models;
#  3. transformers loads the run as ElectraForPreTraining and generator/ as
#     ElectraForMaskedLM with no missing or unexpected keys;
#  4. lmkit-evaluate --metric objective: RTD accuracy with the saved generator's replacements,
#     the generator's MLM perplexity;
#  5. finetuning the discriminator for classification through the plugin, and lmkit-suite.
#   electra_test.sh SOURCE_DIR BIN_DIR PLUGIN PYTHON WORK_DIR
set -euo pipefail
src="$(realpath "$1")" bin="$(realpath "$2")" plugin="$(realpath "$3")" python="$4" work="$(realpath -m "$5")"
rm -rf "$work" && mkdir -p "$work"
export OMP_NUM_THREADS=1
run=(--plugin "$plugin" --model "$src/examples/electra/electra-mini.json" --objective electra
     --train "$src/data/wikitext-2-sample/train.txt" --valid "$src/data/wikitext-2-sample/valid.txt"
     --steps 8 --batch-size 8 --seq-len 64 --vocab-size 1000 --save-every 4 --eval-batches 2 --log-every 2 --threads 1)
"$bin/lmkit-pretrain" "${run[@]}" --output "$work/full" >"$work/full.log" 2>&1 || { tail -20 "$work/full.log"; exit 1; }
for f in model.safetensors generator/model.safetensors generator/config.json lmkit_plugin.json; do
  [ -f "$work/full/final/$f" ] || { echo "FAIL: the run lacks final/$f"; exit 1; }
done
valid="$(grep '"split":"valid"' "$work/full/metrics.jsonl" | tail -1)"
for key in mlm_loss rtd_loss rtd_accuracy replaced_fraction generator_accuracy; do
  grep -q "\"$key\":" <<<"$valid" || { echo "FAIL: metrics.jsonl's validation lacks $key: $valid"; exit 1; }
done
cut=("${run[@]}" --tokenizer "$work/full/tokenizer.model" --output "$work/cut")
"$bin/lmkit-pretrain" "${cut[@]}" --stop-at 4 >"$work/cut.log" 2>&1 || { tail -20 "$work/cut.log"; exit 1; }
"$bin/lmkit-pretrain" "${cut[@]}" --resume >>"$work/cut.log" 2>&1 || { tail -20 "$work/cut.log"; exit 1; }
for f in model.safetensors generator/model.safetensors; do
  cmp "$work/full/final/$f" "$work/cut/final/$f" || { echo "FAIL: the resumed run's $f differs from the uninterrupted run's"; exit 1; }
done
echo "electra: 8 steps; 4 + 4 resumed to byte-identical discriminator and generator"
"$python" - "$work/full/final" <<'PY'
import sys
import transformers
d = sys.argv[1]
for cls, path in ((transformers.ElectraForPreTraining, d), (transformers.ElectraForMaskedLM, d + "/generator")):
    model, info = cls.from_pretrained(path, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        sys.exit(f"FAIL: {cls.__name__} from {path}: {bad}")
    print(f"{cls.__name__} loads {path} (hidden size {model.config.hidden_size}) with no missing or unexpected keys")
PY
"$bin/lmkit-evaluate" --plugin "$plugin" --checkpoint "$work/full/final" --metric objective \
  --data "$src/data/wikitext-2-sample/valid.txt" --output "$work/objective.json" --threads 1 >"$work/objective.log" 2>&1 ||
  { tail -20 "$work/objective.log"; exit 1; }
for key in rtd_accuracy replaced_fraction mlm_perplexity generator_accuracy; do
  grep -q "\"$key\"" "$work/objective.json" || { echo "FAIL: lmkit-evaluate --metric objective lacks $key"; cat "$work/objective.json"; exit 1; }
done
echo "electra: lmkit-evaluate --metric objective reports the discriminator's RTD accuracy and the generator's MLM perplexity"
# A checkpoint without its generator/: --metric objective and --init refuse it naming the folder
# (they would run a random generator); elsewhere it loads with one warning line.
cp -r "$work/full/final" "$work/no-generator" && rm -r "$work/no-generator/generator"
expect_refusal() {  # LOG, then the command: exit 2, its last line the one error naming generator/
  local log=$1 rc=0; shift
  "$@" >"$log" 2>&1 || rc=$?
  [ $rc -eq 2 ] && [ "$(grep -c '^error: ' "$log")" -eq 1 ] &&
    tail -1 "$log" | grep -qE "^error: .*/no-generator: no generator/model.safetensors \(the ElectraForMaskedLM trained beside the model\): this needs it" ||
    { echo "FAIL: exit $rc, not one error naming generator/:"; cat "$log"; exit 1; }
}
expect_refusal "$work/no-generator-objective.log" "$bin/lmkit-evaluate" --plugin "$plugin" --checkpoint "$work/no-generator" \
  --metric objective --data "$src/data/wikitext-2-sample/valid.txt" --output "$work/no-generator.json" --threads 1
expect_refusal "$work/no-generator-init.log" "$bin/lmkit-pretrain" --plugin "$plugin" --init "$work/no-generator" \
  --objective electra --train "$src/data/wikitext-2-sample/valid.txt" --steps 1 --batch-size 2 --seq-len 32 \
  --output "$work/no-generator-init" --threads 1
echo "electra: a checkpoint without generator/ is refused by --metric objective and --init"
head -n 201 "$src/tests/fixtures/text/sst2.dev.tsv" >"$work/train.tsv"
{ head -n 1 "$src/tests/fixtures/text/sst2.dev.tsv"; sed -n 202,300p "$src/tests/fixtures/text/sst2.dev.tsv"; } >"$work/dev.tsv"
"$bin/lmkit-finetune" --plugin "$plugin" --checkpoint "$work/full/final" --train "$work/train.tsv" --dev "$work/dev.tsv" \
  --output "$work/cls" --epochs 1 --batch-size 16 --max-length 64 --threads 1 >"$work/cls.log" 2>&1 || { tail -20 "$work/cls.log"; exit 1; }
grep -q '"ElectraForSequenceClassification"' "$work/cls/best/config.json" || { echo "FAIL: the finetuned head is not ElectraForSequenceClassification"; exit 1; }
# lmkit-bench through the plugin: the objective's step, both models counted.
"$bin/lmkit-bench" train --plugin "$plugin" --model "$src/examples/electra/electra-mini.json" --objective electra \
  --batch-size 2 --seq-len 32 --vocab-size 1000 --steps 1 --warmup 0 --threads 1 >"$work/bench.log" 2>&1 ||
  { tail -20 "$work/bench.log"; exit 1; }
grep -q "ElectraForPreTraining, .* objective electra" "$work/bench.log" || { echo "FAIL: lmkit-bench did not train the electra objective"; cat "$work/bench.log"; exit 1; }
# The suite through the plugin: its runs (lmkit-finetune, lmkit-evaluate) get --plugin from lmkit-suite.
"$bin/lmkit-suite" --plugin "$plugin" --suite "$src/tests/fixtures/suite/tiny.json" --checkpoint "$work/full/final" \
  --tasks sentiment,ner --seeds 1 --output "$work/suite" --threads 1 >"$work/suite.log" 2>&1 || { tail -20 "$work/suite.log"; exit 1; }
grep -qE '^\| .*/full/final \| [0-9.]+ ' "$work/suite/results.md" || { echo "FAIL: lmkit-suite's table lacks the ELECTRA row"; cat "$work/suite/results.md"; exit 1; }
echo "electra: ok (pretrain, exact resume, HF loads both models, evaluate, finetune and lmkit-suite through --plugin)"
