#!/usr/bin/env python3
"""The train-short / test-long table and plot (docs/results.md, section 9) from the
lmkit-evaluate results scripts/length_extrapolation.sh writes: NAME-LENGTH.json.

    python3 scripts/plot_lengths.py runs/positions/eval --models gpt2 llama bloom mistral \\
        --lengths 128 256 512 1024 2048 -o runs/positions/extrapolation.svg

Prints a markdown table of word-level perplexity (comparable across tokenizers) and
token perplexity at each length, and writes an SVG line plot (standard library only)
of word perplexity against length on log axes.
"""
import argparse
import json
import math
import os

LABELS = {"gpt2": "GPT-2 (learned, n_positions 2048)", "llama": "Llama (rotary)", "bloom": "BLOOM (ALiBi)",
          "mistral": "Mistral (rotary, window 64)",
          "relative": "GPT-2, Shaw et al.'s relative attention (k = 20), no absolute positions"}
COLOURS = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]


def read(folder, name, length):
    path = os.path.join(folder, f"{name}-{length}.json")
    if not os.path.exists(path):
        raise SystemExit(f"error: {path}: missing (run the evaluate stage)")
    with open(path) as f:
        r = json.load(f)
    m = r.get("metrics", r)
    return float(m["word_perplexity"]), float(m["perplexity"])


def svg(results, lengths, out):
    w, h, left, right, top, bottom = 640, 400, 70, 230, 20, 50
    values = [v for rows in results.values() for v, _ in rows]
    lo, hi = math.log10(min(values)), math.log10(max(values))
    lo, hi = math.floor(lo * 4) / 4, math.ceil(hi * 4) / 4
    x = lambda i: left + (w - left - right) * i / max(1, len(lengths) - 1)
    y = lambda v: top + (h - top - bottom) * (hi - math.log10(v)) / max(1e-9, hi - lo)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>']
    for i, n in enumerate(lengths):
        parts.append(f'<line x1="{x(i):.1f}" y1="{top}" x2="{x(i):.1f}" y2="{h - bottom}" stroke="#ddd"/>')
        parts.append(f'<text x="{x(i):.1f}" y="{h - bottom + 16}" text-anchor="middle">{n}</text>')
    tick = lo
    while tick <= hi + 1e-9:
        v = 10 ** tick
        parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{w - right}" y2="{y(v):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
        tick += 0.25
    parts.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">tokens a window (trained at 128)</text>')
    parts.append(f'<text x="16" y="{(top + h - bottom) / 2}" transform="rotate(-90 16 {(top + h - bottom) / 2})" '
                 f'text-anchor="middle">word perplexity, WikiText-2 test (log)</text>')
    for k, (name, rows) in enumerate(results.items()):
        c = COLOURS[k % len(COLOURS)]
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, (v, _) in enumerate(rows))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        for i, (v, _) in enumerate(rows):
            parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{c}"/>')
        parts.append(f'<text x="{w - right + 10}" y="{top + 16 + 18 * k}" fill="{c}">{LABELS.get(name, name)}</text>')
    parts.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder")
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--lengths", nargs="+", type=int, required=True)
    ap.add_argument("-o", "--output", required=True, help="SVG file to write")
    a = ap.parse_args()
    results = {m: [read(a.folder, m, n) for n in a.lengths] for m in a.models}
    print("| model | " + " | ".join(str(n) for n in a.lengths) + " |")
    print("|---|" + "---|" * len(a.lengths))
    for m, rows in results.items():
        cells = [f"{wp:.1f} ({tp:.1f})" for wp, tp in rows]
        print(f"| {LABELS.get(m, m)} | " + " | ".join(cells) + " |")
    svg(results, a.lengths, a.output)
    print(f"plot: {a.output}")


if __name__ == "__main__":
    main()
