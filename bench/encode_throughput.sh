#!/usr/bin/env bash
# Corpora as shipped into token ids: lmkit-tokenize encode against HF datasets + tokenizers doing
# the same in the same run (docs/benchmarks.md, "Encoding shipped corpora"), on SIZE_MB of
# gzip-compressed JSONL and of Parquet (snappy, row groups of 10,000 rows) made from the bundled
# sample's paragraphs, one tokenizer for both (lmkit-tokenize train's, which HF loads as its
# tokenizer.json). Prints seconds, MB/s of uncompressed text, peak memory and the ratio.
#   bash bench/encode_throughput.sh [OUT_DIR]   (default runs/encode-throughput; SIZE_MB=1024 THREADS=2)
set -euo pipefail
command -v /usr/bin/time > /dev/null || { echo "error: /usr/bin/time is missing (apt-get install time): it measures peak memory" >&2; exit 1; }
cd "$(dirname "$0")/.."
. scripts/script_args.sh
out=$(output_folder_arg runs/encode-throughput "$@") || exit 2
size_mb=${SIZE_MB:-1024} threads=${THREADS:-2}
python=${PYTHON:-.venv/bin/python}
for v in "SIZE_MB=$size_mb" "THREADS=$threads"; do
  [[ "${v#*=}" =~ ^[1-9][0-9]*$ ]] || { echo "error: ${v%%=*}: '${v#*=}' is not a positive whole number" >&2; exit 2; }
done
[ -x "$python" ] || { echo "error: PYTHON: $python is not an executable Python (bash scripts/setup.sh makes .venv)" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
build/bin/lmkit-tokenize train --input data/wikitext-2-sample/valid.txt --family gpt2 --vocab-size 8000 \
  --output "$out/tok" > "$out/tok.log" 2>&1
"$python" - "$out" "$size_mb" <<'PY'
import gzip, json, sys
import pyarrow as pa, pyarrow.parquet as pq
out, size = sys.argv[1], int(sys.argv[2]) << 20
paragraphs = [l.strip() for l in open("data/wikitext-2-sample/train.txt", encoding="utf-8") if len(l.strip()) > 40]
texts, total = [], 0
while total < size:  # the sample's paragraphs, numbered so that no two documents are equal
    for p in paragraphs:
        texts.append(f"{len(texts)} {p}")
        total += len(texts[-1].encode())
        if total >= size:
            break
with gzip.open(f"{out}/corpus.jsonl.gz", "wt", encoding="utf-8", compresslevel=6) as f:
    for t in texts:
        f.write(json.dumps({"text": t}) + "\n")
pq.write_table(pa.table({"text": texts}), f"{out}/corpus.parquet", compression="snappy", row_group_size=10000)
print(f"{len(texts)} documents, {total / 1e6:.1f} MB of text", file=sys.stderr)
PY
measure() {  # name, then the command: wall seconds and peak RSS (MiB) into $out/name.time
  local name=$1
  shift
  /usr/bin/time -f "%e %M" -o "$out/$name.time" "$@" > "$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; exit 1; }
}
for format in jsonl.gz parquet; do
  measure "lmkit-$format" build/bin/lmkit-tokenize encode --tokenizer "$out/tok" --input "$out/corpus.$format" \
    --output "$out/lmkit-$format" --threads "$threads"
  measure "hf-$format" "$python" - "$out" "$format" "$threads" <<'PY'
import sys, os
out, fmt, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.environ["HF_DATASETS_CACHE"] = f"{out}/hf-cache-{fmt}"
import datasets
from transformers import PreTrainedTokenizerFast
datasets.disable_progress_bars()
tok = PreTrainedTokenizerFast(tokenizer_file=f"{out}/tok/tokenizer.json")
ds = datasets.load_dataset("json" if fmt == "jsonl.gz" else "parquet", data_files=f"{out}/corpus.{fmt}", split="train",
                           cache_dir=f"{out}/hf-cache-{fmt}")
ids = ds.map(lambda b: tok(b["text"], add_special_tokens=False), batched=True, num_proc=threads,
             remove_columns=["text"])
print(sum(len(x) for x in ids["input_ids"]), "tokens")
PY
done
"$python" - "$out" "$size_mb" <<'PY' | tee "$out/summary.txt"
import sys
import gzip
out = sys.argv[1]
mb = sum(len(l) for l in gzip.open(f"{out}/corpus.jsonl.gz", "rb")) / 1e6  # the JSONL's bytes, uncompressed
for fmt in ("jsonl.gz", "parquet"):
    row = {}
    for who in ("lmkit", "hf"):
        secs, kib = open(f"{out}/{who}-{fmt}.time").read().split()
        row[who] = (float(secs), int(kib) / 1024)
    (ls, lm), (hs, hm) = row["lmkit"], row["hf"]
    print(f"{fmt:<9} lmkit {ls:7.1f} s {mb / ls:6.2f} MB/s peak {lm:6.0f} MiB | HF datasets+tokenizers {hs:7.1f} s "
          f"{mb / hs:6.2f} MB/s peak {hm:6.0f} MiB | lmkit {hs / ls:.2f}x")
PY
