#!/usr/bin/env bash
# The installed package, as a user meets it (CTest "install: ..."; docs/library.md):
#  1. the install (cmake --install BUILD --prefix EXAMPLES/prefix) holds what a user needs;
#  2. each project in examples/, configured with only that prefix on CMAKE_PREFIX_PATH
#     (find_package(lmkit) finds LibTorch itself) and built by the fixture before this test
#     (tests/install/build_examples.sh into EXAMPLES/build), runs on the bundled data;
#  3. the plugin example: the installed apps load it with --plugin, its objective shows in
#     their --help, trains, and resumes to the same weights as an uninterrupted run; a
#     plugin claiming another lmkit version, and a second copy registering the same
#     objective, are refused with one error line;
#  4. a project that takes lmkit in with add_subdirectory() configures (no build).
#   install_test.sh SOURCE_DIR BUILD_DIR EXAMPLES_DIR WORK_DIR
set -euo pipefail
src="$(realpath "$1")" build="$(realpath "$2")" examples="$(realpath "$3")" work="$(realpath -m "$4")"
rm -rf "$work" && mkdir -p "$work"
prefix="$examples/prefix"
built() {  # built PROJECT FILE: the fixture's artifact of examples/PROJECT (or tests/install/PROJECT)
  [ -f "$examples/build/$1/$2" ] || { echo "FAIL: $examples/build/$1/$2 was not built (tests/install/build_examples.sh)" >&2; exit 1; }
  echo "$examples/build/$1/$2"
}
gen=() && command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
for f in include/lmkit/version.h include/lmkit/models/bert.h lib/liblmkit.so lib/liblmkit_spm.so bin/lmkit-pretrain \
         share/lmkit/models/bert-tiny.json lib/cmake/lmkit/lmkitConfig.cmake lib/cmake/lmkit/lmkitConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || { echo "FAIL: the install lacks $f"; exit 1; }
done
# The installed apps run from the prefix (RPATH $ORIGIN/../lib), no environment needed.
env -u LD_LIBRARY_PATH -u LMKIT_SPM_MODULE "$prefix/bin/lmkit-info" "$prefix/share/lmkit/models/bert-tiny.json" >/dev/null
# The CUDA module beside the installed liblmkit, found there when the apps ask about CUDA.
if [ -f "$build/lib/liblmkit_cuda.so" ]; then
  [ -e "$prefix/lib/liblmkit_cuda.so" ] || { echo "FAIL: the install lacks lib/liblmkit_cuda.so"; exit 1; }
  env -u LD_LIBRARY_PATH -u LMKIT_CUDA_MODULE "$prefix/bin/lmkit-info" --system --json >/dev/null
fi

# SST-2 dev rows (the bundled fixture): the first 600 train, the rest evaluate.
data="$work/data" && mkdir -p "$data"
head -n 601 "$src/tests/fixtures/text/sst2.dev.tsv" >"$data/train.tsv"
{ head -n 1 "$src/tests/fixtures/text/sst2.dev.tsv"; tail -n +602 "$src/tests/fixtures/text/sst2.dev.tsv"; } >"$data/dev.tsv"

example="$work/pretrain_finetune"
env -u LD_LIBRARY_PATH -u LMKIT_SPM_MODULE OMP_NUM_THREADS=1 "$(built pretrain_finetune pretrain_finetune)" \
  "$prefix/share/lmkit/models/bert-tiny.json" "$src/data/wikitext-2-sample/train.txt" "$data/train.tsv" "$data/dev.tsv" \
  "$example/out" | tee "$example.out"
grep -q "^lmkit 0\.[0-9]*\.[0-9]* on LibTorch " "$example.out"
grep -qE "^finetuned: dev accuracy 0\.[0-9]+, macro F1 [0-9.]+ over 272 examples$" "$example.out"
[ -f "$example/out/finetune/final/model.safetensors" ]

# The plugin example, and a copy of it that claims to be built for lmkit 0.0.1.
# A plugin that claims another lmkit: the plugin header alone, compiled directly (no LibTorch headers to parse).
mkdir -p "$work/plugin-old"
${CXX:-c++} -std=c++17 -shared -fPIC -I"$prefix/include" "$src/tests/install/old_plugin/old_plugin.cpp" \
  -o "$work/plugin-old/liblmkit_old.so" >"$work/plugin-old.log" 2>&1 || { cat "$work/plugin-old.log"; exit 1; }
plugin="$(built shuffle_plugin liblmkit_shuffle.so)"
bin="$prefix/bin"
# (The help is captured first: grep -q would end the pipe early, and pipefail report it.)
help="$("$bin/lmkit-pretrain" --plugin "$plugin" --help)"
grep -q "bert: mlm+nsp, mlm, mlm+sbo, shuffle;" <<<"$help" ||
  { echo "FAIL: lmkit-pretrain --help does not list the plugin's objective"; exit 1; }
help="$(LMKIT_PLUGINS="$plugin" "$bin/lmkit-tokenize" inspect --help)"
grep -q "or shuffle" <<<"$help" || { echo "FAIL: lmkit-tokenize inspect --help does not list the plugin's objective"; exit 1; }
expect_error() {  # expect_error PATTERN COMMAND...: exit 2 and one error line matching PATTERN
  local out rc=0
  out="$("${@:2}" 2>&1 >/dev/null)" || rc=$?
  [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s\n' "$out" | grep -qE "$1" ||
    { echo "FAIL: '${*:2}' exited $rc with: $out"; exit 1; }
}
expect_error "^error: .*liblmkit_old.so: built against lmkit 0\.0\.1 and LibTorch .*, but this is lmkit 0\.1\.0" \
  "$bin/lmkit-info" --plugin "$work/plugin-old/liblmkit_old.so"
cp "$plugin" "$work/copy.so"
expect_error "^error: objective 'shuffle' is registered twice: by .*/shuffle_plugin/liblmkit_shuffle.so and by .*/copy.so$" \
  "$bin/lmkit-info" --plugin "$plugin" --plugin "$work/copy.so"
expect_error "^error: unknown objective 'shuffle'|^error: objective 'shuffle' does not apply" \
  "$bin/lmkit-pretrain" --model "$prefix/share/lmkit/models/bert-tiny.json" --train "$src/data/wikitext-2-sample/train.txt" \
  --output "$work/no-plugin" --objective shuffle
# Trains, and resumes exactly: 8 steps straight, and 4 + 4 through --stop-at and --resume.
train=(--plugin "$plugin" --objective shuffle --model "$prefix/share/lmkit/models/bert-tiny.json"
       --train "$src/data/wikitext-2-sample/train.txt" --valid "$src/data/wikitext-2-sample/valid.txt"
       --steps 8 --batch-size 8 --seq-len 64 --vocab-size 1000 --save-every 4 --eval-batches 2 --threads 1)
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${train[@]}" --output "$work/shuffle-full" >"$work/shuffle-full.log" 2>&1 ||
  { tail -20 "$work/shuffle-full.log"; exit 1; }
cut=("${train[@]}" --tokenizer "$work/shuffle-full/tokenizer.model" --output "$work/shuffle-cut")
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${cut[@]}" --stop-at 4 >"$work/shuffle-cut.log" 2>&1 &&
  [ ! -d "$work/shuffle-cut/final" ] || { echo "FAIL: --stop-at 4 did not stop at a checkpoint"; tail -20 "$work/shuffle-cut.log"; exit 1; }
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${cut[@]}" --resume >>"$work/shuffle-cut.log" 2>&1 || { echo "FAIL: the --resume of the shuffle run failed"; tail -20 "$work/shuffle-cut.log"; exit 1; }
cmp "$work/shuffle-full/final/model.safetensors" "$work/shuffle-cut/final/model.safetensors" ||
  { echo "FAIL: the resumed shuffle run's weights differ from the uninterrupted run's"; exit 1; }
grep -q 'BertForTokenClassification' "$work/shuffle-full/final/config.json" ||
  { echo "FAIL: the shuffle run did not train BertForTokenClassification"; exit 1; }
# A token-classifying objective (num_classes 2) reports accuracy, not a perplexity, and inspect shows its classes.
grep -qE "valid loss [0-9.]+, accuracy 0\.[0-9]+" "$work/shuffle-full.log" && ! grep -q "perplexity" "$work/shuffle-full.log" ||
  { echo "FAIL: the shuffle run's summary does not report accuracy alone"; tail -3 "$work/shuffle-full.log"; exit 1; }
python3 -c 'import json, sys; sys.exit(len(json.load(open(sys.argv[1]))["id2label"]) != 2)' "$work/shuffle-full/final/config.json" ||
  { echo "FAIL: the shuffle head does not have 2 labels"; exit 1; }
shown="$("$bin/lmkit-tokenize" inspect --plugin "$plugin" --tokenizer "$work/shuffle-full/tokenizer.model" \
  --corpus "$work"/shuffle-full/cache/train-* --objective shuffle --seq-len 64 --batch-size 2 --batches 1)"
grep -qE "[^ ]/1( |$)" <<<"$shown" && grep -qE "[^ ]/0( |$)" <<<"$shown" && ! grep -q "→" <<<"$shown" ||
  { echo "FAIL: lmkit-tokenize inspect does not show the shuffle classes"; printf '%s\n' "$shown" | tail -3; exit 1; }
echo "plugin: shuffle trained 8 steps; 4 + 4 resumed to byte-identical weights; accuracy and classes shown"
# lmkit-bench (not installed: the build tree's) trains the plugin's objective from its synthetic_batch (it was a bad_function_call).
OMP_NUM_THREADS=1 "$build/bin/lmkit-bench" --plugin "$plugin" train --objective shuffle --model "$prefix/share/lmkit/models/bert-tiny.json" \
  --batch-size 2 --seq-len 32 --vocab-size 1000 --steps 1 --warmup 0 --threads 1 >"$work/shuffle-bench.log" 2>&1 &&
  grep -q "objective shuffle" "$work/shuffle-bench.log" || { echo "FAIL: lmkit-bench --objective shuffle"; tail -5 "$work/shuffle-bench.log"; exit 1; }
echo "plugin: lmkit-bench trains the shuffle objective"

# A plugin's family: its checkpoint records the plugin, and says which --plugin to pass without it.
toy="$(built toy_family liblmkit_toy.so)"
echo '{"model_type": "toy", "hidden_size": 8}' >"$work/toy.json"
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" --plugin "$toy" --model "$work/toy.json" --tokenizer "$work/shuffle-full/tokenizer.model" \
  --train "$src/data/wikitext-2-sample/valid.txt" --steps 2 --batch-size 4 --seq-len 32 --threads 1 --output "$work/toy-run" \
  >"$work/toy-run.log" 2>&1 || { tail -20 "$work/toy-run.log"; exit 1; }
grep -q "\"plugin\": \"$toy\"" "$work/toy-run/final/lmkit_plugin.json" ||
  { echo "FAIL: the toy checkpoint does not record its plugin"; cat "$work/toy-run/final/lmkit_plugin.json"; exit 1; }
expect_error "^error: .*/toy-run/final/config.json: model_type 'toy' comes from a plugin: pass --plugin .*/liblmkit_toy.so$" \
  "$bin/lmkit-info" "$work/toy-run/final"
"$bin/lmkit-info" --plugin "$toy" "$work/toy-run/final" >/dev/null || { echo "FAIL: lmkit-info --plugin toy"; exit 1; }
echo "plugin: a toy family's checkpoint names its plugin"

# The metric example: lmkit-evaluate --plugin runs it on a finetuned classifier, its ECE equals one computed
# from the classification metric's own predictions, another metric's flag is refused, and lmkit-suite runs it.
cal_plugin="$(built calibration_plugin liblmkit_calibration.so)"
classifier=(--init random --model "$prefix/share/lmkit/models/bert-tiny.json" --tokenizer "$work/shuffle-full/tokenizer.model"
            --train "$data/train.tsv" --dev "$data/dev.tsv" --epochs 1 --batch-size 16 --max-length 32 --threads 1)
OMP_NUM_THREADS=1 "$bin/lmkit-finetune" "${classifier[@]}" --output "$work/sst" >"$work/sst.log" 2>&1 || { tail -20 "$work/sst.log"; exit 1; }
"$bin/lmkit-evaluate" --checkpoint "$work/sst/best" --data "$data/dev.tsv" --metric classification --threads 1 \
  --predictions "$work/sst-predictions.tsv" --output "$work/sst-classification.json" >/dev/null
"$bin/lmkit-evaluate" --plugin "$cal_plugin" --checkpoint "$work/sst/best" --data "$data/dev.tsv" --metric calibration --bins 10 \
  --threads 1 --output "$work/sst-calibration.json" >/dev/null
python3 - "$work/sst-predictions.tsv" "$work/sst-calibration.json" <<'PY' || { echo "FAIL: the calibration plugin's ECE"; exit 1; }
import json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
bins = [[0, 0.0, 0] for _ in range(10)]
for _, label, predicted, probs in rows:
    c = max(float(p) for p in probs.split(","))
    b = bins[min(9, int(c * 10))]
    b[0] += 1; b[1] += c; b[2] += label == predicted
ece = sum(n / len(rows) * abs(right / n - conf / n) for n, conf, right in bins if n)
got = json.load(open(sys.argv[2]))
assert got["examples"] == len(rows) == 272 and abs(got["ece"] - ece) < 1e-4, (got["ece"], ece)
PY
expect_error "^error: --bins applies to --metric calibration, not classification$" "$bin/lmkit-evaluate" --plugin "$cal_plugin" \
  --checkpoint "$work/sst/best" --data "$data/dev.tsv" --metric classification --bins 3 --output "$work/x.json"
help="$("$bin/lmkit-evaluate" --plugin "$cal_plugin" --help)"
grep -q "calibration: expected" <<<"$help" || { echo "FAIL: --help lacks the plugin's metric"; exit 1; }
cat >"$work/cal-suite.json" <<JSON
{"name": "cal", "defaults": {"epochs": 1, "batch_size": 16, "max_length": 32, "seeds": [1]},
 "tasks": [{"name": "sst", "type": "classification", "train": "$data/train.tsv", "dev": "$data/dev.tsv",
            "evaluate": "calibration", "metrics": ["accuracy", "calibration.ece"]}]}
JSON
OMP_NUM_THREADS=1 "$bin/lmkit-suite" --plugin "$cal_plugin" --suite "$work/cal-suite.json" --init random \
  --model "$prefix/share/lmkit/models/bert-tiny.json" --tokenizer "$work/shuffle-full/tokenizer.model" --threads 1 \
  --output "$work/cal-suite" >"$work/cal-suite.log" 2>&1 || { tail -20 "$work/cal-suite.log"; exit 1; }
grep -q "| sst acc/calibration.ece |" "$work/cal-suite/results.md" && [ -f "$work/cal-suite/sst/seed-1/calibration.json" ] ||
  { echo "FAIL: lmkit-suite did not run the plugin's metric"; cat "$work/cal-suite/results.md"; exit 1; }
echo "plugin: the calibration metric's ECE equals the predictions', and lmkit-suite runs it"

# The optimizer example: lmkit-pretrain --plugin trains with --optimizer lion; the first step moves every weight
# that has a gradient by exactly the learning rate (Lion's sign update: one step at lr 1e-3 and one at 2e-3 from the
# same start differ by exactly 1e-3 wherever a weight moved, read back from the safetensors here),
# a stop and --resume end on the same weights, lmkit-info --registered names the plugin, another's flag is refused.
lion_plugin="$(built lion_plugin liblmkit_lion.so)"
lion_args=(--plugin "$lion_plugin" --optimizer lion --model "$prefix/share/lmkit/models/bert-tiny.json" --objective mlm
           --tokenizer "$work/shuffle-full/tokenizer.model" --train "$src/data/wikitext-2-sample/valid.txt" --batch-size 4
           --seq-len 32 --threads 1 --schedule constant --warmup 0 --weight-decay 0 --seed 3)
for lr in 1 2; do
  OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${lion_args[@]}" --lr "${lr}e-3" --steps 1 --output "$work/lion-$lr" \
    >"$work/lion-$lr.log" 2>&1 || { tail -20 "$work/lion-$lr.log"; exit 1; }
done
python3 - "$work/lion-1" "$work/lion-2" <<'PY' || { echo "FAIL: Lion's first step is not lr times a sign"; exit 1; }
import json, struct, sys, array
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    for name, t in head.items():
        if name != "__metadata__" and t["dtype"] == "F32":
            a = array.array("f"); a.frombytes(raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]])
            yield name, a
before = dict(tensors(sys.argv[1] + "/final/model.safetensors"))
moved = same = 0
for name, after in tensors(sys.argv[2] + "/final/model.safetensors"):
    for x, y in zip(before[name], after):
        d = abs(y - x)
        assert d == 0 or abs(d - 1e-3) <= 1e-6 * max(1.0, abs(x)) + 1e-9, (name, x, y)
        moved += d != 0; same += d == 0
assert moved > 0.5 * (moved + same), (moved, same)
print(f"lion: {moved} weights moved by the learning rate, {same} without a gradient stayed")
PY
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${lion_args[@]}" --lr 1e-3 --steps 4 --output "$work/lion-once" >/dev/null 2>&1
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${lion_args[@]}" --lr 1e-3 --steps 4 --stop-at 2 --output "$work/lion-twice" >/dev/null 2>&1
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${lion_args[@]}" --lr 1e-3 --steps 4 --resume --output "$work/lion-twice" >/dev/null 2>&1
cmp -s "$work/lion-once/final/model.safetensors" "$work/lion-twice/final/model.safetensors" ||
  { echo "FAIL: a Lion run stopped and resumed differs from an uninterrupted one"; exit 1; }
# (grep reads the whole listing: grep -q in a pipe under pipefail stops reading at its match, and
# lmkit-info's next write then dies of SIGPIPE, failing the pipe once the listing passes 4 KiB)
grep -q "^  lion .*\[$lion_plugin\]$" <<<"$("$bin/lmkit-info" --plugin "$lion_plugin" --registered)" ||
  { echo "FAIL: lmkit-info --registered does not list the plugin's optimizer"; exit 1; }
expect_error "^error: --lion-beta2 applies to --optimizer lion, not adamw$" "$bin/lmkit-pretrain" --plugin "$lion_plugin" \
  --model "$prefix/share/lmkit/models/bert-tiny.json" --train "$src/data/wikitext-2-sample/valid.txt" --lion-beta2 0.9 \
  --output "$work/lion-bad"
echo "plugin: the Lion optimizer trains by sign steps of the learning rate and resumes bitwise"

# The attention example: Performer's FAVOR+ as a plugin. Its numbers against a reference of the paper's equations
# with the same random features (tests/interop/performer_reference.py, where the Python has torch), then the apps:
# a BERT that names it pretrains, resumes bitwise, is evaluated, and lmkit-info lists it; a decoder is refused.
performer_plugin="$(built performer_plugin liblmkit_performer.so)"
py="${LMKIT_PYTHON:-python3}"
if "$py" -c "import torch, safetensors" 2>/dev/null; then
  "$py" "$src/tests/interop/performer_reference.py" "$performer_plugin" --bin "$bin" --work "$work/performer-reference" ||
    { echo "FAIL: the Performer plugin differs from FAVOR+'s equations"; exit 1; }
fi
sed 's/"num_attention_heads": \([0-9]*\),/"num_attention_heads": \1, "attention": "performer", "performer_features": 32,/' \
  "$prefix/share/lmkit/models/bert-tiny.json" >"$work/performer-bert.json"
grep -q '"performer"' "$work/performer-bert.json" || { echo "FAIL: could not write a Performer config"; exit 1; }
performer_args=(--plugin "$performer_plugin" --model "$work/performer-bert.json" --objective mlm --threads 1 --seq-len 32
                --tokenizer "$work/shuffle-full/tokenizer.model" --train "$src/data/wikitext-2-sample/valid.txt" --batch-size 4)
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${performer_args[@]}" --steps 4 --output "$work/performer-once" >/dev/null 2>&1 ||
  { echo "FAIL: lmkit-pretrain did not train a Performer BERT"; exit 1; }
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${performer_args[@]}" --steps 4 --stop-at 2 --output "$work/performer-twice" >/dev/null 2>&1
OMP_NUM_THREADS=1 "$bin/lmkit-pretrain" "${performer_args[@]}" --steps 4 --resume --output "$work/performer-twice" >/dev/null 2>&1
cmp -s "$work/performer-once/final/model.safetensors" "$work/performer-twice/final/model.safetensors" ||
  { echo "FAIL: a Performer run stopped and resumed differs from an uninterrupted one"; exit 1; }
OMP_NUM_THREADS=1 "$bin/lmkit-evaluate" --plugin "$performer_plugin" --checkpoint "$work/performer-once/final" \
  --data "$src/data/wikitext-2-sample/valid.txt" --metric mlm-perplexity --seq-len 32 --threads 1 >"$work/performer-eval.log" 2>&1 ||
  { tail -5 "$work/performer-eval.log"; echo "FAIL: lmkit-evaluate did not score the Performer BERT"; exit 1; }
grep -q "^  performer .*\[$performer_plugin\]$" <<<"$("$bin/lmkit-info" --plugin "$performer_plugin" --registered)" ||
  { echo "FAIL: lmkit-info --registered does not list the plugin's attention"; exit 1; }
echo '{"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 4, "attention": "performer"}' >"$work/performer-gpt.json"
expect_error "cannot be a decoder's causal self-attention" "$bin/lmkit-info" --plugin "$performer_plugin" "$work/performer-gpt.json"
echo "plugin: the Performer attention equals its equations, trains, resumes bitwise and is evaluated"

# add_subdirectory: lmkit's targets name no CMAKE_SOURCE_DIR, so it configures inside another project.
parent="$work/parent" && mkdir -p "$parent"
cat >"$parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.19)
project(parent LANGUAGES CXX)
add_subdirectory("$src" lmkit)
add_executable(user user.cpp)
target_link_libraries(user PRIVATE lmkit::lmkit)
CMAKE
echo 'int main() { return 0; }' >"$parent/user.cpp"
torch_prefix="$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")"
cmake -S "$parent" -B "$parent/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$torch_prefix" >"$parent.log" 2>&1 ||
  { tail -30 "$parent.log"; exit 1; }
if grep -q "lmkit_tests" "$parent/build/build.ninja" 2>/dev/null; then echo "FAIL: a subproject builds lmkit's tests"; exit 1; fi
echo "install: ok (prefix $prefix, example and plugin built and run, add_subdirectory configures)"
