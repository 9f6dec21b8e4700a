#!/usr/bin/env python3
"""Tokenizer agreement between lmkit and HuggingFace, both ways, on real text.

  hf-to-lmkit FAMILY: train a tokenizer with HF's libraries on the bundled WikiText-2
      sample (no hub), save it as transformers does, load it in lmkit, compare.
  lmkit-to-hf FAMILY: train one with lmkit-tokenize, load it with AutoTokenizer and
      PreTrainedTokenizerFast(tokenizer_file=...), compare.
  apps FAMILY (bert, gpt2): a HF model directory as save_pretrained writes it (random
      weights, the HF-trained tokenizer): lmkit-finetune --checkpoint DIR, lmkit-evaluate
      and lmkit-generate --prompt TEXT run on it as it is; generate's greedy ids equal HF's.

Compared on every line of WikiText-2 raw valid and every SST-2 dev sentence, alone
and as pairs (each text with the next): ids (and BERT's token types) with the
special tokens each side adds, and the text decoded back. Exit 0 only when all of
it is identical; 77 when this Python lacks transformers/tokenizers (CTest: skipped).
"""
import argparse, json, os, shutil, subprocess, sys

import cases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "data", "wikitext-2-sample", "train.txt")
TEXT = os.path.join(ROOT, "tests", "fixtures", "text")
VOCAB = 4000

try:
    import tokenizers
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    import transformers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
except ImportError as e:
    print(f"LMKIT_SKIP: {e}")
    sys.exit(77)


def texts():
    with open(os.path.join(TEXT, "wiki.valid.raw"), encoding="utf-8") as f:
        wiki = f.read().split("\n")[:-1]
    with open(os.path.join(TEXT, "sst2.dev.tsv"), encoding="utf-8") as f:
        sst = [line.split("\t")[0] for line in f.read().split("\n")[1:] if line]
    return wiki, sst


# ---- tokenizers trained the HuggingFace way ---------------------------------

def hf_bert(out, lowercase=True):
    t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    t.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=None if lowercase else False)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.decoder = decoders.WordPiece()
    t.train([TRAIN], trainers.WordPieceTrainer(vocab_size=VOCAB, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    t.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                     special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = transformers.BertTokenizer(tokenizer_object=t, do_lower_case=lowercase)
    tok.save_pretrained(out)
    # The same tokenizer in BERT's older layout: vocab.txt (+ tokenizer_config.json) only.
    legacy = out + "-vocab-txt"
    os.makedirs(legacy, exist_ok=True)
    vocab = sorted(t.get_vocab().items(), key=lambda kv: kv[1])
    with open(os.path.join(legacy, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(piece + "\n" for piece, _ in vocab))
    json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": lowercase, "strip_accents": None if lowercase else False},
              open(os.path.join(legacy, "tokenizer_config.json"), "w"))
    return [out, legacy]


def hf_gpt2(out):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train([TRAIN], trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = transformers.GPT2Tokenizer(tokenizer_object=t)
    tok.save_pretrained(out)
    # GPT-2's older layout: vocab.json + merges.txt.
    legacy = out + "-vocab-merges"
    os.makedirs(legacy, exist_ok=True)
    t.model.save(legacy)
    json.dump({"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False}, open(os.path.join(legacy, "tokenizer_config.json"), "w"))
    return [out, legacy]


def hf_roberta(out):
    # RoBERTa's byte-level BPE (GPT-2's, with <s> <pad> </s> <unk> <mask> first) and its
    # <s> A </s></s> B </s> template, saved as RobertaTokenizerFast does.
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train([TRAIN], trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    t.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), add_prefix_space=False)
    tok = transformers.RobertaTokenizerFast(tokenizer_object=t)
    tok.save_pretrained(out)
    return [out]


# BLOOM's pre-tokenizer (bigscience/bloom's tokenizer.json): a regex split that keeps a
# leading space with its word and isolates punctuation, then bytes mapped without a regex.
BLOOM_SPLIT = " ?[^(\\s|[.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c])]+"


def hf_bloom(out):
    # BLOOM's byte-level BPE: <unk> <s> </s> <pad> first, nothing added around a text.
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(BLOOM_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.train([TRAIN], trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=t, unk_token="<unk>", bos_token="<s>",
                                               eos_token="</s>", pad_token="<pad>")
    tok.save_pretrained(out)
    config = os.path.join(out, "tokenizer_config.json")
    c = json.load(open(config))
    c["tokenizer_class"] = "BloomTokenizerFast"  # as BigScience's repositories name it
    json.dump(c, open(config, "w"))
    return [out]


def hf_llama(out):
    # Llama's (and Mistral's) SentencePiece BPE with byte fallback, converted by transformers
    # to its tokenizer.json: a Metaspace pre-tokenizer (prepend_scheme "first"), BPE with
    # byte_fallback. Read from the JSON alone, and with the .model beside it.
    import sentencepiece as spm
    hub = out + "-spm"
    os.makedirs(hub, exist_ok=True)
    spm.SentencePieceTrainer.train(input=TRAIN, model_prefix=os.path.join(hub, "tokenizer"), vocab_size=VOCAB,
                                   model_type="bpe", byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   minloglevel=2, num_threads=2)
    os.remove(os.path.join(hub, "tokenizer.vocab"))
    json.dump({"tokenizer_class": "LlamaTokenizer"}, open(os.path.join(hub, "tokenizer_config.json"), "w"))
    AutoTokenizer.from_pretrained(hub).save_pretrained(out)
    beside = out + "-with-model"
    shutil.copytree(out, beside)
    shutil.copy(os.path.join(hub, "tokenizer.model"), beside)
    return [out, beside]


def hf_t5(out):
    # T5's tokenizer is a SentencePiece Unigram model (spiece.model); transformers
    # converts it to its fast tokenizer and saves tokenizer.json.
    import sentencepiece as spm
    hub = out + "-spiece"
    os.makedirs(hub, exist_ok=True)
    spm.SentencePieceTrainer.train(input=TRAIN, model_prefix=os.path.join(hub, "spiece"), vocab_size=VOCAB - 100,
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2, num_threads=2)
    os.remove(os.path.join(hub, "spiece.vocab"))
    json.dump({"tokenizer_class": "T5Tokenizer", "extra_ids": 100}, open(os.path.join(hub, "tokenizer_config.json"), "w"))
    tok = transformers.T5Tokenizer.from_pretrained(hub)
    tok.save_pretrained(out)
    return [out, hub]


# ---- comparison -------------------------------------------------------------

def lmkit_ids(bin_dir, tokenizer, path, pairs):
    cmd = [os.path.join(bin_dir, "lmkit-tokenize"), "ids", "--tokenizer", tokenizer, "--input", path, "--decode"]
    if pairs:
        cmd.append("--pairs")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return [json.loads(line) for line in r.stdout.splitlines()]


_LMKIT_IDS = {}


def lmkit_ids_once(bin_dir, tokenizer, path, pairs):
    """lmkit's side of a comparison, run once for the two HF loaders it is compared with."""
    key = (tokenizer, path, pairs)
    if key not in _LMKIT_IDS:
        _LMKIT_IDS[key] = lmkit_ids(bin_dir, tokenizer, path, pairs)
    return _LMKIT_IDS[key]


def compare(name, hf, lmkit_path, bin_dir, work):
    wiki, sst = texts()
    singles = wiki + sst
    pairs = [(wiki[i], wiki[i + 1]) for i in range(len(wiki) - 1)] + [(sst[i], sst[i + 1]) for i in range(len(sst) - 1)]
    single_file, pair_file = os.path.join(work, "singles.txt"), os.path.join(work, "pairs.tsv")
    with open(single_file, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in singles))
    with open(pair_file, "w", encoding="utf-8") as f:
        f.write("".join(a + "\t" + b + "\n" for a, b in pairs))
    ours = lmkit_ids_once(bin_dir, lmkit_path, single_file, False)
    ours_pairs = lmkit_ids_once(bin_dir, lmkit_path, pair_file, True)
    assert len(ours) == len(singles) and len(ours_pairs) == len(pairs), "line counts differ"
    theirs = hf(singles)
    theirs_pairs = hf([a for a, _ in pairs], [b for _, b in pairs])
    failures = []
    counts = {"ids": 0, "pair ids": 0, "type ids": 0, "decode": 0}
    for i, text in enumerate(singles):
        ids = theirs["input_ids"][i]
        if ours[i]["ids"] == ids:
            counts["ids"] += 1
        else:
            failures.append(f"ids of {text[:80]!r}: lmkit {ours[i]['ids'][:24]} HF {ids[:24]}")
        decoded = hf.decode(ids, skip_special_tokens=True)
        if ours[i]["text"] == decoded:
            counts["decode"] += 1
        else:
            failures.append(f"decode of {text[:80]!r}: lmkit {ours[i]['text'][:80]!r} HF {decoded[:80]!r}")
    for i, (a, b) in enumerate(pairs):
        ids = theirs_pairs["input_ids"][i]
        counts["pair ids"] += ours_pairs[i]["ids"] == ids
        if ours_pairs[i]["ids"] != ids:
            failures.append(f"pair ids of {a[:40]!r} / {b[:40]!r}: lmkit {ours_pairs[i]['ids'][:24]} HF {ids[:24]}")
        types = theirs_pairs.get("token_type_ids")
        if types is None:
            counts["type ids"] += 1
        elif ours_pairs[i]["type_ids"] == types[i]:
            counts["type ids"] += 1
        else:
            failures.append(f"type ids of pair {i}: lmkit {ours_pairs[i]['type_ids'][:24]} HF {types[i][:24]}")
    tokens = sum(len(x) for x in theirs["input_ids"]) + sum(len(x) for x in theirs_pairs["input_ids"])
    print(f"{name}: ids {counts['ids']}/{len(singles)}, pair ids {counts['pair ids']}/{len(pairs)}, "
          f"token types {counts['type ids']}/{len(pairs)}, decode {counts['decode']}/{len(singles)} identical "
          f"({tokens} HF tokens; {type(hf).__name__}, {type(hf.backend_tokenizer.model).__name__})")
    for f in failures[:8]:
        print("  " + f)
    return not failures


def run_app(bin_dir, *args):
    r = subprocess.run([os.path.join(bin_dir, args[0]), *args[1:]], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return r.stdout


def apps(family, bin_dir, work):
    import torch
    torch.manual_seed(0)
    d = os.path.join(work, "hf-model")
    if family == "bert":
        hf_bert(d)
        cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=128, max_position_embeddings=128)
        transformers.BertForPreTraining(cfg).save_pretrained(d)
    else:
        hf_gpt2(d)
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=2, n_positions=128,
                                      bos_token_id=0, eos_token_id=0)
        transformers.GPT2LMHeadModel(cfg).save_pretrained(d)
    tok = AutoTokenizer.from_pretrained(d)
    info = run_app(bin_dir, "lmkit-info", d)
    print("lmkit-info: " + next(line for line in info.splitlines() if line.startswith("tokenizer")))
    # Finetune on 200 SST-2 sentences (dev: the next 100) with the directory's own tokenizer.
    with open(os.path.join(TEXT, "sst2.dev.tsv"), encoding="utf-8") as f:
        rows = f.read().split("\n")
    for name, part in (("train.tsv", rows[1:201]), ("dev.tsv", rows[201:301])):
        with open(os.path.join(work, name), "w", encoding="utf-8") as f:
            f.write(rows[0] + "\n" + "\n".join(part) + "\n")
    out = os.path.join(work, "finetune")
    run_app(bin_dir, "lmkit-finetune", "--checkpoint", d, "--train", os.path.join(work, "train.tsv"), "--dev",
            os.path.join(work, "dev.tsv"), "--output", out, "--epochs", "1", "--batch-size", "16", "--max-length", "64",
            "--threads", "2")
    result = json.load(open(os.path.join(out, "result.json")))
    print(f"lmkit-finetune --checkpoint HF_DIR: dev accuracy {result['accuracy']:.3f} after 1 epoch (random weights)")
    # The best checkpoint keeps HF's tokenizer files, and HF still loads them.
    again = AutoTokenizer.from_pretrained(os.path.join(out, "best"))
    assert again("the movie")["input_ids"] == tok("the movie")["input_ids"], "the finetuned checkpoint's tokenizer changed"
    metric = "mlm-perplexity" if family == "bert" else "perplexity"
    run_app(bin_dir, "lmkit-evaluate", "--checkpoint", d, "--metric", metric, "--data",
            os.path.join(ROOT, "data", "wikitext-2-sample", "valid.txt"), "--seq-len", "64", "--output",
            os.path.join(work, "eval.json"), "--threads", "2", *(["--context", "64"] if family == "gpt2" else []))
    ev = json.load(open(os.path.join(work, "eval.json")))
    print(f"lmkit-evaluate --metric {metric}: {ev.get('perplexity', ev)}")
    if family == "gpt2":
        prompt = "The game began development in"
        ids = run_app(bin_dir, "lmkit-generate", "--checkpoint", d, "--prompt", prompt, "--max-new-tokens", "12", "--ids",
                      "--threads", "2").strip()
        text = run_app(bin_dir, "lmkit-generate", "--checkpoint", d, "--prompt", prompt, "--max-new-tokens", "12",
                       "--threads", "2").strip()
        model = transformers.GPT2LMHeadModel.from_pretrained(d).eval()
        enc = tok(prompt, return_tensors="pt")
        with torch.no_grad():
            ref = model.generate(**enc, max_new_tokens=12, do_sample=False, pad_token_id=0)[0, enc["input_ids"].shape[1]:]
        ours = [int(x) for x in ids.split(",")]
        print(f"lmkit-generate --prompt: {text!r}; greedy ids {'==' if ours == ref.tolist() else '!='} HF's")
        if ours != ref.tolist():
            print(f"  lmkit {ours}\n  HF    {ref.tolist()}")
            return False
    return True


# hf-to-lmkit: the HF-trained tokenizer of each family (its save_pretrained folder and the older layout).
HF_TRAINED = {"bert": hf_bert, "bert_cased": lambda out: hf_bert(out, lowercase=False), "gpt2": hf_gpt2, "t5": hf_t5,
              "roberta": hf_roberta, "bloom": hf_bloom, "llama": hf_llama}
# lmkit-to-hf: lmkit-tokenize train's --family and --model-type for each case.
LMKIT_TRAINED = {"bert": ("bert", "unigram"), "gpt2": ("gpt2", "unigram"), "t5": ("t5", "unigram"),
                 "bert_bpe": ("bert", "bpe"), "bert_cased": ("bert", "unigram"), "roberta": ("roberta", "bpe"),
                 "llama": ("llama", "bpe"), "bloom": ("bloom", "bpe"), "big_bird": ("big_bird", "unigram")}
FAMILIES = {"hf-to-lmkit": list(HF_TRAINED), "lmkit-to-hf": list(LMKIT_TRAINED), "apps": ["bert", "gpt2"]}


def run_case(direction, family, bin_dir, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if direction == "apps":
        return apps(family, bin_dir, work)
    ok = True
    if direction == "hf-to-lmkit":
        dirs = HF_TRAINED[family](os.path.join(work, "hf"))
        hf = AutoTokenizer.from_pretrained(dirs[0])
        for d in dirs:
            ok &= compare(f"HF {family} {os.path.basename(d)} -> lmkit", hf, d, bin_dir, work)
        return ok
    model_family, model_type = LMKIT_TRAINED[family]
    out = os.path.join(work, "lmkit")
    cmd = [os.path.join(bin_dir, "lmkit-tokenize"), "train", "--family", model_family, "--model-type", model_type,
           "--vocab-size", str(VOCAB), "--input", TRAIN, "--output", out, "--threads", "2"]
    subprocess.run(cmd, check=True, capture_output=True)
    ok &= compare(f"lmkit {family} -> AutoTokenizer", AutoTokenizer.from_pretrained(out), out, bin_dir, work)
    single = PreTrainedTokenizerFast(tokenizer_file=os.path.join(out, "tokenizer.json"))
    ok &= compare(f"lmkit {family} -> PreTrainedTokenizerFast(tokenizer_file)", single, out, bin_dir, work)
    return ok


def main():
    p = argparse.ArgumentParser(description="CASE: DIRECTION:FAMILY, several in one process (tests/interop/cases.py), "
                                            "or DIRECTION FAMILY")
    p.add_argument("cases", nargs="+", metavar="CASE")
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True, help="scratch folder (created; a subfolder DIRECTION-FAMILY a case)")
    a = p.parse_args()
    cases.run(cases.parse(p, a.cases, FAMILIES), a.work, lambda d, f, folder: run_case(d, f, a.bin, folder))


if __name__ == "__main__":
    main()
