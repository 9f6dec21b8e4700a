"""What the reference tests (linformer_reference.py, relative_reference.py) share: run
lmkit-forward --gradients on a checkpoint and an inputs file, and compare its logits, loss and
every parameter gradient with the reference's, within `tolerance` of scale (float32 both sides)."""
import os
import subprocess

import torch
from safetensors.torch import load_file


def compare(name, got, want, tolerance):
    """A failure line or None, and |diff| / scale. An unused parameter's gradient (None) is zero."""
    got = got.double()
    want = torch.zeros_like(got) if want is None else want.double()
    if got.shape != want.shape:
        return f"{name}: shape {tuple(got.shape)} vs the reference's {tuple(want.shape)}", 0.0
    err = (got - want).abs().max().item()
    scale = max(1.0, want.abs().max().item())
    return (f"{name}: max |diff| {err:.3g} (scale {scale:.3g})" if err > tolerance * scale else None), err / scale


def check_forward(bin_dir, work, ckpt, weights, logits, loss, tolerance, extra=()):
    """Runs lmkit-forward on `ckpt` and WORK/inputs.safetensors (and `extra` flags: --plugin P);
    returns (failures, worst |diff|/scale)."""
    out_path = os.path.join(work, "lmkit.safetensors")
    cmd = [os.path.join(bin_dir, "lmkit-forward"), "--checkpoint", ckpt, "--inputs", os.path.join(work, "inputs.safetensors"),
           "--output", out_path, "--threads", "1", "--gradients", *extra]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        return [" ".join(cmd) + "\n" + r.stdout + f"lmkit-forward exited {r.returncode}"], 0.0
    got = load_file(out_path)
    failures, worst = [], 0.0
    checks = [("logits", logits.detach()), ("loss", loss.detach())] + [("grad." + k, v.grad) for k, v in weights.items()]
    for name, want in checks:
        if name not in got:
            failures.append(f"{name}: missing from lmkit-forward's output")
            continue
        bad, rel = compare(name, got[name], want, tolerance)
        failures += [bad] if bad else []
        worst = max(worst, rel)
    return failures, worst
