#!/usr/bin/env python3
"""Text-to-text metric parity with the reference libraries.

  generation_metrics.py cases --out CASES.json [--seed N] [--sets N] [--run LMKIT_TESTS]
      Draws sets of (prediction, reference) pairs — crafted edge cases first, then
      random word sequences with casing, punctuation, articles, digits, non-ASCII
      letters and typographic quotes — and writes, per pair, SQuAD v1.1's exact match
      and F1 (its official evaluate script's formulas, below) and rouge-score's
      ROUGE-1/2/L precision, recall and F-measure (default tokenizer, without and with
      its Porter stemmer), and per set sacreBLEU's corpus BLEU; and beside it,
      CASES.porter.json, NLTK's Porter stems of words drawn as `stems` draws them. With
      --run, runs `LMKIT_TESTS "[genmetrics]"` with LMKIT_GENERATION_CASES=CASES.json
      and LMKIT_PORTER_CASES=CASES.porter.json, which compares lmkit's metrics and
      stemmer to every figure. tests/fixtures/generation/cases.json is
      `cases --seed 1 --sets 40` (its porter.json is `stems --seed 1`).
  generation_metrics.py stems --out FILE [--seed N] [--words N]
      NLTK's PorterStemmer() (rouge-score's use_stemmer) on every word of the bundled
      WikiText-2 sample that rouge-score's tokenizer keeps, and on N made-up words:
      roots with each rule's suffixes, y runs and the irregular forms.
  generation_metrics.py check --result RESULT.json --predictions FILE --references FILE
      The figures lmkit-evaluate --metric generation wrote in RESULT.json against the
      libraries' on its predictions (one per line) and the references.
  generation_metrics.py real --bin BIN_DIR --work DIR
      Real outputs: a small T5 finetuned for eight epochs (random init, a tokenizer
      trained on the bundled WikiText-2 sample) on the made-up summary fixture
      (tests/fixtures/seq2seq/summary_*.tsv), lmkit-evaluate on its dev set, then
      `check` on what it wrote.

Exits 0 on agreement, 1 on a mismatch, 77 (CTest: skipped) when sacrebleu or
rouge-score is not importable.
"""
import argparse
import collections
import json
import os
import random
import re
import string
import subprocess
import sys

try:
    import sacrebleu
    from rouge_score import rouge_scorer
except ImportError as e:
    print(f"skipped: sacrebleu and rouge-score are not importable ({e})")
    sys.exit(77)


# SQuAD v1.1's official evaluate-v1.1.py (squad_official.py, shared with squad_cases.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from squad_official import exact_match_score as squad_exact_match, f1_score_v1 as squad_f1  # noqa: E402


SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
STEMMING_SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def pair_figures(prediction, reference):
    out = {"exact_match": float(squad_exact_match(prediction, reference)), "f1": float(squad_f1(prediction, reference))}
    for k, v in SCORER.score(reference, prediction).items():  # score(target, prediction)
        out[k] = [v.precision, v.recall, v.fmeasure]
    for k, v in STEMMING_SCORER.score(reference, prediction).items():
        out[k + "_stemmed"] = [v.precision, v.recall, v.fmeasure]
    return out


def corpus_figures(predictions, references, stemmed=False):
    """What lmkit's generation_scores reports (0-100): corpus BLEU, the other figures averaged."""
    n = len(predictions)
    pairs = [pair_figures(p, r) for p, r in zip(predictions, references)]
    out = {"bleu": sacrebleu.corpus_bleu(predictions, [references]).score}
    for k in ("exact_match", "f1"):
        out[k] = 100.0 * sum(x[k] for x in pairs) / n
    for k in ("rouge1", "rouge2", "rougeL"):
        out[k] = 100.0 * sum(x[k + ("_stemmed" if stemmed else "")][2] for x in pairs) / n
    return out


SUFFIXES = ["ational", "tional", "enci", "anci", "izer", "bli", "abli", "alli", "entli", "eli", "ousli", "ization",
            "ation", "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "fulli", "logi", "icate",
            "ative", "alize", "iciti", "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able", "ible", "ant",
            "ement", "ment", "ent", "sion", "tion", "ou", "ism", "ate", "iti", "ous", "ive", "ize", "e", "ll", "ies",
            "ied", "sses", "ss", "s", "ed", "ing", "eed", "y", "yy", "ly", "ing", "ings", "edly", "iness", "ably", ""]
IRREGULAR = ["sky", "skies", "dying", "lying", "tying", "news", "innings", "inning", "outings", "outing", "cannings",
             "canning", "howe", "proceed", "exceed", "succeed", "yyyy", "ayyy", "syzygy", "toy", "ies", "ied", "tied",
             "cries", "agreed", "feed", "bled", "sing", "hopping", "falling", "hissing", "fizzed", "failing", "filing",
             "controll", "roll", "happy", "generalizations", "oscillators", "analogousli", "archaeology", "a", "is",
             "as", "ye", "yo", "xyz", "1984", "b2b", "mp3s"]


def porter_words(rng, n):
    """Every token of the bundled WikiText-2 sample (rouge-score's tokenizer) and n made-up words."""
    from rouge_score import tokenize
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(source, "data", "wikitext-2-sample", "valid.txt"), encoding="utf-8") as f:
        words = set(tokenize.tokenize(f.read(), None))
    roots = sorted(w for w in words if w.isalpha())
    words.update(IRREGULAR)
    for _ in range(n):
        root = rng.choice(roots)[: rng.randint(1, 8)] if rng.random() < 0.7 else "".join(
            rng.choice("aeiouybcdlmnrstyy") for _ in range(rng.randint(1, 7)))
        words.add(root + rng.choice(SUFFIXES) + (rng.choice(SUFFIXES) if rng.random() < 0.3 else ""))
    return sorted(words)


def porter_cases(seed, n):
    from nltk.stem import porter
    import nltk
    stemmer = porter.PorterStemmer()
    return {"nltk": nltk.__version__, "stems": {w: stemmer.stem(w) for w in porter_words(random.Random(seed), n)}}


def stems(a):
    cases = porter_cases(a.seed, a.words)
    with open(a.out, "w") as f:
        json.dump(cases, f, indent=0, sort_keys=True)
    print(f"{len(cases['stems'])} Porter stems (NLTK {cases['nltk']}) written to {a.out}")


WORDS = ["the", "a", "an", "The", "cat", "Cat", "sat", "on", "mat", "dog", "ran", "far", "away", "in", "Paris", "1984",
         "3.5", "U.S.", "don't", "it's", "café", "Straße", "naïve", "Ⅻ", "“quoted”", "‘so’", "—", "(see", "below)", "and",
         "an-", "the-end", "A.", "x", "rock'n'roll", "#1", "$5", "50%", "e-mail", "ÉCOLE", "KELVIN", "İstanbul", "theme",
         "anthem", "_the_", "then", "a,b", "&", "...", "?", "!"]
CRAFTED = [
    ("", ""), ("", "the cat"), ("the cat", ""), ("The Cat!", "the cat"), ("a cat", "the cat"), ("the", "an"),
    ("cat sat", "sat cat"), ("the cat sat on the mat", "the cat sat on the mat"),
    ("the cat the cat the cat", "the cat"), ("café", "cafe"), ("Straße", "strasse"), ("İstanbul", "istanbul"),
    ("KELVIN", "kelvin"), ("don't stop", "dont stop"), ("“the” end", "end"), ("an-apple", "apple"), ("1984 2", "1984"),
    ("positive", "positive"), ("positive", "negative"), ("  spaced   out  ", "spaced out"),
    ("a b c d e f", "a b c d e f g"), ("the quick brown fox jumps", "quick brown the fox jumps over"),
]


def random_text(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14)))


def random_pair(rng):
    ref = random_text(rng)
    if rng.random() < 0.6:  # a prediction near the reference, so that n-grams match
        words = ref.split()
        pred = " ".join(w if rng.random() < 0.75 else rng.choice(WORDS) for w in words if rng.random() < 0.9)
    else:
        pred = random_text(rng)
    return pred, ref


def make_set(rng, crafted):
    pairs = list(crafted) if crafted else [random_pair(rng) for _ in range(rng.randint(1, 12))]
    predictions, references = [p for p, _ in pairs], [r for _, r in pairs]
    return {"predictions": predictions, "references": references,
            "pairs": [pair_figures(p, r) for p, r in pairs],
            "bleu": sacrebleu.corpus_bleu(predictions, [references]).score,
            "corpus": corpus_figures(predictions, references)}


def cases(a):
    rng = random.Random(a.seed)
    sets = [make_set(rng, CRAFTED)] + [make_set(rng, None) for _ in range(a.sets - 1)]
    with open(a.out, "w") as f:
        json.dump(sets, f, ensure_ascii=False)
    print(f"{len(sets)} generation-metric sets ({sum(len(s['pairs']) for s in sets)} pairs) written to {a.out}")
    porter_out = os.path.splitext(a.out)[0] + ".porter.json"
    a_stems = argparse.Namespace(out=porter_out, seed=a.seed, words=4000)
    stems(a_stems)
    if a.run:
        env = {**os.environ, "LMKIT_GENERATION_CASES": a.out, "LMKIT_PORTER_CASES": porter_out}
        r = subprocess.run([a.run, "[genmetrics]"], env=env)
        sys.exit(r.returncode)


def check(a):
    result = json.load(open(a.result))
    with open(a.predictions, encoding="utf-8") as f:
        predictions = f.read().split("\n")[:-1]
    with open(a.references, encoding="utf-8") as f:
        references = f.read().split("\n")[:-1]
    assert len(predictions) == len(references) == result["examples"], (len(predictions), len(references))
    want = corpus_figures(predictions, references, stemmed=result.get("rouge_stemmer", False))
    print(f"ROUGE {'with' if result.get('rouge_stemmer', False) else 'without'} the Porter stemmer")
    bad = 0
    for k, v in want.items():
        ok = abs(result[k] - v) <= 1e-9 * max(1.0, abs(v))
        bad += not ok
        print(f"{k:12s} lmkit {result[k]:.10f}  reference {v:.10f}  {'ok' if ok else 'MISMATCH'}")
    print(f"{len(predictions)} predictions; {sum(p == r for p, r in zip(predictions, references))} equal to their reference")
    sys.exit(1 if bad else 0)


def real(a):
    import shutil
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    fixture = os.path.join(source, "tests", "fixtures", "seq2seq")
    preset = os.path.join(a.work, "t5.json")
    with open(preset, "w") as f:
        json.dump({"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
                   "num_heads": 4, "feed_forward_proj": "relu", "tie_word_embeddings": True}, f)

    def run(*cmd):
        r = subprocess.run([os.path.join(a.bin, cmd[0]), *cmd[1:], "--threads", "1"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")

    tok = os.path.join(a.work, "tok.model")
    run("lmkit-tokenize", "train", "--input", os.path.join(source, "data", "wikitext-2-sample", "valid.txt"),
        "--vocab-size", "1000", "--family", "t5", "--output", tok)
    dev = os.path.join(fixture, "summary_dev.tsv")
    run("lmkit-finetune", "--task", "seq2seq", "--init", "random", "--model", preset, "--tokenizer", tok, "--train",
        os.path.join(fixture, "summary_train.tsv"), "--dev", dev, "--output", os.path.join(a.work, "ft"), "--epochs", "8",
        "--lr", "3e-3", "--batch-size", "16", "--max-length", "48", "--max-target-length", "16", "--seed", "1")
    a.result, a.predictions = os.path.join(a.work, "eval.json"), os.path.join(a.work, "predictions.txt")
    run("lmkit-evaluate", "--checkpoint", os.path.join(a.work, "ft", "best"), "--data", dev, "--metric", "generation",
        "--output", a.result, "--predictions", a.predictions)
    a.references = os.path.join(a.work, "references.txt")
    with open(dev) as f, open(a.references, "w") as out:
        out.writelines(line.rstrip("\n").split("\t")[1] + "\n" for line in list(f)[1:])
    try:
        check(a)
    except SystemExit as e:
        if e.code:
            raise
    # The same outputs with rouge-score's stemmer.
    a.result = os.path.join(a.work, "eval-stemmed.json")
    run("lmkit-evaluate", "--checkpoint", os.path.join(a.work, "ft", "best"), "--data", dev, "--metric", "generation",
        "--output", a.result, "--rouge-stemmer")
    check(a)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cases")
    c.add_argument("--out", required=True)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--sets", type=int, default=40)
    c.add_argument("--run", help="lmkit_tests binary to check the cases with")
    k = sub.add_parser("check")
    k.add_argument("--result", required=True)
    k.add_argument("--predictions", required=True)
    k.add_argument("--references", required=True)
    p = sub.add_parser("stems")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--words", type=int, default=2000)
    r = sub.add_parser("real")
    r.add_argument("--bin", required=True)
    r.add_argument("--work", required=True)
    a = ap.parse_args()
    {"cases": cases, "check": check, "real": real, "stems": stems}[a.command](a)


if __name__ == "__main__":
    main()
