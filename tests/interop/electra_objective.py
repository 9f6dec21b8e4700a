#!/usr/bin/env python3
"""ELECTRA's objective (the plugin examples/electra) against a Python reference of the same
rule on the same random draws (CTest "electra: ..."; registered in CMakeLists.txt).

    electra_objective.py --bin BIN_DIR --plugin liblmkit_electra.so --work DIR

lmkit-pretrain --objective electra writes a small checkpoint (the discriminator, and the
generator in generator/). lmkit-forward runs it on a masked batch and writes, besides its
loss, discriminator logits and every discriminator gradient, the uniform draws of the
Gumbel-max sampling, the replaced ids and the replaced-token labels. The reference:
transformers' ElectraForMaskedLM (generator/) and ElectraForPreTraining (the run) sharing
one embeddings module, the generator's logits at the masked positions, the same draws
through argmax(logits − log(−log u)), a sample equal to the original labelled original,
and loss = MLM + rtd_weight · BCE over the real tokens, backpropagated (the samples are
constants: no gradient reaches the generator through them). Exits 0 on agreement, 1 on a
mismatch, 77 when transformers is not importable.
"""
import argparse
import json
import os
import shutil
import sys

try:
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print(f"skipped: needs torch, transformers and safetensors in this Python ({e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from hf_interop import compare, run  # noqa: E402  (the same subprocess runner and tolerance)

CONFIG = {"model_type": "electra", "vocab_size": 1000, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64, "generator_size": 0.5,
          "rtd_weight": 50}


def close(name, got, want, failures):
    """hf_interop's comparison, its failure appended; the relative error."""
    bad, rel = compare(name, got, want)
    failures += [bad] if bad else []
    return rel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    os.environ["LMKIT_PLUGINS"] = a.plugin
    preset = os.path.join(a.work, "electra.json")
    json.dump(CONFIG, open(preset, "w"))
    sample = os.path.join(SOURCE, "data", "wikitext-2-sample", "valid.txt")
    run([os.path.join(a.bin, "lmkit-pretrain"), "--model", preset, "--objective", "electra", "--train", sample,
         "--output", os.path.join(a.work, "run"), "--vocab-size", "1000", "--steps", "3", "--batch-size", "4",
         "--seq-len", "32", "--lr", "5e-3", "--threads", "1", "--seed", "3"])
    ckpt = os.path.join(a.work, "run", "final")

    # Two rows of 16 with token types, the second right-padded after 12; five masked positions.
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(5, CONFIG["vocab_size"], (2, 16), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    types = (torch.arange(16) >= 8).long().expand(2, 16).contiguous()
    labels = torch.full_like(ids, -100)
    for r, c in ((0, 2), (0, 7), (0, 13), (1, 4), (1, 9)):
        labels[r, c] = ids[r, c]
        ids[r, c] = 4  # [MASK] (its id does not matter to the rule)
    inputs = os.path.join(a.work, "inputs.safetensors")
    out_path = os.path.join(a.work, "lmkit.safetensors")

    def forward():
        save_file({"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": labels}, inputs)
        run([os.path.join(a.bin, "lmkit-forward"), "--checkpoint", ckpt, "--inputs", inputs, "--output", out_path,
             "--gradients", "--threads", "1", "--seed", "5", "--overwrite"])
        return load_file(out_path)

    # The draws depend on the seed alone, the samples on the masked inputs, not on the labels: a
    # second run whose originals at two positions are the first run's samples there must label
    # those two original (a sample equal to the original is not a replacement).
    first = forward()["replaced_input_ids"]
    for r, c in ((0, 7), (1, 9)):
        labels[r, c] = first[r, c]
    got = forward()

    disc = transformers.ElectraForPreTraining.from_pretrained(ckpt)
    gen = transformers.ElectraForMaskedLM.from_pretrained(os.path.join(ckpt, "generator"))
    gen.electra.embeddings = disc.electra.embeddings  # shared, as the objective trains them,
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight  # the output layer too (tied)
    disc.eval(), gen.eval()
    masked = labels.ne(-100)
    gen_logits = gen(input_ids=ids, attention_mask=mask, token_type_ids=types).logits[masked]  # (N, V)
    mlm = torch.nn.functional.cross_entropy(gen_logits, labels[masked])
    u = got["gumbel_uniform"]
    sampled = (gen_logits.detach() - (-u.log()).log()).argmax(-1)
    replaced = ids.clone()
    replaced[masked] = sampled
    rtd = torch.zeros_like(labels)
    rtd[masked] = sampled.ne(labels[masked]).long()
    d = disc(input_ids=replaced, attention_mask=mask, token_type_ids=types, labels=rtd)
    loss = mlm + CONFIG["rtd_weight"] * d.loss
    loss.backward()

    failures = []
    if not torch.equal(got["replaced_input_ids"], replaced):
        failures.append(f"replaced ids: {got['replaced_input_ids'][masked].tolist()} vs {sampled.tolist()}")
    if not torch.equal(got["rtd_labels"], rtd):
        failures.append(f"rtd labels: {got['rtd_labels'].tolist()} vs {rtd.tolist()}")
    worst = max(close("loss", got["loss"], loss.detach(), failures), close("logits", got["logits"], d.logits.detach(), failures))
    grads = 0
    for name, p in disc.named_parameters():
        key = "grad." + name
        if key not in got:
            failures.append(f"{key}: missing from lmkit-forward's output")
            continue
        worst = max(worst, close(key, got[key], p.grad if p.grad is not None else torch.zeros_like(p), failures))
        grads += 1
    n_replaced = int(rtd.sum())
    if rtd[0, 7] != 0 or rtd[1, 9] != 0 or n_replaced == 0:
        failures.append(f"the case does not cover both labels: {rtd[masked].tolist()}")
    print(f"electra objective (transformers {transformers.__version__}): {int(masked.sum())} masked, {n_replaced} "
          f"replaced; ids, labels, loss, logits and {grads} discriminator gradients (the shared embeddings' with "
          f"the generator's part) agree; worst |diff|/scale {worst:.2e}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
