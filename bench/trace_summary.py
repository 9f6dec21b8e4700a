#!/usr/bin/env python3
"""Sums a Chrome trace from `lmkit-bench train|generate --profile FILE` (or torch.profiler) by GPU
kernel: total time per kernel name, its share, its launches, grouped into families (GEMM,
attention, elementwise, norm, softmax/loss, optimizer, copies). A trace without GPU kernels (a
CPU run) is summed by operator instead: each op's self time (its time less the ops it called),
its share and its calls.   usage: trace_summary.py TRACE.json [TOP]"""
import collections
import json
import re
import sys


def family(name):
    n = name.lower()
    for fam, pat in [("gemm", r"gemm|cutlass|sm90_xmma|nvjet|cublas"), ("attention", r"flash|fmha|attention|efficient"),
                     ("optimizer", r"adam|multi_tensor|foreach"), ("norm", r"layer_norm|layernorm|rms"),
                     ("softmax/loss", r"softmax|nll|cross_entropy|log_softmax|logsumexp"),
                     ("copy/cast", r"copy|convert|cast|memcpy|memset|fill"), ("dropout", r"dropout|fused_dropout|philox|bernoulli")]:
        if re.search(pat, n):
            return fam
    return "elementwise/other"


def cpu_ops(trace, top):
    """Self time of each CPU op: its duration less that of the ops nested in it on its thread."""
    ops = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    by_thread = collections.defaultdict(list)
    for e in ops:
        by_thread[e["tid"]].append(e)
    own, calls = collections.Counter(), collections.Counter()
    for events in by_thread.values():
        events.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        stack = []
        for e in events:
            while stack and stack[-1]["ts"] + stack[-1].get("dur", 0) <= e["ts"]:
                stack.pop()
            if stack:
                own[stack[-1]["name"]] -= e.get("dur", 0)
            own[e["name"]] += e.get("dur", 0)
            calls[e["name"]] += 1
            stack.append(e)
    total = sum(own.values())
    if not total:
        sys.exit(f"error: {sys.argv[1]}: no GPU kernels and no CPU ops in the trace")
    print(f"{sum(calls.values())} CPU ops, {total / 1e3:.1f} ms of self time (no GPU kernels in the trace)")
    for name, t in own.most_common(top):
        print(f"{t / 1e3:8.2f} ms {100 * t / total:5.1f}% x{calls[name]:<5d} {name[:110]}")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: trace_summary.py TRACE.json [TOP]")
    trace = json.load(open(sys.argv[1]))
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not kernels:
        cpu_ops(trace, top)
        return
    by_name, count, fams = collections.Counter(), collections.Counter(), collections.Counter()
    for e in kernels:
        by_name[e["name"]] += e.get("dur", 0)
        count[e["name"]] += 1
        fams[family(e["name"])] += e.get("dur", 0)
    total = sum(by_name.values())
    if kernels:
        span = max(e["ts"] + e.get("dur", 0) for e in kernels) - min(e["ts"] for e in kernels)
        print(f"{len(kernels)} kernels, {total / 1e3:.1f} ms of GPU time over a {span / 1e3:.1f} ms span "
              f"({100 * total / span:.0f}% busy)")
    for fam, t in fams.most_common():
        print(f"  {fam:18s} {t / 1e3:8.2f} ms  {100 * t / total:5.1f}%")
    for name, t in by_name.most_common(top):
        print(f"{t / 1e3:8.2f} ms {100 * t / total:5.1f}% x{count[name]:<5d} {name[:110]}")


if __name__ == "__main__":
    main()
