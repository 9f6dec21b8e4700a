#!/usr/bin/env python3
"""The perplexity of a unigram model of a tokenizer's pieces: counted on a training text
(add-one smoothed), scored on a held-out one. The floor a language model beats once it has
learned more than word frequencies (docs/results.md, section 8).

  .venv/bin/python scripts/unigram_perplexity.py TOKENIZER.model TRAIN.txt VALID.txt
"""
import collections
import math
import sys

import sentencepiece


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: unigram_perplexity.py TOKENIZER.model TRAIN.txt VALID.txt")
    sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1])
    counts = [collections.Counter(), collections.Counter()]
    for counter, path in zip(counts, sys.argv[2:]):
        with open(path, encoding="utf-8") as f:
            for line in f:
                counter.update(sp.encode(line))
    train, valid = counts
    total, pieces = sum(train.values()), sp.get_piece_size()
    n = sum(valid.values())
    nll = -sum(c * math.log((train[t] + 1) / (total + pieces)) for t, c in valid.items()) / n
    print(f"{total} training pieces, {n} held-out pieces: unigram perplexity {math.exp(nll):.1f}")


if __name__ == "__main__":
    main()
