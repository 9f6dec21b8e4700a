#!/usr/bin/env python3
"""ListOps as Long Range Arena specifies it (Tay et al. 2021, §3.1; Nangia & Bowman 2018), generated
here from a seed: no download.

  python3 scripts/listops.py --output DIR [--seed 0] [--train 96000] [--valid 2000] [--test 2000]
  python3 scripts/listops.py --self-test

An example is a nested list of operations over single digits, e.g. `[MAX 2 9 [MIN 4 7 ] 0 ]` -> 9.
Operators: MAX, MIN, MED (the median, rounded down as int() does) and SM (the sum modulo 10); ten
classes (0-9). A tree grows from depth 1: below --max-depth a node is an operator with probability
0.25, holding 2 to --max-args arguments, else a digit; at --max-depth always a digit. An example is
kept when its length (digits, operators and closing brackets) lies strictly between --min-length
(500) and --max-length (2000), and only once. The text is LRA's: every pair of the binary tree that
builds an operator's argument list is wrapped in `( ... )`, so the sequences are longer than the
length counted; `--no-parens` leaves those tokens out.

Writes DIR/train.tsv, DIR/valid.tsv and DIR/test.tsv in lmkit's classification format (a header
`sentence<TAB>label`, then one example a line).
The label of every example is computed twice, from the tree as it is built and by evaluating the
written text with a stack; a disagreement stops the script.
"""
import argparse
import os
import random
import sys

OPERATORS = ["[MAX", "[MIN", "[MED", "[SM"]
END = "]"
OPERATOR_P = 0.25


def grow(rng, depth, max_depth, max_args):
    """A tree: a digit, or (operator, [subtrees]); with its length in LRA's count."""
    if depth < max_depth and rng.random() <= OPERATOR_P:
        args = [grow(rng, depth + 1, max_depth, max_args) for _ in range(rng.randint(2, max_args))]
        return (rng.choice(OPERATORS), [a for a, _ in args]), 2 + sum(n for _, n in args)
    return rng.randrange(10), 1


def apply(op, values):
    if op == "[MAX":
        return max(values)
    if op == "[MIN":
        return min(values)
    if op == "[MED":
        s = sorted(values)
        mid = len(s) // 2
        return s[mid] if len(s) % 2 else int((s[mid - 1] + s[mid]) / 2)
    return sum(values) % 10  # [SM


def value_of(tree):
    if isinstance(tree, int):
        return tree
    op, args = tree
    return apply(op, [value_of(a) for a in args])


def text_of(tree, parens):
    """LRA's text: an operator's argument list is a left-nested binary tree ((op a1) a2) ... ], each pair in ( )."""
    if isinstance(tree, int):
        return str(tree)
    op, args = tree
    left = op
    for a in args:
        left = f"( {left} {text_of(a, parens)} )" if parens else f"{left} {text_of(a, parens)}"
    return f"( {left} {END} )" if parens else f"{left} {END}"


def evaluate_text(text):
    """The value of a written example, by a stack over its tokens (parentheses ignored)."""
    stack = []
    for token in text.split():
        if token in ("(", ")"):
            continue
        if token in OPERATORS:
            stack.append([token])
        elif token == END:
            op, *values = stack.pop()
            result = apply(op, values)
            if not stack:
                return result
            stack[-1].append(result)
        else:
            stack[-1].append(int(token))
    raise ValueError("unbalanced example")


def generate(rng, count, seen, a):
    out = []
    while len(out) < count:
        tree, length = grow(rng, 1, a.max_depth, a.max_args)
        if not a.min_length < length < a.max_length:
            continue
        text = text_of(tree, not a.no_parens)
        if text in seen:
            continue
        seen.add(text)
        label = value_of(tree)
        if evaluate_text(text) != label:
            raise SystemExit(f"error: the tree says {label} and the text {evaluate_text(text)}: {text[:80]}")
        out.append((text, label))
    return out


def self_test():
    cases = [("[MAX 2 9 [MIN 4 7 ] 0 ]", 9), ("[SM 3 8 ]", 1), ("[MED 1 5 3 9 ]", 4), ("[MED 2 7 1 ]", 2),
             ("( ( ( [MIN 5 ) 3 ) ] )", 3)]
    for text, want in cases:
        assert evaluate_text(text) == want, (text, evaluate_text(text), want)
    tree = ("[MAX", [2, 9, ("[MIN", [4, 7]), 0])
    assert text_of(tree, False) == "[MAX 2 9 [MIN 4 7 ] 0 ]" and value_of(tree) == 9
    assert evaluate_text(text_of(tree, True)) == 9
    a = argparse.Namespace(max_depth=10, max_args=10, min_length=20, max_length=200, no_parens=False)
    first = generate(random.Random(7), 30, set(), a)
    again = generate(random.Random(7), 30, set(), a)
    assert first == again, "the same seed gave other examples"
    assert len({t for t, _ in first}) == 30
    lengths = [sum(tok not in ("(", ")") for tok in t.split()) for t, _ in first]
    assert all(20 < n < 200 for n in lengths), lengths
    labels = {label for _, label in generate(random.Random(1), 300, set(), a)}
    assert labels == set(range(10)), labels
    print("ok: ListOps evaluates as specified, a seed gives the same examples, lengths and labels in range")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--output")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=96000)
    ap.add_argument("--valid", type=int, default=2000)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--max-depth", type=int, default=10)
    ap.add_argument("--max-args", type=int, default=10)
    ap.add_argument("--min-length", type=int, default=500)
    ap.add_argument("--max-length", type=int, default=2000)
    ap.add_argument("--no-parens", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.output:
        print("error: --output DIR is required (or --self-test)", file=sys.stderr)
        return 2
    if a.max_args < 2 or a.max_depth < 1 or a.min_length >= a.max_length - 1 or min(a.train, a.valid, a.test) < 0:
        print("error: need --max-args >= 2, --max-depth >= 1, --min-length < --max-length - 1 and counts >= 0",
              file=sys.stderr)
        return 2
    os.makedirs(a.output, exist_ok=True)
    rng, seen = random.Random(a.seed), set()
    for name, count in (("train", a.train), ("valid", a.valid), ("test", a.test)):
        rows = generate(rng, count, seen, a)
        path = os.path.join(a.output, name + ".tsv")
        with open(path + ".tmp", "w") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{text}\t{label}\n" for text, label in rows)
        os.replace(path + ".tmp", path)
        print(f"{path}: {count} examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
