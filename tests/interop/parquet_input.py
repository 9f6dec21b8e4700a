#!/usr/bin/env python3
"""Parquet shards as they are shipped, written by the reference writer (pyarrow), encode to the
same token corpus as the same texts as plain JSONL, byte for byte (CTest "parquet: ..."):
several row groups, snappy / zstd / gzip / uncompressed pages, dictionary-encoded, large_string
and null texts, nested columns (a struct, a list) before the texts, another column name (--text-field), a directory of shards — and train the same
tokenizer as that JSONL (lmkit-tokenize train); and what is wrong is
one error naming it: a column that holds no text (its type), a missing column (the columns there
are), a truncated file, a damaged page header (its row group). Damage inside a page's values is
not detectable where the writer stored no page checksum (Parquet's default)."""
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from checks import arguments, check, status


def main():
    a = arguments()
    w = lambda *names: os.path.join(a.work, *names)
    tokenize = os.path.join(a.bin, "lmkit-tokenize")

    def encode(inputs, out, *extra):
        return subprocess.run([tokenize, "encode", "--tokenizer", w("tok"), "--output", w(out), "--threads", "1",
                               "--input", *inputs, *extra], capture_output=True, text=True)

    def corpus(out):
        with open(w(out, "tokens.bin"), "rb") as f:
            return f.read()

    # The sample's paragraphs, one document each (a few with paragraphs of their own inside).
    sample = os.path.join(a.source, "data", "wikitext-2-sample", "train.txt")
    lines = [l.strip() for l in open(sample, encoding="utf-8") if l.strip() and not l.strip().startswith("=")]
    texts = [lines[i] + ("\n" + lines[i + 1] if i % 7 == 0 and i + 1 < len(lines) else "") for i in range(len(lines))]
    with open(w("plain.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    r = subprocess.run([tokenize, "train", "--input", os.path.join(a.source, "data", "wikitext-2-sample", "valid.txt"),
                        "--output", w("tok"), "--vocab-size", "1000", "--family", "bert"], capture_output=True, text=True)
    check(r.returncode == 0, f"a 1,000-piece tokenizer ({r.stderr[-300:]})")
    r = encode([w("plain.jsonl")], "plain")
    check(r.returncode == 0, f"{len(texts)} texts as plain JSONL encode ({r.stderr[-300:]})")
    reference = corpus("plain")

    ids = pa.array(range(len(texts)), pa.int64())
    cases = {
        "snappy, row groups of 100": (pa.table({"id": ids, "text": pa.array(texts, pa.string())}),
                                      dict(compression="snappy", row_group_size=100)),
        "zstd, dictionary-encoded": (pa.table({"text": pa.array(texts, pa.string()).dictionary_encode(), "id": ids}),
                                     dict(compression="zstd", row_group_size=333)),
        "gzip, large_string": (pa.table({"text": pa.array(texts, pa.large_string())}), dict(compression="gzip")),
        "uncompressed, no dictionary": (pa.table({"text": pa.array(texts, pa.string())}),
                                        dict(compression="none", use_dictionary=False, row_group_size=50)),
        # Nested columns before the texts: a row group is read by leaf column, and the text column's
        # leaf comes after the struct's two and the list's one (its second string was read as the texts).
        "nested columns first, snappy": (pa.table({"meta": [{"source": "wiki", "url": f"u{i}"} for i in range(len(texts))],
                                                   "tags": [["a", "b"]] * len(texts), "text": pa.array(texts, pa.string())}),
                                         dict(compression="snappy", row_group_size=200)),
    }
    for name, (table, options) in cases.items():
        path = w(name.split(",")[0] + ".parquet")
        pq.write_table(table, path, **options)
        groups = pq.ParquetFile(path).metadata.num_row_groups
        r = encode([path], name.split(",")[0])
        check(r.returncode == 0 and corpus(name.split(",")[0]) == reference,
              f"parquet {name} ({groups} row groups): the corpus of the plain JSONL, byte for byte {r.stderr[-300:]}")
    # Null texts are no documents; another column name through --text-field.
    with_nulls = [None if i % 5 == 2 else t for i, t in enumerate(texts)]
    pq.write_table(pa.table({"content": pa.array(with_nulls, pa.string())}), w("nulls.parquet"), row_group_size=64)
    with open(w("kept.jsonl"), "w", encoding="utf-8") as f:
        for t in with_nulls:
            if t is not None:
                f.write(json.dumps({"text": t}) + "\n")
    encode([w("kept.jsonl")], "kept")
    r = encode([w("nulls.parquet")], "nulls", "--text-field", "content")
    check(r.returncode == 0 and corpus("nulls") == corpus("kept"),
          f"null texts skipped, column 'content' by --text-field ({sum(t is None for t in with_nulls)} nulls)")
    # A directory of shards is the corpus of the whole, in name order.
    os.makedirs(w("shards"))
    half = len(texts) // 2
    pq.write_table(pa.table({"text": texts[:half]}), w("shards", "train-00000-of-00002.parquet"), compression="snappy")
    pq.write_table(pa.table({"text": texts[half:]}), w("shards", "train-00001-of-00002.parquet"), compression="zstd")
    r = encode([w("shards")], "sharded")
    check(r.returncode == 0 and corpus("sharded") == reference, "a directory of two Parquet shards: the whole corpus")

    # A tokenizer learns the texts, whatever they ship in: the Parquet shards' tokenizer is the plain
    # JSONL's, and neither learned the JSON around the texts (SentencePiece's trainer, reading a
    # JSONL file itself, made pieces of '{"text": ').
    def train(inputs, out, *extra):
        r = subprocess.run([tokenize, "train", "--family", "bert", "--vocab-size", "600", "--threads", "1",
                            "--output", w(out), "--input", *inputs, *extra], capture_output=True, text=True)
        return r, (open(w(out, "tokenizer.json"), encoding="utf-8").read() if r.returncode == 0 else "")

    r, from_jsonl = train([w("plain.jsonl")], "tok-jsonl")
    vocab = json.loads(from_jsonl)["model"]["vocab"] if from_jsonl else []
    check(r.returncode == 0 and vocab and not any("{" in piece or "text\"" in piece for piece, _ in vocab),
          f"a tokenizer trained on JSONL learns its texts, no piece of the JSON around them {r.stderr[-300:]}")
    r, from_shards = train([w("shards")], "tok-shards")
    check(r.returncode == 0 and from_shards == from_jsonl,
          f"a tokenizer trained on the directory of Parquet shards equals the JSONL's {r.stderr[-300:]}")
    r, from_nulls = train([w("nulls.parquet")], "tok-nulls", "--text-field", "content")
    _, from_kept = train([w("kept.jsonl")], "tok-kept")
    check(r.returncode == 0 and from_nulls == from_kept, f"null texts are no training text {r.stderr[-300:]}")
    r, _ = train([w("snappy.parquet")], "tok-refused", "--text-field", "id")
    check(r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error:") and "holds int64" in r.stderr
          and not os.path.exists(w("tok-refused")), f"a column of numbers is refused, nothing written: {r.stderr[-300:]!r}")

    def refused(path, want, *extra):
        r = encode([path], "refused", *extra)
        lines = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        one = r.stderr.strip().splitlines()[-1:] == lines  # the error is the last line, and one line
        check(r.returncode == 2 and len(lines) == 1 and one and all(s in lines[0] for s in want),
              f"refused with one error line, exit 2: {lines[0] if lines else r.stderr[-300:]!r}")

    pq.write_table(pa.table({"text": pa.array(range(10), pa.int64())}), w("ints.parquet"))
    refused(w("ints.parquet"), ["ints.parquet", "column 'text' holds int64, not text"])
    refused(w("snappy.parquet"), ["--format lines: every input is Parquet"], "--format", "lines")
    twice = pa.schema([("text", pa.string()), ("text", pa.string())])
    pq.write_table(pa.Table.from_arrays([pa.array(["a ."]), pa.array(["b ."])], schema=twice), w("twice.parquet"))
    refused(w("twice.parquet"), ["twice.parquet", "2 columns are named 'text'"])
    # A subdirectory (FineWeb's data/CC-MAIN-*/) is refused by name, never skipped into a shorter corpus.
    os.makedirs(w("nested", "CC-MAIN-2024-10"))
    pq.write_table(pa.table({"text": texts[:half]}), w("nested", "000_00000.parquet"))
    pq.write_table(pa.table({"text": texts[half:]}), w("nested", "CC-MAIN-2024-10", "000_00000.parquet"))
    refused(w("nested"), ["CC-MAIN-2024-10", "a directory inside the input directory"])
    refused(w("snappy.parquet"), ["snappy.parquet", "no column 'body'", "id, text"], "--text-field", "body")
    data = open(w("snappy.parquet"), "rb").read()
    with open(w("truncated.parquet"), "wb") as f:
        f.write(data[: len(data) // 2])
    refused(w("truncated.parquet"), ["truncated.parquet", "not a readable Parquet file"])
    # Damage in the second row group's page header: the reader cannot parse it, and names the row group.
    column = pq.ParquetFile(w("snappy.parquet")).metadata.row_group(1).column(1)
    damaged = bytearray(data)
    for i in range(column.data_page_offset, column.data_page_offset + 8):
        damaged[i] ^= 0x5A
    with open(w("header.parquet"), "wb") as f:
        f.write(bytes(damaged))
    refused(w("header.parquet"), ["header.parquet", "row group 1 of 16", "damaged"])
    sys.exit(status())


if __name__ == "__main__":
    main()
