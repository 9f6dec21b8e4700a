#!/usr/bin/env python3
"""Shaw et al.'s relative position representations against a PyTorch port of tensor2tensor's
dot_product_attention_relative (one CTest test per model).

  relative_reference.py bert|gpt2 --bin BIN_DIR --work DIR

HF removed relative_key, so the reference is tensor2tensor's (common_attention.py):
_generate_relative_positions_matrix (j − i clipped to ±max_relative_position, shifted by it),
_generate_relative_positions_embeddings (a (2k + 1, depth) table gathered to (Tq, Tk, depth)),
_relative_attention_inner (x·yᵀ + x·zᵀ per query, transposed as t2t does), queries scaled by
depth^−0.5 first. bert: BERT's post-norm encoder and masked-LM head, the second row padded;
gpt2: GPT-2's pre-norm causal decoder and tied LM head. Random weights under lmkit's names go
to a checkpoint directory; lmkit-forward reads it and must give the reference's logits, loss
and every parameter gradient within 1e-5 of scale (float32 both sides). Rows of 24 tokens and
max_relative_position 5, so distances are clipped.

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
    print(f"skipped: the relative-attention reference needs torch and safetensors in this Python ({e})")
    sys.exit(77)

K = 5  # max_relative_position
D, H, F, V, N, L = 32, 4, 64, 64, 32, 2
CONFIGS = {
    "bert": {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": V, "hidden_size": D,
             "num_hidden_layers": L, "num_attention_heads": H, "intermediate_size": F, "max_position_embeddings": N,
             "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.0,
             "attention_probs_dropout_prob": 0.0, "pad_token_id": 0, "attention": "relative", "max_relative_position": K},
    "gpt2": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_embd": D, "n_layer": L,
             "n_head": H, "n_inner": F, "n_positions": N, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
             "layer_norm_epsilon": 1e-5, "attention": "relative", "max_relative_position": K},
}
TOLERANCE = 1e-5


# ---- tensor2tensor's functions, ported line for line (tf -> torch).

def relative_positions_matrix(length_q, length_k, cache=False):
    if not cache:
        range_vec_q = range_vec_k = torch.arange(length_q)
        distance_mat = range_vec_k[None, :] - range_vec_q[:, None]
    else:
        distance_mat = torch.arange(-length_k + 1, 1, 1)[None, :]
    return distance_mat.clamp(-K, K) + K


def relative_positions_embeddings(length_q, length_k, table, cache=False):
    return table[relative_positions_matrix(length_q, length_k, cache)]  # (Lq, Lk, depth)


def relative_attention_inner(x, y, z, transpose):
    batch_size, heads, length = x.shape[0], x.shape[1], x.shape[2]
    xy = x @ (y.transpose(-1, -2) if transpose else y)
    x_t = x.permute(2, 0, 1, 3).reshape(length, heads * batch_size, -1)
    x_tz = x_t @ (z.transpose(-1, -2) if transpose else z)
    x_tz = x_tz.reshape(length, batch_size, heads, -1).permute(1, 2, 0, 3)
    return xy + x_tz


def dot_product_attention_relative(q, k, v, bias, keys_table, values_table):
    length_q, length_k = q.shape[2], k.shape[2]
    relations_keys = relative_positions_embeddings(length_q, length_k, keys_table)
    relations_values = relative_positions_embeddings(length_q, length_k, values_table)
    logits = relative_attention_inner(q, k, relations_keys, True)
    if bias is not None:
        logits = logits + bias
    weights = torch.softmax(logits, dim=-1)
    return relative_attention_inner(weights, v, relations_values, False)


# ---- the models around it.

def shapes_of(model):
    hd = D // H
    if model == "bert":
        s = {"bert.embeddings.word_embeddings.weight": (V, D), "bert.embeddings.position_embeddings.weight": (N, D),
             "bert.embeddings.token_type_embeddings.weight": (2, D), "bert.embeddings.LayerNorm.weight": (D,),
             "bert.embeddings.LayerNorm.bias": (D,), "cls.predictions.bias": (V,),
             "cls.predictions.transform.dense.weight": (D, D), "cls.predictions.transform.dense.bias": (D,),
             "cls.predictions.transform.LayerNorm.weight": (D,), "cls.predictions.transform.LayerNorm.bias": (D,)}
        for i in range(L):
            p = f"bert.encoder.layer.{i}."
            for name, shape in [("attention.self.query", (D, D)), ("attention.self.key", (D, D)),
                                ("attention.self.value", (D, D)), ("attention.output.dense", (D, D)),
                                ("intermediate.dense", (F, D)), ("output.dense", (D, F))]:
                s[p + name + ".weight"], s[p + name + ".bias"] = shape, (shape[0],)
            for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
                s[p + norm + ".weight"], s[p + norm + ".bias"] = (D,), (D,)
            s[p + "attention.self.relative_keys"] = s[p + "attention.self.relative_values"] = (2 * K + 1, hd)
        return s
    s = {"transformer.wte.weight": (V, D), "transformer.wpe.weight": (N, D), "transformer.ln_f.weight": (D,),
         "transformer.ln_f.bias": (D,)}
    for i in range(L):
        p = f"transformer.h.{i}."
        # GPT-2's Conv1D stores (in, out).
        for name, shape in [("attn.c_attn", (D, 3 * D)), ("attn.c_proj", (D, D)), ("mlp.c_fc", (D, F)), ("mlp.c_proj", (F, D))]:
            s[p + name + ".weight"], s[p + name + ".bias"] = shape, (shape[1],)
        for norm in ("ln_1", "ln_2"):
            s[p + norm + ".weight"], s[p + norm + ".bias"] = (D,), (D,)
        s[p + "attn.relative_keys"] = s[p + "attn.relative_values"] = (2 * K + 1, hd)
    return s


def weights(model, g):
    w = {}
    for name, shape in shapes_of(model).items():  # far from any init: a dropped bias or affine fails
        noise = torch.randn(shape, generator=g) * (0.3 if "relative" in name else 0.1)
        w[name] = (1 + noise if name.endswith("LayerNorm.weight") or ".ln_" in name and name.endswith("weight") else noise)
        w[name] = w[name].requires_grad_()
    return w


def attention(q, k, v, bias, w, prefix):
    hd = q.shape[-1]
    return dot_product_attention_relative(q * hd ** -0.5, k, v, bias, w[prefix + "relative_keys"], w[prefix + "relative_values"])


def bert(w, batch, attend=attention):
    """BERT's masked LM with `attend(q, k, v, bias, w, prefix)` as each layer's attention core."""
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    b, t = ids.shape
    hd = D // H
    lin = lambda x, name: x @ w[name + ".weight"].T + w[name + ".bias"]
    norm = lambda x, name: torch.nn.functional.layer_norm(x, (D,), w[name + ".weight"], w[name + ".bias"], 1e-12)
    gelu = lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    heads = lambda y: y.view(b, t, H, hd).transpose(1, 2)
    x = (w["bert.embeddings.word_embeddings.weight"][ids] + w["bert.embeddings.position_embeddings.weight"][:t]
         + w["bert.embeddings.token_type_embeddings.weight"][torch.zeros_like(ids)])
    x = norm(x, "bert.embeddings.LayerNorm")
    bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for i in range(L):
        p = f"bert.encoder.layer.{i}."
        q, k, v = (heads(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        a = attend(q, k, v, bias, w, p + "attention.self.").transpose(1, 2).reshape(b, t, D)
        x = norm(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        x = norm(x + lin(gelu(lin(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
    y = norm(gelu(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    logits = y @ w["bert.embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]
    return logits, torch.nn.functional.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)


def gpt2(w, batch):
    ids, labels = batch["input_ids"], batch["labels"]
    b, t = ids.shape
    hd = D // H
    conv = lambda x, name: x @ w[name + ".weight"] + w[name + ".bias"]
    norm = lambda x, name: torch.nn.functional.layer_norm(x, (D,), w[name + ".weight"], w[name + ".bias"], 1e-5)
    gelu = lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    heads = lambda y: y.view(b, t, H, hd).transpose(1, 2)
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:t]
    causal = torch.triu(torch.full((t, t), torch.finfo(torch.float32).min), 1)
    for i in range(L):
        p = f"transformer.h.{i}."
        q, k, v = conv(norm(x, p + "ln_1"), p + "attn.c_attn").split(D, dim=-1)
        a = attention(heads(q), heads(k), heads(v), causal, w, p + "attn.").transpose(1, 2).reshape(b, t, D)
        x = x + conv(a, p + "attn.c_proj")
        x = x + conv(gelu(conv(norm(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    logits = norm(x, "transformer.ln_f") @ w["transformer.wte.weight"].T
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)
    return logits, loss


def inputs(model, g):
    b, t = 2, 24
    ids = torch.randint(1, V, (b, t), generator=g)
    if model == "gpt2":
        return {"input_ids": ids, "labels": ids.clone()}
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, 17:] = 0
    ids[1, 17:] = 0  # <pad>
    labels = torch.full((b, t), -100, dtype=torch.long)
    for row, col in [(0, 3), (0, 11), (0, 20), (1, 2), (1, 9), (1, 16)]:
        labels[row, col] = int(ids[row, col])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="+", choices=sorted(CONFIGS))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)  # a fresh directory: lmkit-forward never overwrites
    return max(compare(model, a.bin, os.path.join(a.work, model)) for model in a.model)


def compare(model, bin_dir, work):
    ckpt = os.path.join(work, "ckpt")
    os.makedirs(ckpt)
    g = torch.Generator().manual_seed(5)
    w = weights(model, g)
    batch = inputs(model, g)
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump(CONFIGS[model], f)
    save_file({k: v.detach().contiguous() for k, v in w.items()}, os.path.join(ckpt, "model.safetensors"))
    save_file(batch, os.path.join(work, "inputs.safetensors"))
    logits, loss = (bert if model == "bert" else gpt2)(w, batch)
    loss.backward()
    failures, worst = check_forward(bin_dir, work, ckpt, w, logits, loss, TOLERANCE)
    if failures:
        print(f"FAIL ({model}): " + "; ".join(failures))
        return 1
    print(f"ok: relative attention ({model}) equals tensor2tensor's dot_product_attention_relative: logits, loss and "
          f"{len(w)} parameter gradients; worst |diff|/scale {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
