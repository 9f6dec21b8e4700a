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
`sentence<TAB>label`, then one example a line); files of those names already in DIR are replaced only
with --overwrite. A window no tree can reach (e.g. --max-depth 1 with the default 500 minimum) is
refused before anything is drawn, and 2,000,000 draws in a row without a new example stop the script
with an error instead of looping forever.
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


def reachable_lengths(max_depth, max_args, limit):
    """Every LRA length below `limit` a tree can have (bit n set), depth by depth from the leaves up."""
    mask = (1 << limit) - 1
    below = 1 << 1  # at max_depth: a digit
    for _ in range(max_depth - 1):
        sums, total = 1, 0  # sums: the lengths k subtrees can add up to (k = 0 first)
        for k in range(1, max_args + 1):
            nxt = 0
            rest = below
            while rest:  # sums + each subtree length
                n = (rest & -rest).bit_length() - 1
                nxt |= sums << n
                rest &= rest - 1
            sums = nxt & mask
            if k >= 2:
                total |= sums
        below = ((total << 2) | (1 << 1)) & mask
    return below


def check_window(a):
    """An error line when no tree can fall strictly between --min-length and --max-length."""
    lengths = reachable_lengths(a.max_depth, a.max_args, a.max_length)
    if lengths >> (a.min_length + 1) == 0:
        return (f"error: no ListOps tree of --max-depth {a.max_depth} and --max-args {a.max_args} has a length "
                f"strictly between --min-length {a.min_length} and --max-length {a.max_length}: widen the window or "
                f"raise --max-depth / --max-args")
    return None


MAX_MISSES = 2_000_000  # draws in a row without a new example before the window is called too narrow


def generate(rng, count, seen, a):
    out, misses = [], 0
    while len(out) < count:
        if misses >= MAX_MISSES:
            print(f"error: {MAX_MISSES:,} draws in a row gave no new example between --min-length "
                             f"{a.min_length} and --max-length {a.max_length} ({len(out)} of {count} made): "
                  f"widen the window, raise --max-depth, or ask for fewer examples", file=sys.stderr)
            sys.exit(2)
        misses += 1
        tree, length = grow(rng, 1, a.max_depth, a.max_args)
        if not a.min_length < length < a.max_length:
            continue
        text = text_of(tree, not a.no_parens)
        if text in seen:
            continue
        seen.add(text)
        misses = 0
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
    # The window check: lengths a tree can reach, against brute force over small trees.
    assert reachable_lengths(1, 10, 50) == 1 << 1  # depth 1: a digit only
    assert reachable_lengths(2, 3, 50) == (1 << 1) | (1 << 4) | (1 << 5)  # a digit, or an operator over 2-3 digits
    narrow = argparse.Namespace(max_depth=1, max_args=10, min_length=500, max_length=2000)
    assert check_window(narrow) and check_window(argparse.Namespace(max_depth=10, max_args=10, min_length=1,
                                                                     max_length=3))
    assert check_window(argparse.Namespace(max_depth=10, max_args=10, min_length=500, max_length=2000)) is None
    print("ok: ListOps evaluates as specified, a seed gives the same examples, lengths and labels in range, "
          "an unreachable window is refused")


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one error line and exit 2, not argparse's usage block
        print(f"error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def main():
    ap = Parser(description=__doc__.split("\n")[0])
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
    ap.add_argument("--overwrite", action="store_true", help="replace train.tsv, valid.tsv, test.tsv already in --output")
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
    window = check_window(a)
    if window:
        print(window, file=sys.stderr)
        return 2
    if os.path.exists(a.output) and not os.path.isdir(a.output):
        print(f"error: --output {a.output} is a file, not a folder", file=sys.stderr)
        return 2
    present = [n + ".tsv" for n in ("train", "valid", "test") if os.path.exists(os.path.join(a.output, n + ".tsv"))]
    if present and not a.overwrite:
        print(f"error: --output {a.output} already holds {', '.join(present)}: pass --overwrite to replace them",
              file=sys.stderr)
        return 2
    os.makedirs(a.output, exist_ok=True)
    rng, seen = random.Random(a.seed), set()
    splits = [(name, generate(rng, count, seen, a)) for name, count in
              (("train", a.train), ("valid", a.valid), ("test", a.test))]  # all drawn before any file is written
    for name, rows in splits:
        count = len(rows)
        path = os.path.join(a.output, name + ".tsv")
        with open(path + ".tmp", "w") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{text}\t{label}\n" for text, label in rows)
        os.replace(path + ".tmp", path)
        print(f"{path}: {count} examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
