#!/usr/bin/env python3
"""Token-classification metric parity with seqeval (its default mode).

  seqeval_cases.py --out CASES.json [--seed N] [--cases N] [--run LMKIT_TESTS]

Draws random gold and predicted tag sequences (IOB1, IOB2 and IOBES tags of three
types, bare B/I, O, and tags lmkit must treat as seqeval does however odd), asks
seqeval for get_entities, micro precision/recall/F1, accuracy and the per-type
report, and writes them as JSON. With --run, runs `LMKIT_TESTS "[seqeval]"` with
LMKIT_SEQEVAL_CASES=CASES.json, which compares lmkit's eval::entity_scores to every
case. tests/fixtures/seqeval/cases.json is this script's output for --seed 1
(seqeval 1.2.2); exits 77 (CTest: skipped) when seqeval is not importable.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import warnings

try:
    from seqeval.metrics import accuracy_score, classification_report, f1_score, precision_score, recall_score
    from seqeval.metrics.sequence_labeling import get_entities
except ImportError as e:
    print(f"skipped: seqeval is not importable ({e})")
    sys.exit(77)

TAGS = ["O"] * 6 + [f"{p}-{t}" for p in "BIES" for t in ("PER", "LOC", "ORG")] + ["B", "I", "O", "B-MISC-X", "I-MISC-X"]


def sentence(rng, n):
    return [rng.choice(TAGS) for _ in range(n)]


def case(rng):
    gold = [sentence(rng, rng.randint(1, 9)) for _ in range(rng.randint(1, 5))]
    # Predictions: gold with some tags changed, so that most entities match.
    pred = [[t if rng.random() < 0.7 else rng.choice(TAGS) for t in s] for s in gold]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = classification_report(gold, pred, output_dict=True, zero_division=0)
        out = {"gold": gold, "predicted": pred,
               "gold_entities": [list(e) for e in get_entities(gold)],
               "precision": precision_score(gold, pred), "recall": recall_score(gold, pred),
               "f1": f1_score(gold, pred), "accuracy": accuracy_score(gold, pred),
               "per_type": {k: {"precision": v["precision"], "recall": v["recall"], "f1": v["f1-score"],
                                "support": int(v["support"])}
                            for k, v in report.items() if not k.endswith(" avg")}}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--run", help="lmkit_tests binary to check the cases with")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    cases = [case(rng) for _ in range(a.cases)]
    with open(a.out, "w") as f:
        json.dump(cases, f, indent=None)
    print(f"{len(cases)} seqeval cases written to {a.out}")
    if a.run:
        r = subprocess.run([a.run, "[seqeval]"], env={**os.environ, "LMKIT_SEQEVAL_CASES": a.out})
        sys.exit(r.returncode)


if __name__ == "__main__":
    main()
