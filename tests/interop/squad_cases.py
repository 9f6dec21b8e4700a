#!/usr/bin/env python3
"""SQuAD's official scores, for lmkit-evaluate --metric squad's parity test.

  squad_cases.py --out CASES.json [--seed N] [--sets N] [--run LMKIT_TESTS]

Draws sets of SQuAD-format questions — contexts of random words (casing, punctuation,
articles, digits, non-ASCII letters, so answer_start counts characters, not bytes), one to
three gold answers a question cut from its context, some questions unanswerable (v2.0's
is_impossible), some gold answers that normalise to nothing ("the", "!") — and predictions
(the gold answer, a near miss, an empty string, random words), and writes per set the
dataset, the predictions and the figures of SQuAD's two official scripts (v1.1's for the sets
without unanswerable questions, which it cannot score), ported below:
evaluate-v1.1.py (exact_match, f1) and evaluate-v2.0.py (exact, f1, HasAns_*, NoAns_*; no
no-answer probabilities, so no threshold search). With --run, runs `LMKIT_TESTS "[squad]"`
with LMKIT_SQUAD_CASES=CASES.json, which compares lmkit's figures to every one.
tests/fixtures/squad/cases.json is `--seed 1 --sets 40`.

Exits 0 on agreement, 1 on a mismatch.
"""
import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from squad_official import evaluate_v1, evaluate_v2  # noqa: E402


WORDS = ["the", "a", "an", "The", "cat", "Cat", "sat", "on", "mat", "dog", "ran", "far", "away", "in", "Paris", "1984",
         "3.5", "U.S.", "don't", "café", "Straße", "naïve", "“quoted”", "—", "(see", "below)", "and", "A.", "x", "#1",
         "50%", "e-mail", "ÉCOLE", "İstanbul", "theme", "anthem", "then", "&", "...", "?", "!", "日本", "🙂"]


def draw_set(rng, k):
    data = []
    predictions = {}
    n = 0
    negatives = k % 2 == 1  # every other set has unanswerable questions (v1.1's script takes none)
    for _ in range(rng.randint(1, 3)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 30))]
        context = " ".join(words)
        starts = [0]
        for w in words[:-1]:
            starts.append(starts[-1] + len(w) + 1)
        qas = []
        for _ in range(rng.randint(1, 5)):
            qid = f"s{k}-q{n}"
            n += 1
            impossible = negatives and rng.random() < 0.25
            answers = []
            if not impossible:
                for _ in range(rng.randint(1, 3)):
                    i = rng.randrange(len(words))
                    j = min(len(words), i + rng.randint(1, 4))
                    text = " ".join(words[i:j])
                    assert context[starts[i]:starts[i] + len(text)] == text
                    answers.append({"text": text, "answer_start": starts[i]})
            qas.append({"id": qid, "question": "what ?", "answers": answers, "is_impossible": impossible})
            r = rng.random()
            if answers and r < 0.35:
                pred = rng.choice(answers)["text"]
            elif answers and r < 0.6:
                gold = rng.choice(answers)["text"].split()
                pred = " ".join(gold[: max(1, len(gold) - 1)] + ([rng.choice(WORDS)] if rng.random() < 0.5 else []))
            elif r < 0.8:
                pred = ""
            else:
                pred = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            predictions[qid] = pred
        data.append({"title": f"t{k}", "paragraphs": [{"context": context, "qas": qas}]})
    return {"data": data, "predictions": predictions, "v1": None if negatives else evaluate_v1(data, predictions),
            "v2": evaluate_v2(data, predictions)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sets", type=int, default=40)
    p.add_argument("--run")
    a = p.parse_args()
    rng = random.Random(a.seed)
    cases = [draw_set(rng, k) for k in range(a.sets)]
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=0)
    questions = sum(len(c["predictions"]) for c in cases)
    print(f"{len(cases)} sets, {questions} questions written to {a.out}")
    if a.run:
        r = subprocess.run([a.run, "[squad]"], env={**os.environ, "LMKIT_SQUAD_CASES": a.out})
        sys.exit(0 if r.returncode == 0 else 1)


if __name__ == "__main__":
    main()
