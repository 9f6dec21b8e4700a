#!/usr/bin/env python3
"""Makes a small SQuAD-format extractive QA set from the bundled WikiText-2 sample.

  make_squad.py --output DIR [--source data/wikitext-2-sample] [--negative-fraction 0.33] [--seed 1] [--overwrite]

Writes DIR/train.json (from train.txt) and DIR/dev.json (from valid.txt and test.txt) in
SQuAD's layout, and DIR/train-v2.json and DIR/dev-v2.json, the same questions with SQuAD
v2.0's unanswerable ones added. How a question is made: every sentence of a paragraph that
holds exactly one year (a 4-digit number 1000-2029) that the paragraph holds nowhere else
becomes "<the sentence with the year replaced by 'what year'> ?", answered by the year at its
character offset in the paragraph (the context). A v2.0 unanswerable question is such a
question set against a paragraph of another article that holds no year at all (is_impossible).
No human wrote a question: the set tests that the QA loop trains and scores end to end, not
reading comprehension; figures on it are labelled as such (docs/results.md).

Exits 2 with one `error:` line for bad arguments, a missing source or an existing output file
(without --overwrite).
"""
import argparse
import json
import os
import random
import re
import sys

YEAR = re.compile(r"^(1[0-9]{3}|20[0-2][0-9])$")


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def paragraphs(path):
    """(article title, paragraph) in file order; headings name the article."""
    title = ""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.strip()
            if not text:
                continue
            if text.startswith("= ") and text.endswith(" ="):
                if not text.startswith("= ="):
                    title = text.strip("= ").strip()
                continue
            out.append((title, text))
    return out


def questions(context):
    """Every (question, year, character offset) the paragraph `context` gives."""
    tokens = context.split(" ")
    years = [t for t in tokens if YEAR.match(t)]
    out = []
    start = 0
    offsets = []
    for t in tokens:  # each token's character offset
        offsets.append(start)
        start += len(t) + 1
    sentence = []
    for i, t in enumerate(tokens):
        sentence.append(i)
        if t != "." and i != len(tokens) - 1:
            continue
        found = [k for k in sentence if YEAR.match(tokens[k])]
        if len(found) == 1 and years.count(tokens[found[0]]) == 1 and 6 <= len(sentence) <= 48:
            k = found[0]
            words = [("what year" if j == k else tokens[j]) for j in sentence if tokens[j] != "."]
            out.append((" ".join(words) + " ?", tokens[k], offsets[k]))
        sentence = []
    return out


def make(source_files, prefix, rng, negative_fraction):
    data = []
    no_year = []
    for path in source_files:
        for title, context in paragraphs(path):
            if not any(YEAR.match(t) for t in context.split(" ")):
                no_year.append((title, context))
    n = 0
    plain, v2 = [], []
    for path in source_files:
        for title, context in paragraphs(path):
            qas = []
            for question, year, start in questions(context):
                assert context[start:start + len(year)] == year
                qas.append({"id": f"{prefix}-{n:05d}", "question": question,
                            "answers": [{"text": year, "answer_start": start}], "is_impossible": False})
                n += 1
            if qas:
                plain.append({"title": title, "paragraphs": [{"context": context, "qas": qas}]})
    v2 = json.loads(json.dumps(plain))
    negatives = {}
    for article in v2:
        for qa in article["paragraphs"][0]["qas"]:
            if rng.random() >= negative_fraction:
                continue
            others = [p for p in no_year if p[0] != article["title"]]
            if not others:
                continue
            title, context = rng.choice(others)
            negatives.setdefault(context, (title, []))[1].append(
                {"id": qa["id"] + "-n", "question": qa["question"], "answers": [], "is_impossible": True})
    for context, (title, qas) in negatives.items():
        v2.append({"title": title, "paragraphs": [{"context": context, "qas": qas}]})
    for article in plain:
        for qa in article["paragraphs"][0]["qas"]:
            del qa["is_impossible"]  # v1.1 has no such key
    return {"version": "1.1", "data": plain}, {"version": "v2.0", "data": v2}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output", required=True)
    p.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                    "wikitext-2-sample"))
    p.add_argument("--negative-fraction", type=float, default=0.33)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--overwrite", action="store_true")
    a = p.parse_args()
    if not 0 <= a.negative_fraction <= 1:
        fail(f"--negative-fraction {a.negative_fraction} is not within [0, 1]")
    files = {name: os.path.join(a.source, name) for name in ("train.txt", "valid.txt", "test.txt")}
    for name, path in files.items():
        if not os.path.isfile(path):
            fail(f"--source {a.source}: no {name} (WikiText-2's layout: train.txt, valid.txt, test.txt)")
    if os.path.exists(a.output) and not os.path.isdir(a.output):
        fail(f"--output {a.output} is a file, not a directory")
    outputs = ["train.json", "dev.json", "train-v2.json", "dev-v2.json"]
    taken = [o for o in outputs if os.path.exists(os.path.join(a.output, o))]
    if taken and not a.overwrite:
        fail(f"--output {a.output} already holds {', '.join(taken)}; give --overwrite to replace them")
    rng = random.Random(a.seed)
    train, train_v2 = make([files["train.txt"]], "train", rng, a.negative_fraction)
    dev, dev_v2 = make([files["valid.txt"], files["test.txt"]], "dev", rng, a.negative_fraction)
    os.makedirs(a.output, exist_ok=True)
    for name, value in zip(outputs, (train, dev, train_v2, dev_v2)):
        tmp = os.path.join(a.output, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(value, f, ensure_ascii=False, indent=1)
            f.write("\n")
        os.replace(tmp, os.path.join(a.output, name))
        count = sum(len(p["qas"]) for d in value["data"] for p in d["paragraphs"])
        print(f"{os.path.join(a.output, name)}: {count} questions")


if __name__ == "__main__":
    main()
