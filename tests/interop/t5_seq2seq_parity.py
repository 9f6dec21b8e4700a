#!/usr/bin/env python3
"""Text-to-text finetuning against HuggingFace's T5ForConditionalGeneration.

  t5_seq2seq_parity.py --bin BIN_DIR --work DIR

A small T5 is pretrained for two steps (span corruption on the bundled WikiText-2
sample) and finetuned with `lmkit-finetune --task seq2seq` for four epochs on the
made-up sentiment fixture (tests/fixtures/seq2seq, source prefix "sst2 sentence: ").
transformers then loads the best checkpoint and its tokenizer, and on the dev set:
  - the batch HF's tokenizer makes (prefix + source + </s> truncated to 32 tokens,
    right-padded; target + </s> as labels, -100 on padding) gives lmkit-forward's loss and logits (the
    finetuning loss), within 1e-5 of the scale;
  - HF's greedy generate() (8 new tokens at most) gives lmkit-generate's tokens
    for each source, and decodes to lmkit-finetune's predictions.txt (batched,
    padded), line for line.
Exits 0 on agreement, 1 on a mismatch, 77 when transformers is not importable.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

try:
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print(f"skipped: needs torch, transformers and safetensors in this Python ({e})")
    sys.exit(77)

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(SOURCE, "tests", "fixtures", "seq2seq")
SAMPLE = os.path.join(SOURCE, "data", "wikitext-2-sample", "valid.txt")
PREFIX = "sst2 sentence: "
TOLERANCE = 1e-5


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    preset = os.path.join(a.work, "t5.json")
    with open(preset, "w") as f:
        json.dump({"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
                   "num_heads": 4, "feed_forward_proj": "relu", "tie_word_embeddings": True}, f)
    run([os.path.join(a.bin, "lmkit-pretrain"), "--model", preset, "--train", SAMPLE, "--output",
         os.path.join(a.work, "pretrain"), "--vocab-size", "1000", "--steps", "2", "--batch-size", "4", "--seq-len", "32",
         "--threads", "1", "--seed", "3"])
    ft = os.path.join(a.work, "finetune")
    run([os.path.join(a.bin, "lmkit-finetune"), "--task", "seq2seq", "--checkpoint", os.path.join(a.work, "pretrain", "final"),
         "--train", os.path.join(FIXTURE, "train.tsv"), "--dev", os.path.join(FIXTURE, "dev.tsv"), "--output", ft,
         "--source-prefix", PREFIX, "--epochs", "4", "--lr", "3e-3", "--best-metric", "exact_match", "--batch-size", "16", "--max-length", "32",
         "--max-target-length", "8", "--threads", "1"])
    best = os.path.join(ft, "best")
    model, info = transformers.T5ForConditionalGeneration.from_pretrained(best, output_loading_info=True)
    failures = [f"{k}: {v}" for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")]
    model.eval()
    tok = transformers.AutoTokenizer.from_pretrained(best)
    with open(os.path.join(FIXTURE, "dev.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    # --max-length 32 and --max-target-length 8 as HF truncates: the text cut, </s> kept.
    enc = tok([PREFIX + s for s, _ in rows], padding=True, truncation=True, max_length=32, return_tensors="pt")
    tgt = tok([t for _, t in rows], padding=True, truncation=True, max_length=8, return_tensors="pt")
    result = json.load(open(os.path.join(ft, "result.json")))
    cut = int((enc.attention_mask.sum(1) == 32).sum())  # at most as many as lmkit counted (some fit exactly)
    if result["truncated_sources"] > cut:
        failures.append(f"lmkit cut {result['truncated_sources']} dev sources; at most {cut} reach 32 tokens")
    labels = tgt.input_ids.masked_fill(tgt.attention_mask == 0, -100)
    batch = {"input_ids": enc.input_ids, "attention_mask": enc.attention_mask, "labels": labels}
    inputs = os.path.join(a.work, "inputs.safetensors")
    save_file({k: v.contiguous() for k, v in batch.items()}, inputs)
    out = os.path.join(a.work, "lmkit.safetensors")
    run([os.path.join(a.bin, "lmkit-forward"), "--checkpoint", best, "--inputs", inputs, "--output", out, "--threads", "1"])
    got = load_file(out)
    with torch.no_grad():
        want = model(**batch)
    worst = 0.0
    for name, w in (("loss", want.loss), ("logits", want.logits)):
        g = got[name].reshape(w.shape)
        rel = (g - w).abs().max().item() / max(1.0, w.abs().max().item())
        worst = max(worst, rel)
        if rel > TOLERANCE:
            failures.append(f"{name}: |lmkit - HF| / scale {rel:.2e}")
    with torch.no_grad():
        generated = model.generate(enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=8, do_sample=False,
                                   num_beams=1)
    # HF's tokens: after the decoder start, up to and with the first </s>.
    hf_ids = []
    for row in generated.tolist():
        row = row[1:]
        hf_ids.append(row[:row.index(tok.eos_token_id) + 1] if tok.eos_token_id in row else row)
    # lmkit's: each HF-encoded source generated alone (no padding) by lmkit-generate.
    cmd = [os.path.join(a.bin, "lmkit-generate"), "--checkpoint", best, "--max-new-tokens", "8", "--ids", "--threads", "1"]
    for ids, m in zip(enc.input_ids.tolist(), enc.attention_mask.tolist()):
        cmd += ["--prompt-ids", ",".join(str(i) for i, k in zip(ids, m) if k)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    lmkit_ids = [[int(x) for x in line.split(",") if x] for line in r.stdout.strip("\n").split("\n")]
    differ = [i for i, (x, y) in enumerate(zip(lmkit_ids, hf_ids)) if x != y]
    if len(lmkit_ids) != len(hf_ids) or differ:
        failures.append(f"greedy tokens differ at dev rows {differ[:5]}: lmkit {[lmkit_ids[i] for i in differ[:3]]} "
                        f"HF {[hf_ids[i] for i in differ[:3]]}")
    # The finetune's predictions (batched, padded) are those tokens detokenized.
    hf_texts = tok.batch_decode(generated, skip_special_tokens=True)
    with open(os.path.join(ft, "predictions.txt")) as f:
        ours = f.read().split("\n")[:-1]
    text_differ = [i for i, (x, y) in enumerate(zip(ours, hf_texts)) if x != y]
    if len(ours) != len(hf_texts) or text_differ:
        failures.append(f"predictions.txt differs from HF's decoded text at rows {text_differ[:5]}: "
                        f"{[(ours[i], hf_texts[i]) for i in text_differ[:3]]}")
    print(f"T5 seq2seq (transformers {transformers.__version__}): loss lmkit {got['loss'].item():.6f} HF {want.loss.item():.6f}, "
          f"worst |diff|/scale {worst:.2e}; {len(hf_ids)} greedy outputs, {len(hf_ids) - len(differ)} with equal tokens, "
          f"{len(hf_ids) - len(text_differ)} equal texts ({len(set(hf_texts))} distinct); "
          f"{result['truncated_sources']} sources cut to 32 tokens")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
