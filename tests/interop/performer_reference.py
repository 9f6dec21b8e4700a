#!/usr/bin/env python3
"""The Performer plugin (examples/performer_plugin) against a PyTorch reference of FAVOR+.

  performer_reference.py PLUGIN.so --bin BIN_DIR --work DIR

Choromanski et al. 2021, §2.3-2.4: φ(x) = m^−½ exp(ω·x' − |x'|²/2), x' = x / d^¼, and
Att = D⁻¹ (φ(Q) (φ(K)ᵀ V)), D = φ(Q) (φ(K)ᵀ 1), with the plugin's numerical shift (each
query row by its own maximum exponent, the keys of a head by their maximum over real keys;
both constants, as performer-pytorch's) and ε = 1e-4; padded keys' φ rows are zero. The same
random features ω (m, d) go into the checkpoint ("performer_features"), so lmkit and the
reference use the same ones. BERT's masked LM around it (relative_reference.py's), the second
row padded; lmkit-forward --plugin must give the reference's logits, loss and every trained
parameter's gradient within 1e-5 of scale.

Exits 0 on agreement, 1 on a mismatch, 77 (CTest: skipped) without torch and safetensors.
"""
import argparse
import json
import os
import shutil
import sys

try:
    import torch
    from safetensors.torch import save_file

    from forward_check import check_forward
    import relative_reference as base
except ImportError as e:
    print(f"skipped: the Performer reference needs torch and safetensors in this Python ({e})")
    sys.exit(77)

M = 16  # random features
TOLERANCE = 1e-5


def performer(q, k, v, bias, w, prefix):
    """FAVOR+ over q, k, v (B, H, T, d); `bias` (B, 1, 1, T) marks padded keys (< 0)."""
    omega = w[prefix + "performer_features"]  # (M, d)
    d = q.shape[-1]
    real = (bias[:, :, 0, :] == 0)[..., None] if bias is not None else torch.ones_like(k[..., :1], dtype=torch.bool)

    def phi(x, keys):
        x = x * d ** -0.25
        projected = x @ omega.T
        half = (x ** 2).sum(-1, keepdim=True) / 2
        if keys is None:
            shift = projected.amax(-1, keepdim=True)
        else:
            shift = projected.masked_fill(~keys, float("-inf")).amax((-2, -1), keepdim=True)
        return (torch.exp(projected - half - shift.detach()) + 1e-4) / M ** 0.5

    qf = phi(q, None)
    kf = phi(k, real) * real
    return (qf @ (kf.transpose(-1, -2) @ v)) / (qf @ kf.sum(2)[..., None])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plugin")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)  # a fresh directory: lmkit-forward never overwrites
    ckpt = os.path.join(a.work, "ckpt")
    os.makedirs(ckpt)
    g = torch.Generator().manual_seed(7)
    w = base.weights("bert", g)
    for name in [n for n in w if "relative_" in n]:
        del w[name]
    for i in range(base.L):
        w[f"bert.encoder.layer.{i}.attention.self.performer_features"] = torch.randn(M, base.D // base.H, generator=g)
    batch = base.inputs("bert", g)
    config = {k: v for k, v in base.CONFIGS["bert"].items() if k != "max_relative_position"}
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        json.dump(dict(config, attention="performer", performer_features=M), f)
    save_file({k: v.detach().contiguous() for k, v in w.items()}, os.path.join(ckpt, "model.safetensors"))
    save_file(batch, os.path.join(a.work, "inputs.safetensors"))
    logits, loss = base.bert(w, batch, attend=performer)
    loss.backward()
    trained = {k: v for k, v in w.items() if "performer_features" not in k}  # the features are not trained
    failures, worst = check_forward(a.bin, a.work, ckpt, trained, logits, loss, TOLERANCE, ["--plugin", a.plugin])
    # Not softmax attention: the same weights under full attention give other logits.
    full, _ = base.bert(w, batch, attend=lambda q, k, v, bias, w_, p: torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 + bias, -1) @ v)
    apart = (full - logits).abs().max().item()
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print(f"ok: the Performer plugin equals FAVOR+'s equations: logits, loss and {len(trained)} parameter gradients; "
          f"worst |diff|/scale {worst:.2e} (softmax attention's logits are {apart:.2g} away)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
