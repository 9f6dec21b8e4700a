#!/usr/bin/env bash
# Every experiment and benchmark script refuses what it does not take before doing anything:
# one `error:` line naming the script and the argument, exit 2, nothing written.
#   tests/scripts/script_args_test.sh SOURCE_DIR
set -uo pipefail
source=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
touch a-file
failures=0
check() {  # check SCRIPT EXPECTED ARGS...
  local script=$1 expected=$2
  shift 2
  local before out rc
  before=$(ls -A "$source" | sort)
  out=$(bash "$source/$script" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || [ "$(printf '%s\n' "$out" | grep -c '^error: ')" -ne 1 ] || [[ "$out" != *"$expected"* ]]; then
    echo "FAIL $script $*: exit $rc, output:"
    printf '%s\n' "$out" | head -5
    failures=$((failures + 1))
  fi
  if [ "$(ls -A "$source" | sort)" != "$before" ]; then
    echo "FAIL $script $*: wrote into the checkout"
    failures=$((failures + 1))
  fi
}
for script in bench/bf16_loss_curve.sh bench/compare_generate.sh bench/compare_hf.sh bench/distributed.sh bench/document_mask_results.sh \
              bench/encode_throughput.sh bench/levers.sh bench/optimizer_results.sh bench/run_benchmarks.sh \
              scripts/vit_fashion_results.sh; do
  check "$script" "unknown option '--bogus'" --bogus
  check "$script" "one argument at most" runs/x runs/y
  check "$script" "is a file, not an output folder" "$work/a-file"
done
EPOCHS=0 check scripts/vit_fashion_results.sh "EPOCHS: '0' is not a positive whole number" "$work/out"
FASHION="$work/none" check scripts/vit_fashion_results.sh "no such file (FASHION names Fashion-MNIST's folder" "$work/out"
check scripts/gpu_verify.sh "takes no arguments" --bogus
SHAPES="gpt-mini-8000 nope" check bench/compare_generate.sh "unknown shape 'nope'" "$work/out"
check bench/load_checkpoint.sh "takes no arguments" --bogus
PRESETS="gpt2-small nope" check bench/load_checkpoint.sh "PRESETS: no models/nope.json"
ROUNDS=0 check bench/load_checkpoint.sh "ROUNDS '0': expected a positive integer"
check bench/fresh_clone.sh "expected 'test' or 'demo', got '--bogus'" --bogus
check bench/fresh_clone.sh "expected 'test' or 'demo', got ''"
check bench/fresh_clone.sh "one argument (test or demo), got 2" test demo
check scripts/compare_runs.sh "expected BIN_BEFORE BIN_AFTER [WORK], got 1" only-one
check scripts/compare_runs.sh "holds no lmkit-pretrain" "$work" "$work"
python3 "$source/scripts/make_squad.py" --output "$work/a-file" > "$work/out" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "^error: --output $work/a-file is a file" "$work/out"; then
  echo "FAIL scripts/make_squad.py --output FILE: exit $rc"
  failures=$((failures + 1))
fi
# split_idx.py: a file that is not IDX, a --dev that leaves nothing, a split already there.
python3 - "$work" <<'PY'
import gzip, struct, sys
w = sys.argv[1]
with open(f"{w}/s-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 4, 2, 2) + bytes(16))
with open(f"{w}/s-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">II", 0x801, 4) + bytes([0, 1, 0, 1]))
with open(f"{w}/bad-images-idx3-ubyte", "w") as f:
    f.write("not IDX")
PY
split_case() {  # split_case EXPECTED ARGS...
  local expected=$1 out rc
  shift
  out=$(python3 "$source/scripts/split_idx.py" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 2 ] || [ "$(printf '%s\n' "$out" | grep -c '^error: ')" -ne 1 ] || [[ "$out" != *"$expected"* ]]; then
    echo "FAIL scripts/split_idx.py $*: exit $rc, output:"
    printf '%s\n' "$out" | head -5
    failures=$((failures + 1))
  fi
}
split_case "not an IDX file of 3 dimension(s)" --images "$work/bad-images-idx3-ubyte" --dev 1 --output "$work/sp"
split_case "not named as MNIST's images" --images "$work/s-labels-idx1-ubyte" --dev 1 --output "$work/sp"
split_case "--dev 4: must leave images on both sides" --images "$work/s-images-idx3-ubyte" --dev 4 --output "$work/sp"
python3 "$source/scripts/split_idx.py" --images "$work/s-images-idx3-ubyte" --dev 1 --output "$work/sp" >/dev/null ||
  { echo "FAIL scripts/split_idx.py: a good split failed"; failures=$((failures + 1)); }
split_case "exists (give --overwrite" --images "$work/s-images-idx3-ubyte" --dev 1 --output "$work/sp"
out=$(python3 "$source/scripts/ctest_profile.py" "$work/no-build" 2>&1)
rc=$?
if [ $rc -ne 2 ] || [[ "$out" != "error: $work/no-build/Testing/Temporary/LastTest.log: no such file"* ]]; then
  echo "FAIL scripts/ctest_profile.py NO_BUILD: exit $rc: $out"
  failures=$((failures + 1))
fi
echo "script arguments: $failures failure(s)"
[ $failures -eq 0 ]
