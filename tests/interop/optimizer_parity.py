#!/usr/bin/env python3
"""lmkit's registered optimizers against their references, step by step (one CTest test per case).

  optimizer_parity.py CASE [CASE ...] --bin BIN_DIR --work DIR      (or "all")

A small GPT-2 (transformers' GPT2LMHeadModel, 2 layers of 32) trains for 20 steps on random
token batches under the reference optimizer: HF's transformers.optimization.Adafactor,
torch.optim.AdamW (fused), torch.optim.Muon with torch.optim.AdamW for the rest, and LAMB
written here from You et al. 2020, Algorithm 2. Each step's real gradients and the rate of a
warmup-then-decay schedule are recorded; lmkit-optimizer-replay applies the lmkit optimizer of
the same name and settings to the same gradients from the same initial weights, and every
parameter after every step must agree within 1e-6. The weight-decay groups are lmkit's
(decay on matrices and embeddings, none on biases and norm weights), and so is Muon's split
(the 2-D weights inside a numbered layer, embedding tables excepted; the rest AdamW).
The replay also saves its optimizer halfway and resumes from it in a new one: that run must
equal the uninterrupted one bit for bit.

Exits 0 on agreement, 1 on a mismatch, 77 (CTest: skipped) without torch and transformers.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

try:
    import torch
    from safetensors.torch import load_file, save_file
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.optimization import Adafactor
except ImportError as e:
    print(f"skipped: the optimizer references need torch, safetensors and transformers in this Python ({e})")
    sys.exit(77)

STEPS = 20
TOLERANCE = 1e-6
TABLES = {"transformer.wte.weight", "transformer.wpe.weight"}

# Each case: lmkit's options (as lmkit-optimizer-replay reads them) and how the reference is made.
CASES = {
    "adamw": {"name": "adamw", "lr": 3e-3, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8},
    "adafactor": {"name": "adafactor", "lr": 1e-2, "weight_decay": 0.01, "own": {}},
    "adafactor_relative": {"name": "adafactor", "lr": 1e-3, "weight_decay": 0.0,
                           "own": {"adafactor-relative-step": True, "adafactor-warmup-init": True}},
    "adafactor_beta1": {"name": "adafactor", "lr": 3e-3, "weight_decay": 0.05,
                        "own": {"adafactor-beta1": 0.9, "adafactor-scale-parameter": False,
                                "adafactor-clip-threshold": 0.5, "adafactor-decay-rate": -0.7}},
    "lamb": {"name": "lamb", "lr": 1e-2, "weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6},
    "muon": {"name": "muon", "lr": 3e-3, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "own": {}},
    "muon_original": {"name": "muon", "lr": 1e-2, "weight_decay": 0.0, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6,
                      "own": {"muon-adjust-lr": "original", "muon-nesterov": False, "muon-momentum": 0.9,
                              "muon-ns-steps": 4}},
}


class Lamb(torch.optim.Optimizer):
    """You et al. 2020, Algorithm 2: bias-corrected Adam moments, r = m̂/(√v̂+ε) + λx, each
    parameter moved by lr · ‖x‖/‖r‖ · r (the trust ratio 1 when either norm is 0)."""

    def __init__(self, params, lr, betas, eps, weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g, st = p.grad, self.state[p]
                if not st:
                    st["step"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["step"] += 1
                st["m"].mul_(b1).add_(g, alpha=1 - b1)
                st["v"].mul_(b2).addcmul_(g, g, value=1 - b2)
                m_hat = st["m"] / (1 - b1 ** st["step"])
                v_hat = st["v"] / (1 - b2 ** st["step"])
                r = m_hat / (v_hat.sqrt().add_(group["eps"]))
                if group["weight_decay"] != 0:
                    r.add_(p, alpha=group["weight_decay"])
                w_norm, r_norm = p.norm(2), r.norm(2)
                trust = torch.where((w_norm > 0) & (r_norm > 0), w_norm / r_norm, torch.ones_like(w_norm))
                p.add_(r.mul_(trust), alpha=-group["lr"])


def decay_groups(named, wd, **extra):
    decay = [p for n, p in named if p.dim() >= 2]
    rest = [p for n, p in named if p.dim() < 2]
    return [dict(params=decay, weight_decay=wd, **extra), dict(params=rest, weight_decay=0.0, **extra)]


def references(case, named):
    """The reference optimizers for `case` (each steps its own parameters)."""
    c = CASES[case]
    wd = c["weight_decay"]
    own = c.get("own", {})
    if c["name"] == "adamw":
        return [torch.optim.AdamW(decay_groups(named, wd), lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                                  fused=True)]
    if c["name"] == "lamb":
        return [Lamb(decay_groups(named, wd), lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"])]
    if c["name"] == "adafactor":
        relative = own.get("adafactor-relative-step", False)
        beta1 = own.get("adafactor-beta1", 0.0)
        return [Adafactor(decay_groups(named, wd), lr=None if relative else c["lr"], relative_step=relative,
                          warmup_init=own.get("adafactor-warmup-init", False),
                          scale_parameter=own.get("adafactor-scale-parameter", True),
                          clip_threshold=own.get("adafactor-clip-threshold", 1.0),
                          decay_rate=own.get("adafactor-decay-rate", -0.8), beta1=beta1 if beta1 > 0 else None)]
    layer = re.compile(r"(^|\.)[0-9]+\.")
    matrices = [(n, p) for n, p in named if p.dim() == 2 and n not in TABLES and layer.search(n)]
    rest = [(n, p) for n, p in named if not any(p is q for _, q in matrices)]
    muon = torch.optim.Muon([p for _, p in matrices], lr=c["lr"], weight_decay=wd,
                            momentum=own.get("muon-momentum", 0.95), nesterov=own.get("muon-nesterov", True),
                            ns_steps=own.get("muon-ns-steps", 5),
                            adjust_lr_fn=own.get("muon-adjust-lr", "match_rms_adamw"))
    adamw = torch.optim.AdamW(decay_groups(rest, wd), lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                              foreach=False)
    return [muon, adamw]


def rate(case, k):
    """Linear warmup over 5 steps, then linear decay to a tenth: the schedule's rate at step k."""
    peak = CASES[case]["lr"]
    return peak * (k + 1) / 5 if k < 5 else peak * (1 - 0.9 * (k - 4) / (STEPS - 4))


def record(case):
    torch.manual_seed(7)
    transformers.logging.set_verbosity_error()
    cfg = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).float()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    initial = {f"param/{n}": p.detach().clone() for n, p in named}
    optimizers = references(case, named)
    grads, after = {}, []
    relative = CASES[case].get("own", {}).get("adafactor-relative-step", False)
    for k in range(STEPS):
        if not relative:
            for opt in optimizers:
                for group in opt.param_groups:
                    group["lr"] = rate(case, k)
        ids = torch.randint(0, 64, (4, 16))
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, labels=ids).loss.backward()
        for n, p in named:
            grads[f"grad/{k}/{n}"] = p.grad.detach().clone()
        for opt in optimizers:
            opt.step()
        after.append({n: p.detach().clone() for n, p in named})
    return named, {**initial, **grads}, after


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+", choices=sorted(CASES) + ["all"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    cases = sorted(CASES) if "all" in args.cases else args.cases
    # One Python for every case: importing torch and transformers is most of a case's time.
    return max(check_case(case, args.bin, os.path.join(args.work, case)) for case in cases)


def check_case(case, bin_dir, work):
    args = argparse.Namespace(case=case, bin=bin_dir, work=work)
    os.makedirs(args.work, exist_ok=True)
    named, steps, after = record(args.case)
    options = dict(CASES[args.case], params=[n for n, _ in named], tables=sorted(TABLES))
    if not CASES[args.case].get("own", {}).get("adafactor-relative-step", False):
        options["lrs"] = [rate(args.case, k) for k in range(STEPS)]
    opt_path, steps_path, out_path = (os.path.join(args.work, f) for f in ("options.json", "steps.safetensors", "out.safetensors"))
    with open(opt_path, "w") as f:
        json.dump(options, f)
    save_file(steps, steps_path)
    subprocess.run([os.path.join(args.bin, "lmkit-optimizer-replay"), opt_path, steps_path, out_path], check=True)
    out = load_file(out_path)
    worst, where = 0.0, ""
    for k in range(STEPS):
        for n, _ in named:
            diff = (out[f"param/{k}/{n}"] - after[k][n]).abs().max().item()
            if diff > worst:
                worst, where = diff, f"step {k + 1}, {n}"
    resumed = [(k, n) for k in range(STEPS // 2, STEPS) for n, _ in named
               if not torch.equal(out[f"resumed/{k}/{n}"], out[f"param/{k}/{n}"])]
    moved = max((after[-1][n] - steps[f"param/{n}"]).abs().max().item() for n, _ in named)
    print(f"{args.case}: {len(named)} parameters, {STEPS} steps; largest difference from the reference "
          f"{worst:.3g} ({where or 'none'}); the weights moved by up to {moved:.3g}; "
          f"resumed halfway: {'bitwise equal' if not resumed else f'{len(resumed)} tensors differ'}")
    if worst > TOLERANCE or resumed or moved < 1e-4:
        print("FAIL")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
