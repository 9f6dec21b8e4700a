#!/usr/bin/env python3
"""Draws bench/attention_cost.sh's step times against the input length as an SVG picture
(log-log), one line an attention. Standard library only.

    bash bench/attention_cost.sh > runs/attention-cost.txt
    python3 scripts/plot_attention_cost.py runs/attention-cost.txt [more.txt ...] -o docs/img/attention-cost.svg \
        [--recompute off|on]

Rows the bench did not run ("not run") are left out; a length and attention given by two
files takes the first file's figure.
"""
import argparse
import math

COLOURS = ["#222222", "#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def read(paths, recompute):
    steps = {}  # attention -> {length: ms}
    for path in paths:
        with open(path) as f:
            for line in f:
                cols = line.split()
                if len(cols) < 4 or not cols[0].isdigit() or cols[1] != recompute or cols[3] == "-":
                    continue
                steps.setdefault(cols[2], {}).setdefault(int(cols[0]), float(cols[3]))
    return steps


def svg(steps, recompute, out):
    w, h, left, right, top, bottom = 640, 400, 70, 150, 20, 50
    lengths = sorted({n for rows in steps.values() for n in rows})
    values = [v / 1000 for rows in steps.values() for v in rows.values()]
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    x = lambda n: left + (w - left - right) * (math.log2(n) - math.log2(lengths[0])) / max(1e-9, math.log2(lengths[-1] / lengths[0]))
    y = lambda v: top + (h - top - bottom) * (hi - math.log10(v)) / max(1e-9, hi - lo)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>']
    for n in lengths:
        parts.append(f'<line x1="{x(n):.1f}" y1="{top}" x2="{x(n):.1f}" y2="{h - bottom}" stroke="#ddd"/>')
        parts.append(f'<text x="{x(n):.1f}" y="{h - bottom + 16}" text-anchor="middle">{n}</text>')
    for e in range(lo, hi + 1):
        parts.append(f'<line x1="{left}" y1="{y(10 ** e):.1f}" x2="{w - right}" y2="{y(10 ** e):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y(10 ** e) + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    parts.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">tokens a row (log)</text>')
    parts.append(f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 {(top + h - bottom) / 2})" '
                 f'text-anchor="middle">seconds a training step (log), recompute {recompute}</text>')
    for k, (name, rows) in enumerate(steps.items()):
        c = COLOURS[k % len(COLOURS)]
        pts = " ".join(f"{x(n):.1f},{y(v / 1000):.1f}" for n, v in sorted(rows.items()))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        for n, v in rows.items():
            parts.append(f'<circle cx="{x(n):.1f}" cy="{y(v / 1000):.1f}" r="3" fill="{c}"/>')
        parts.append(f'<text x="{w - right + 10}" y="{top + 16 + 18 * k}" fill="{c}">{name}</text>')
    parts.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="bench/attention_cost.sh outputs")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--recompute", choices=["off", "on"], default="off")
    a = ap.parse_args()
    steps = read(a.logs, a.recompute)
    if not steps:
        raise SystemExit(f"error: no rows with recompute {a.recompute} in {', '.join(a.logs)}")
    svg(steps, a.recompute, a.output)


if __name__ == "__main__":
    main()
