#!/usr/bin/env python3
"""Linformer against a short PyTorch reference of the paper's equations (one CTest test per sharing).

  linformer_reference.py SHARING --bin BIN_DIR --work DIR

HF has no Linformer, so the reference is written here from Wang et al. 2020, §4:
head_i = softmax(Q_i (E K_i)^T / sqrt(d_k)) (F V_i), with E, F (k, n) applied to the first T
of n positions, on BERT's post-norm encoder and masked-LM head (HF's BertForMaskedLM equations).
Padding: a padded key's row of K and V is zeroed before the projection, so what a padded
position holds changes nothing. SHARING: headwise (E, F per layer, shared by its heads),
key-value (one E per layer, F = E), layerwise (one E for all layers, keys and values; layer 0
holds it). Random weights under lmkit's names go to a checkpoint directory; lmkit-forward
reads it and must give the reference's logits, loss and every parameter gradient within
1e-5 of scale (float32 both sides). Rows of 24 tokens, the second right-padded to 17.

Exits 0 on agreement, 1 on a mismatch, 77 (CTest: skipped) without torch and safetensors.
"""
import argparse
import json
import math
import os
import shutil
import sys

try:
    import torch
    from safetensors.torch import save_file

    from forward_check import check_forward
except ImportError as e:
    print(f"skipped: the Linformer reference needs torch and safetensors in this Python ({e})")
    sys.exit(77)

CONFIG = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 64, "hidden_size": 32,
          "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 32,
          "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.0,
          "attention_probs_dropout_prob": 0.0, "pad_token_id": 0, "attention": "linformer", "linformer_k": 8}
TOLERANCE = 1e-5


def weights(sharing, g):
    c = CONFIG
    d, f, v, n, k = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["max_position_embeddings"], c["linformer_k"]
    shapes = {"bert.embeddings.word_embeddings.weight": (v, d), "bert.embeddings.position_embeddings.weight": (n, d),
              "bert.embeddings.token_type_embeddings.weight": (2, d), "bert.embeddings.LayerNorm.weight": (d,),
              "bert.embeddings.LayerNorm.bias": (d,), "cls.predictions.bias": (v,),
              "cls.predictions.transform.dense.weight": (d, d), "cls.predictions.transform.dense.bias": (d,),
              "cls.predictions.transform.LayerNorm.weight": (d,), "cls.predictions.transform.LayerNorm.bias": (d,)}
    for i in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        for name, shape in [("attention.self.query", (d, d)), ("attention.self.key", (d, d)),
                            ("attention.self.value", (d, d)), ("attention.output.dense", (d, d)),
                            ("intermediate.dense", (f, d)), ("output.dense", (d, f))]:
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = shape, (shape[0],)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + norm + ".weight"], shapes[p + norm + ".bias"] = (d,), (d,)
        if sharing != "layerwise" or i == 0:
            shapes[p + "attention.self.linformer_e"] = (k, n)
        if sharing == "headwise":
            shapes[p + "attention.self.linformer_f"] = (k, n)
    w = {}
    for name, shape in shapes.items():  # far from any init: a dropped bias or affine fails
        noise = torch.randn(shape, generator=g) * 0.1
        w[name] = (1 + noise if "LayerNorm.weight" in name else noise).requires_grad_()
    return w


def projections(w, sharing, i):
    layer = 0 if sharing == "layerwise" else i
    e = w[f"bert.encoder.layer.{layer}.attention.self.linformer_e"]
    f = w.get(f"bert.encoder.layer.{layer}.attention.self.linformer_f", e)
    return e, f


def reference(w, batch, sharing):
    c = CONFIG
    ids, mask, types, labels = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], batch["labels"]
    b, t = ids.shape
    h, d = c["num_attention_heads"], c["hidden_size"]
    hd = d // h
    lin = lambda x, name: x @ w[name + ".weight"].T + w[name + ".bias"]
    norm = lambda x, name: torch.nn.functional.layer_norm(x, (d,), w[name + ".weight"], w[name + ".bias"], c["layer_norm_eps"])
    gelu = lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    x = (w["bert.embeddings.word_embeddings.weight"][ids] + w["bert.embeddings.position_embeddings.weight"][:t]
         + w["bert.embeddings.token_type_embeddings.weight"][types])
    x = norm(x, "bert.embeddings.LayerNorm")
    keep = mask[:, None, :, None].to(x.dtype)  # (B, 1, T, 1)
    heads = lambda y: y.view(b, t, h, hd).transpose(1, 2)  # (B, H, T, hd)
    for i in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        q = heads(lin(x, p + "attention.self.query"))
        k = heads(lin(x, p + "attention.self.key")) * keep
        v = heads(lin(x, p + "attention.self.value")) * keep
        e, f = projections(w, sharing, i)
        k, v = e[:, :t] @ k, f[:, :t] @ v  # (B, H, k, hd): E K_i and F V_i
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd), dim=-1) @ v
        a = a.transpose(1, 2).reshape(b, t, d)
        x = norm(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        x = norm(x + lin(gelu(lin(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
    y = norm(gelu(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    logits = y @ w["bert.embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]
    loss = torch.nn.functional.cross_entropy(logits.view(-1, c["vocab_size"]), labels.view(-1), ignore_index=-100)
    return logits, loss


def inputs(g):
    b, t, v = 2, 24, CONFIG["vocab_size"]
    ids = torch.randint(1, v, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, 17:] = 0
    ids[1, 17:] = 0  # <pad>
    types = torch.zeros(b, t, dtype=torch.long)
    types[:, 12:] = 1
    labels = torch.full((b, t), -100, dtype=torch.long)
    for row, col in [(0, 3), (0, 11), (0, 20), (1, 2), (1, 9), (1, 16)]:
        labels[row, col] = int(ids[row, col])
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": labels}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sharing", nargs="+", choices=["headwise", "key-value", "layerwise"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)  # a fresh directory: lmkit-forward never overwrites
    return max(compare(sharing, a.bin, os.path.join(a.work, sharing)) for sharing in a.sharing)


def compare(sharing, bin_dir, work):
    os.makedirs(work)
    g = torch.Generator().manual_seed(11)
    w = weights(sharing, g)
    batch = inputs(g)
    ckpt = os.path.join(work, "ckpt")
    os.makedirs(ckpt, exist_ok=True)
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump(dict(CONFIG, linformer_sharing=sharing), f)
    save_file({k: v.detach().contiguous() for k, v in w.items()}, os.path.join(ckpt, "model.safetensors"))
    save_file(batch, os.path.join(work, "inputs.safetensors"))
    logits, loss = reference(w, batch, sharing)
    loss.backward()
    failures, worst = check_forward(bin_dir, work, ckpt, w, logits, loss, TOLERANCE)
    if failures:
        print(f"FAIL ({sharing}): " + "; ".join(failures))
        return 1
    print(f"ok: Linformer ({sharing}) equals the paper's equations: logits, loss and {len(w)} parameter gradients; "
          f"worst |diff|/scale {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
