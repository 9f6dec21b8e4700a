#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses (tests/fuzz/*_fuzz.cpp), made from the
test fixtures: real HF files where HF makes them, lmkit's formats where lmkit does.

    make_seeds.py tests/fuzz/seeds     remakes the committed seed corpus, OUT/<target>/<seed>

The seeds are committed (tests/fuzz/seeds), not made per run: HF's tokenizer
trainers break ties in an order of their own, so two runs of this script write
different tokenizer seeds, and CI's fuzz step must start from the same files every
time (docs/testing.md). Run it after a fixture changes, and commit what it writes.
Needs the project venv (tokenizers, safetensors, pyarrow for zstd frames).
"""
import gzip
import json
import shutil
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SEP = b"\n--8<--\n"  # fuzz_util.h's split_parts separator


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def lines_of(name: str, n: int) -> list:
    return (FIXTURES / "text" / name).read_text(encoding="utf-8").splitlines()[:n]


def safetensors_seeds(out: Path) -> None:
    from safetensors.numpy import save
    import numpy as np

    for d in sorted((FIXTURES / "hf").iterdir()):
        if (d / "inputs.safetensors").exists():
            shutil.copy(d / "inputs.safetensors", out / f"{d.name}-inputs.safetensors")
    kinds = {"f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32, "u8": np.uint8, "bool": np.bool_}
    tensors = {k: np.arange(6).reshape(2, 3).astype(t) for k, t in kinds.items()}
    tensors["empty"] = np.zeros((0, 4), dtype=np.float32)
    write(out / "dtypes.safetensors", save(tensors, metadata={"format": "pt"}))


def json_config_seeds(out: Path) -> None:
    small = {"vocab_size": 64, "hidden_size": 16, "n_embd": 16, "d_model": 16, "intermediate_size": 32, "n_inner": 32,
             "d_ff": 32, "d_kv": 4, "num_hidden_layers": 1, "n_layer": 1, "num_layers": 1, "num_decoder_layers": 1,
             "max_position_embeddings": 32, "n_positions": 32, "num_attention_heads": 4, "n_head": 4, "num_heads": 4,
             "src_vocab_size": 64, "tgt_vocab_size": 64, "relative_attention_num_buckets": 8, "max_len": 32,
             "encoder_layers": 1, "decoder_layers": 1}
    configs = sorted((ROOT / "models").glob("*.json")) + sorted((FIXTURES / "hf").glob("*/config*.json"))
    for path in configs:
        shutil.copy(path, out / f"{path.parent.name}-{path.name}")
        config = json.loads(path.read_text())
        if isinstance(config, dict) and "model_type" in config:
            shrunk = {k: (small[k] if k in small and isinstance(v, int) else v) for k, v in config.items()}
            write(out / f"small-{path.parent.name}-{path.name}", json.dumps(shrunk, indent=2).encode())


def corpus_seeds(out: Path) -> None:
    # Three documents of word ids, as lmkit-tokenize encode writes them.
    words = " ".join(lines_of("wiki.valid.raw", 40)).split()
    vocab = {w: i for i, w in enumerate(sorted(set(words)))}
    docs = [words[:30], words[30:45], words[45:90]]
    tokens, sentence_starts, doc_starts = [], [0], [0]
    for doc in docs:
        for start in range(0, len(doc), 10):
            tokens += [vocab[w] for w in doc[start:start + 10]]
            sentence_starts.append(len(tokens))
        doc_starts.append(len(sentence_starts) - 1)
    for dtype, fmt in (("uint16", "H"), ("uint32", "I")):
        header = {"format": "lmkit-corpus-1", "dtype": dtype, "vocab_size": len(vocab), "tokenizer_checksum": 12345,
                  "tokenizer_family": "bert", "tokens": len(tokens), "sentences": len(sentence_starts) - 1,
                  "documents": len(docs), "sources": ["wiki.valid.raw"]}
        parts = [json.dumps(header, indent=2).encode(), struct.pack(f"<{len(tokens)}{fmt}", *tokens),
                 struct.pack(f"<{len(sentence_starts)}Q", *sentence_starts),
                 struct.pack(f"<{len(doc_starts)}Q", *doc_starts)]
        write(out / f"corpus-{dtype}", SEP.join(parts))


def tasks_seeds(out: Path) -> None:
    rows = [line.split("\t") for line in lines_of("sst2.dev.tsv", 12)]
    tsv = "\n".join("\t".join(r) for r in rows) + "\n"
    csv = "sentence,sentence2,label\n" + "".join(f"\"{r[0].strip()}\",\"a \"\"quoted\"\" pair\",{r[1]}\n" for r in rows[1:])
    jsonl = "".join(json.dumps({"sentence": r[0], "label": r[1]}) + "\n" for r in rows[1:])
    text = lines_of("wiki.valid.raw", 30)
    docs_jsonl = "".join(json.dumps({"text": t}) + "\n" for t in text if t.strip())
    noheader = "".join(f"{r[1]}\t{r[0]}\n" for r in rows[1:])
    for kind, body in enumerate([tsv, csv, jsonl, docs_jsonl, "\n".join(text) + "\n", noheader]):
        write(out / f"kind{kind}", bytes([kind]) + body.encode())
    write(out / "kind0-bom-crlf", bytes([0]) + b"\xef\xbb\xbf" + tsv.replace("\n", "\r\n").encode())
    # Documents as corpora are shipped (data/text_input.h reads them by their first bytes):
    # gzip in two members, a truncated gzip stream, zstd in two frames.
    import pyarrow

    halves = docs_jsonl[:len(docs_jsonl) // 2].encode(), docs_jsonl[len(docs_jsonl) // 2:].encode()
    gz = gzip.compress(halves[0], mtime=0) + gzip.compress(halves[1], mtime=0)
    write(out / "kind3-gzip", bytes([3]) + gz)
    write(out / "kind4-gzip-truncated", bytes([4]) + gzip.compress(("\n".join(text) + "\n").encode(), mtime=0)[:-40])
    zst = b"".join(pyarrow.compress(h, codec="zstd", asbytes=True) for h in halves)
    write(out / "kind3-zstd", bytes([3]) + zst)


def squad_seeds(out: Path) -> None:
    """SQuAD JSON: the v2.0 fixture's first questions, a v1.1 set with several answers, an
    unanswerable question, non-ASCII context (answer_start counts characters), and a bad offset."""
    fixture = json.loads((FIXTURES / "squad" / "dev.json").read_text(encoding="utf-8"))
    first = {"version": "v2.0", "data": fixture["data"][:2]}
    write(out / "fixture-v2", json.dumps(first, ensure_ascii=False).encode())
    context = "Zürich's café — opened in 1984 — is near the lake ."
    qas = [{"id": "a", "question": "when ?", "answers": [{"text": "1984", "answer_start": 26},
                                                         {"text": "in 1984", "answer_start": 23}]},
           {"id": "b", "question": "where ?", "answers": [], "is_impossible": True}]
    write(out / "unicode", json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]},
                                      ensure_ascii=False).encode())
    qas[0]["answers"][0]["answer_start"] = 27
    write(out / "bad-offset", json.dumps({"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}).encode())


def images_seeds(out: Path) -> None:
    """IDX images and their labels: three 4 × 4 images, the same gzipped, labels of another
    count, a truncated image file, and images with no labels file."""
    import gzip
    import struct
    pixels = bytes((i * 37) % 256 for i in range(3 * 16))
    images = struct.pack(">IIII", 0x803, 3, 4, 4) + pixels
    labels = struct.pack(">II", 0x801, 3) + bytes([0, 9, 4])
    write(out / "three", images + SEP + labels)
    write(out / "three-gzip", gzip.compress(images, mtime=0) + SEP + gzip.compress(labels, mtime=0))
    write(out / "labels-of-two", images + SEP + struct.pack(">II", 0x801, 2) + bytes([1, 2]))
    write(out / "truncated", images[:-5] + SEP + labels)
    write(out / "no-labels", struct.pack(">IIII", 0x803, 2, 3, 5) + bytes(range(30)))
    import zlib

    def png(w, h, color_type, depth, row):
        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        header = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0)
        raw = b"".join(b"\0" + row for _ in range(h))
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    write(out / "png-gray", png(4, 3, 0, 8, bytes(range(4))))
    write(out / "png-rgb16", png(2, 2, 2, 16, bytes(range(12))))
    write(out / "png-palette", png(3, 2, 3, 8, bytes([0, 1, 0])))


def tokenizer_seeds(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    text = lines_of("wiki.valid.raw", 200) + [r.split("\t")[0] for r in lines_of("sst2.dev.tsv", 200)]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # WordPiece as BertTokenizerFast saves it.
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    wp.train_from_iterator(text, trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials))
    wp.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", wp.token_to_id("[CLS]")), ("[SEP]", wp.token_to_id("[SEP]"))])
    write(out / "wordpiece-tokenizer.json", b"\x00" + wp.to_str(pretty=True).encode())
    vocab = sorted(wp.get_vocab().items(), key=lambda kv: kv[1])
    write(out / "wordpiece-vocab.txt", b"\x01" + "".join(t + "\n" for t, _ in vocab).encode())
    # Byte-level BPE as GPT2TokenizerFast saves it, and its vocab.json + merges.txt.
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    bpe.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    write(out / "bpe-tokenizer.json", b"\x00" + bpe.to_str(pretty=True).encode())
    model = json.loads(bpe.to_str())["model"]
    merges = "#version: 0.2\n" + "".join((m if isinstance(m, str) else " ".join(m)) + "\n" for m in model["merges"])
    write(out / "bpe-vocab-merges", b"\x02" + json.dumps(model["vocab"]).encode() + SEP + merges.encode())
    # Unigram with a SentencePiece-style normaliser and pre-tokenizer (T5's shape).
    uni = Tokenizer(models.Unigram())
    uni.normalizer = normalizers.Sequence([normalizers.Replace(" {2,}", " ")])
    uni.pre_tokenizer = pre_tokenizers.Metaspace()
    uni.decoder = decoders.Metaspace()
    uni.train_from_iterator(text, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"],
                                                          unk_token="<unk>"))
    write(out / "unigram-tokenizer.json", b"\x00" + uni.to_str(pretty=True).encode())
    llama_and_bloom_seeds(out, text)


def llama_and_bloom_seeds(out: Path, text: list) -> None:
    """Llama's shape (BPE with byte fallback behind Metaspace "first", Strip decoder) and
    BLOOM's (a Split regex with nested classes, then ByteLevel without a regex)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    llama = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    llama.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
    llama.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                       decoders.Strip(" ", 1, 0)])
    llama.train_from_iterator(text, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"] +
                                                        [f"<0x{b:02X}>" for b in range(256)]))
    j = json.loads(llama.to_str())  # the byte pieces are ordinary vocabulary, as in Llama's file
    j["added_tokens"] = [t for t in j["added_tokens"] if not t["content"].startswith("<0x")]
    write(out / "llama-tokenizer.json", b"\x00" + json.dumps(j, indent=2, ensure_ascii=False).encode())
    bloom = Tokenizer(models.BPE(unk_token="<unk>"))
    bloom.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(" ?[^(\\s|[.,!?\u2026\u3002])]+"), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bloom.decoder = decoders.ByteLevel()
    bloom.train_from_iterator(text, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    write(out / "bloom-tokenizer.json", b"\x00" + bloom.to_str(pretty=True).encode())


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py OUT")
    out = Path(sys.argv[1])
    for name, make in [("safetensors", safetensors_seeds), ("json_config", json_config_seeds), ("corpus", corpus_seeds),
                       ("tasks", tasks_seeds), ("tokenizer", tokenizer_seeds), ("squad", squad_seeds),
                       ("images", images_seeds)]:
        target = out / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        make(target)
        print(f"{name}: {len(list(target.iterdir()))} seeds")


if __name__ == "__main__":
    main()
