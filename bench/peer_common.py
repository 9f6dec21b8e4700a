"""What the PyTorch peers of `lmkit-bench train` share (bench/hf_train.py, bench/gpt_peer.py):
the command line, the optimizer lmkit uses (AdamW lr 1e-4, weight decay 0.01 on matrices,
eps 1e-6, fused on CUDA), the timed step (zero grads, bf16 autocast over float32 weights
or fp32, backward, global clip 1.0, update; the device synchronised around it) and the report."""
import argparse
import os
import statistics
import time

import torch


def parser(doc, batch_size=32, seq_len=128, device="cpu"):
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--vocab-size", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=batch_size)
    ap.add_argument("--seq-len", type=int, default=seq_len)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--tf32", action="store_true", help="fp32 matmuls on TensorFloat-32 tensor cores (CUDA)")
    ap.add_argument("--threads", type=int, default=0, help="0: every core")
    ap.add_argument("--device", default=device)
    return ap


def setup(a):
    """Threads, TF32 and the seed as the arguments say; returns the device."""
    torch.set_num_threads(a.threads or os.cpu_count())
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = a.tf32
    torch.manual_seed(0)
    return torch.device(a.device)


def adamw(model, device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=1e-4, eps=1e-6, fused=device.type == "cuda" or None)


def time_steps(a, device, model, loss_of, next_batch):
    """Median seconds of the timed steps and the last loss. loss_of(batch) runs the forward
    (compiled or not) and returns the loss; next_batch() makes the step's batch."""
    opt = adamw(model, device)
    times, loss = [], None
    for i in range(a.warmup + a.steps):
        inputs = next_batch()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = loss_of(inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), loss


def report(a, device, what, step_s, loss, tokens):
    """The lines compare_hf.sh reads: the step, the peak GPU memory and, last, tokens_per_sec."""
    peak = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB" if device.type == "cuda" else ""
    print(f"{what}{' compiled' if a.compile else ''} {a.dtype}{' tf32' if a.tf32 else ''}, "
          f"threads {torch.get_num_threads()}, device {device}")
    print(f"step (median of {a.steps})   {step_s * 1e3:.1f} ms (loss {loss.item():.3f}){peak}")
    print(f"tokens_per_sec {tokens / step_s:.0f}")
