#!/usr/bin/env python3
"""Draws loss curves from lmkit metrics.jsonl files as an SVG picture.

Standard library only (no matplotlib needed).

    python3 scripts/plot_metrics.py runs/bert/metrics.jsonl -o docs/img/bert-mini.svg \
        --title "bert-mini, MLM + NSP, WikiText-2" [--key mlm_loss] [--smooth 10]

Train loss is drawn as a thin line (a moving average over --smooth points) and
validation loss as dots joined by a thick line; the y axis is linear.
"""
import argparse
import json
import math
import sys


def read(path, key):
    train, valid = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            m = json.loads(line)
            if m.get("split") == "train" and "loss" in m:
                train.append((m["step"], m["loss"]))
            elif m.get("split") == "valid":
                v = m.get(key, m.get("loss"))
                if v is not None:
                    valid.append((m["step"], v))
    return train, valid


def smooth(points, n):
    out = []
    for i in range(len(points)):
        window = points[max(0, i - n + 1): i + 1]
        out.append((points[i][0], sum(p[1] for p in window) / len(window)))
    return out


def nice_ticks(lo, hi, count=5):
    span = hi - lo if hi > lo else 1.0
    step = 10 ** math.floor(math.log10(span / count))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= count:
            step *= m
            break
    start = math.ceil(lo / step) * step
    ticks = []
    t = start
    while t <= hi + 1e-9:
        ticks.append(round(t, 10))
        t += step
    return ticks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics", nargs="+", help="metrics.jsonl files (one curve pair each)")
    ap.add_argument("-o", "--output", required=True, help="SVG file to write")
    ap.add_argument("--title", default="")
    ap.add_argument("--key", default="loss", help="validation field to plot (loss, mlm_loss, ...)")
    ap.add_argument("--smooth", type=int, default=10, help="moving-average window for train loss")
    ap.add_argument("--labels", nargs="*", help="legend labels, one per file")
    args = ap.parse_args()

    series = []
    for i, path in enumerate(args.metrics):
        train, valid = read(path, args.key)
        if not train and not valid:
            sys.exit(f"error: {path}: no train or valid lines")
        label = args.labels[i] if args.labels and i < len(args.labels) else path
        series.append((label, smooth(train, args.smooth), valid))

    xs = [p[0] for _, t, v in series for p in t + v]
    ys = [p[1] for _, t, v in series for p in t + v]
    x0, x1 = 0, max(xs)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.05 or 0.5
    y0, y1 = y0 - pad, y1 + pad
    W, H, L, R, T, B = 720, 420, 70, 20, 40, 50
    sx = lambda x: L + (x - x0) / (x1 - x0 or 1) * (W - L - R)
    sy = lambda y: T + (y1 - y) / (y1 - y0 or 1) * (H - T - B)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">{args.title}</text>']
    for t in nice_ticks(y0, y1):
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for t in nice_ticks(x0, x1):
        out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{T}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{sx(t):.1f}" y="{H - B + 16}" text-anchor="middle">{t:g}</text>')
    out.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">step</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 16 {(T + H - B) / 2})">loss</text>')
    ly = T + 16
    for i, (label, train, valid) in enumerate(series):
        c = colors[i % len(colors)]
        if train:
            pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in train)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="1" opacity="0.6"/>')
            out.append(f'<text x="{W - R - 8}" y="{ly}" text-anchor="end" fill="{c}">{label}: train loss</text>')
            ly += 16
        if valid:
            pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in valid)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2.5"/>')
            out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{c}"/>' for x, y in valid]
            out.append(f'<text x="{W - R - 8}" y="{ly}" text-anchor="end" fill="{c}" font-weight="bold">{label}: valid {args.key}</text>')
            ly += 16
    out.append("</svg>")
    with open(args.output, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
