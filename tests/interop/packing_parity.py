#!/usr/bin/env python3
"""Packed rows against transformers (CTest "document mask: HF parity ..."): a small random HF
model of each family is saved with save_pretrained(); lmkit-forward runs it on two rows of three
and two documents with document_ids and position_ids, transformers on the same rows with the
block-diagonal causal (or, for BERT, bidirectional) mask as a 4-D attention_mask and the same
position_ids. Logits and loss must agree within 1e-5 — and must not agree without the mask.
Several families in one call share one import of torch and transformers (WORK/FAMILY each)."""
import argparse
import os
import shutil
import subprocess
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def model_of(family):
    torch.manual_seed(1)
    if family == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=60, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0)), True
    if family == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=60, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, bos_token_id=0, eos_token_id=0, pad_token_id=None)), True
    if family == "roberta":  # positions counted from padding_idx + 1, as HF's RoBERTa takes them
        return transformers.RobertaForMaskedLM(transformers.RobertaConfig(
            vocab_size=60, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=66, pad_token_id=1)), False
    return transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=60, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=64)), False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("families", nargs="+", choices=["gpt2", "llama", "bert", "roberta"])
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    for family in a.families:
        compare(family, a.bin, os.path.join(a.work, family))
    print(f"{len(failures)} failed" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


def compare(family, bin_dir, work):
    os.makedirs(work)
    model, causal = model_of(family)
    model.eval()
    model.save_pretrained(os.path.join(work, "hf"))
    lengths = [[7, 4, 9], [12, 8]]  # two rows of 20 tokens
    t = 20
    ids = torch.randint(5, 60, (2, t))
    docs = torch.stack([torch.cat([torch.full((n,), d) for d, n in enumerate(row)]) for row in lengths])
    first = 2 if family == "roberta" else 0  # the position a document starts at (lmkit: Model::first_position())
    pos = torch.stack([torch.cat([torch.arange(n) + first for n in row]) for row in lengths])
    labels = ids.clone()
    if causal:  # no target across a boundary: each document's first token after the row's first
        labels[docs != torch.roll(docs, 1, dims=1)] = -100
        labels[:, 0] = ids[:, 0]
    else:
        labels[torch.rand(2, t) > 0.3] = -100
    inputs = os.path.join(work, "inputs.safetensors")
    save_file({"input_ids": ids, "labels": labels, "document_ids": docs, "position_ids": pos}, inputs)
    out = os.path.join(work, "out.safetensors")
    r = subprocess.run([os.path.join(bin_dir, "lmkit-forward"), "--checkpoint", os.path.join(work, "hf"), "--inputs", inputs,
                        "--output", out, "--threads", "1"], capture_output=True, text=True)
    check(r.returncode == 0, f"{family}: lmkit-forward on packed rows ({r.stderr.strip()[-300:]})")
    if r.returncode != 0:
        return
    got = load_file(out)
    allowed = docs[:, :, None] == docs[:, None, :]
    if causal:
        allowed &= torch.tril(torch.ones(t, t, dtype=torch.bool))
    with torch.no_grad():
        want = model(input_ids=ids, position_ids=pos, attention_mask=allowed[:, None], labels=labels)
        open_rows = model(input_ids=ids, position_ids=pos, labels=labels)
    diff = float((got["logits"] - want.logits).abs().max())
    check(diff <= 1e-5, f"{family}: logits equal transformers' with the 4-D block-diagonal mask (max |diff| {diff:.2e})")
    loss_diff = abs(float(got["loss"]) - float(want.loss))
    check(loss_diff <= 1e-5, f"{family}: loss {float(got['loss']):.6f} vs {float(want.loss):.6f} (|diff| {loss_diff:.2e})")
    apart = float((got["logits"] - open_rows.logits).abs().max())
    check(apart > 1e-4, f"{family}: without the mask transformers' logits differ (max |diff| {apart:.2e})")


if __name__ == "__main__":
    main()
