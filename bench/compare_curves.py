#!/usr/bin/env python3
"""Compares the train-loss curves of three lmkit runs: a reference, the same
setting with another seed (the noise), and a candidate with the reference's seed.

    python3 bench/compare_curves.py REF.jsonl OTHER_SEED.jsonl CANDIDATE.jsonl [--window 20]

Prints, over the steps after the first window, the mean absolute difference of
the moving-average train loss of the candidate to the reference and of the other
seed to the reference, their ratio, and each run's validation losses. The
candidate matches "within noise" when its difference is no larger than the
seed-to-seed one.
"""
import argparse
import json
import sys


def read(path):
    train, valid = {}, {}
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                m = json.loads(line)
                if m.get("split") == "train" and "loss" in m:
                    train[m["step"]] = m["loss"]
                elif m.get("split") == "valid" and "loss" in m:
                    valid[m["step"]] = m["loss"]
    except (OSError, ValueError) as e:
        sys.exit(f"error: {path}: {e}")
    if not train:
        sys.exit(f"error: {path}: no train lines")
    return train, valid


def moving_average(curve, window):
    steps = sorted(curve)
    out = {}
    for i, s in enumerate(steps):
        chunk = [curve[t] for t in steps[max(0, i - window + 1): i + 1]]
        out[s] = sum(chunk) / len(chunk)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference")
    ap.add_argument("other_seed")
    ap.add_argument("candidate")
    ap.add_argument("--window", type=int, default=20)
    a = ap.parse_args()
    runs = [read(p) for p in (a.reference, a.other_seed, a.candidate)]
    smooth = [moving_average(t, a.window) for t, _ in runs]
    steps = sorted(set(smooth[0]) & set(smooth[1]) & set(smooth[2]))
    steps = [s for s in steps if s >= a.window]
    if not steps:
        sys.exit(f"error: fewer than {a.window} common steps")

    def mean_abs(x, y):
        return sum(abs(x[s] - y[s]) for s in steps) / len(steps)

    noise = mean_abs(smooth[1], smooth[0])
    diff = mean_abs(smooth[2], smooth[0])
    print(f"steps compared            {steps[0]}..{steps[-1]} (moving average over {a.window})")
    print(f"|other seed - reference|  {noise:.4f}  (mean absolute train-loss difference: the noise)")
    print(f"|candidate - reference|   {diff:.4f}")
    print(f"ratio                     {diff / noise if noise > 0 else float('inf'):.2f}  "
          f"({'within' if diff <= noise else 'outside'} noise)")
    for name, (train, valid), curve in zip(("reference", "other seed", "candidate"), runs, smooth):
        v = ", ".join(f"{s}: {valid[s]:.4f}" for s in sorted(valid))
        print(f"{name:<12} final train (avg) {curve[max(curve)]:.4f}  valid loss {v}")


if __name__ == "__main__":
    main()
