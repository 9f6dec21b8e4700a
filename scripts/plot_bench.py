#!/usr/bin/env python3
"""Bar chart (SVG, standard library only) of lmkit-bench train tokens/s against
HuggingFace's, from the logs bench/run_benchmarks.sh writes.

    python3 scripts/plot_bench.py runs/bench -o docs/img/benchmarks.svg
"""
import argparse
import os
import re

# HuggingFace Transformers 4.35 eager, same CPU and LibTorch (the performance issue's table).
ROWS = [
    ("bert-mini, vocab 30522", "bert-mini-30522", 1500),
    ("bert-mini, vocab 8000", "bert-mini-8000", 3360),
    ("gpt-mini, vocab 8000", "gpt-mini-8000", 2740),
    ("t5-mini, vocab 8000", "t5-mini-8000", 3790),
]


def tokens_per_sec(path):
    with open(path) as f:
        for line in f:
            m = re.match(r"tokens_per_sec (\d+)", line)
            if m:
                return float(m.group(1))
    raise SystemExit(f"error: {path}: no tokens_per_sec line")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", help="directory of bench logs (runs/bench)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    data = []
    for label, stem, hf in ROWS:
        fp32 = tokens_per_sec(os.path.join(args.logs, stem + "-fp32.log"))
        bf16 = tokens_per_sec(os.path.join(args.logs, stem + "-bf16.log"))
        data.append((label, hf, fp32, bf16))
    W, H, L, T, B = 760, 400, 70, 50, 70
    top = max(max(d[1:]) for d in data) * 1.15
    group = (W - L - 20) / len(data)
    bar = group / 4.5
    sy = lambda v: T + (1 - v / top) * (H - T - B)
    colors = [("#999999", "HuggingFace fp32"), ("#1f77b4", "lmkit fp32"), ("#2ca02c", "lmkit bf16")]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">Training tokens/s, batch 32 x 128, 2 CPU threads</text>']
    step = 2000
    for v in range(0, int(top) + 1, step):
        out.append(f'<line x1="{L}" x2="{W - 20}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{L - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:,}</text>')
    for i, (label, *values) in enumerate(data):
        x0 = L + i * group + (group - 3 * bar) / 2
        for j, v in enumerate(values):
            x = x0 + j * bar
            out.append(f'<rect x="{x:.1f}" y="{sy(v):.1f}" width="{bar - 3:.1f}" height="{sy(0) - sy(v):.1f}" fill="{colors[j][0]}"/>')
            out.append(f'<text x="{x + bar / 2 - 1.5:.1f}" y="{sy(v) - 4:.1f}" text-anchor="middle" font-size="10">{v:,.0f}</text>')
            if j > 0:
                out.append(f'<text x="{x + bar / 2 - 1.5:.1f}" y="{sy(v) - 16:.1f}" text-anchor="middle" font-size="10" '
                           f'font-weight="bold">{v / values[0]:.2f}x</text>')
        out.append(f'<text x="{L + i * group + group / 2:.1f}" y="{H - B + 18}" text-anchor="middle">{label}</text>')
    for j, (c, name) in enumerate(colors):
        out.append(f'<rect x="{L + 10 + j * 170}" y="{H - 28}" width="12" height="12" fill="{c}"/>')
        out.append(f'<text x="{L + 28 + j * 170}" y="{H - 18}">{name}</text>')
    out.append("</svg>")
    with open(args.output, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
