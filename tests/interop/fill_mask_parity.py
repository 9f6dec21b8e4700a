#!/usr/bin/env python3
"""lmkit-generate --fill-mask against transformers' pipeline("fill-mask"), on a checkpoint
lmkit pretrains here (a few steps on the bundled WikiText-2 sample, so the distribution at a
mask is not flat), loaded by both as it is: the same top-k tokens in the same order, each
probability within 1e-5, the same token strings, and for a text with one mask the same
filled sequence.

Then lmkit-evaluate --metric cloze on data/cloze/probes.tsv against the same figures computed
here from transformers' model and tokenizer (LAMA's rule: an answer must be one token, as in
running text after a space; the rank of its token among the mask's probabilities): the same
probes scored and skipped, and precision@1, precision@10 and MRR within 1e-9.

  fill_mask_parity.py FAMILY --bin BIN_DIR --work DIR     (FAMILY: bert or roberta)

Exits 0 on agreement, 1 on a mismatch, 77 (CTest: skipped) without transformers.
"""
import argparse, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "data", "wikitext-2-sample")
TOLERANCE = 1e-5

try:
    import transformers
    from transformers import pipeline
except ImportError as e:
    print(f"skipped: the fill-mask reference needs transformers ({e})")
    sys.exit(77)

TEXTS = ["The game [MASK] in the city .", "He was born in [MASK] and played for the club .",
         "The [MASK] began in [MASK] of that year ."]


def cloze(a, ckpt, fill):
    import torch
    probes = os.path.join(ROOT, "data", "cloze", "probes.tsv")
    out = os.path.join(a.work, "cloze.json")
    subprocess.run([os.path.join(a.bin, "lmkit-evaluate"), "--checkpoint", ckpt, "--metric", "cloze", "--data", probes,
                    "--output", out, "--threads", "1", "--overwrite"], check=True, capture_output=True)
    ours = json.load(open(out))
    tok, model = fill.tokenizer, fill.model.eval()
    ranks, skipped = [], 0
    prefix = tok.encode("a", add_special_tokens=False)
    for line in open(probes, encoding="utf-8").read().splitlines()[1:]:
        template, answer = line.split("\t")
        pieces = tok.encode("a " + answer, add_special_tokens=False)
        if len(pieces) != len(prefix) + 1:
            skipped += 1
            continue
        enc = tok(template.replace("[MASK]", tok.mask_token), return_tensors="pt")
        with torch.no_grad():
            logits = model(**enc).logits[0]
        at = (enc["input_ids"][0] == tok.mask_token_id).nonzero()[0, 0]
        probs = logits[at].softmax(-1)
        ranks.append(1 + int((probs > probs[pieces[-1]]).sum()))
    ref = {"probes": len(ranks), "skipped_multi_piece": skipped, "precision_at_1": sum(r == 1 for r in ranks) / len(ranks),
           "precision_at_10": sum(r <= 10 for r in ranks) / len(ranks), "mrr": sum(1 / r for r in ranks) / len(ranks)}
    print(f"cloze: lmkit {json.dumps({k: ours.get(k) for k in ref})}; transformers {json.dumps(ref)}")
    bad = [k for k in ref if not (abs(ours.get(k, float("nan")) - ref[k]) <= 1e-9)]
    return [f"cloze: {k} {ours.get(k)} vs transformers {ref[k]}" for k in bad]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("family", nargs="+", choices=["bert", "roberta"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    transformers.logging.set_verbosity_error()
    # Several families in one call share one import of transformers (WORK/FAMILY each).
    return max(compare(argparse.Namespace(family=family, bin=a.bin, work=os.path.join(a.work, family)))
               for family in a.family)


def compare(a):
    os.makedirs(a.work, exist_ok=True)
    cfg = {"model_type": a.family, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 128, "max_position_embeddings": 130 if a.family == "roberta" else 128}
    preset = os.path.join(a.work, "model.json")
    with open(preset, "w") as f:
        json.dump(cfg, f)
    run = os.path.join(a.work, "run")
    subprocess.run([os.path.join(a.bin, "lmkit-pretrain"), "--model", preset, "--train", os.path.join(DATA, "train.txt"),
                    "--output", run, "--objective", "mlm", "--vocab-size", "2000", "--steps", "30", "--batch-size", "16",
                    "--seq-len", "64", "--lr", "2e-3", "--warmup", "3", "--threads", "1", "--overwrite"],
                   check=True, capture_output=True)
    ckpt = os.path.join(run, "final")
    fill = pipeline("fill-mask", model=ckpt, tokenizer=ckpt, top_k=5)
    mask = fill.tokenizer.mask_token
    failures, worst = [], 0.0
    for text in TEXTS:
        text = text.replace("[MASK]", mask)
        out = subprocess.run([os.path.join(a.bin, "lmkit-generate"), "--checkpoint", ckpt, "--fill-mask", "--json",
                              "--top-k", "5", "--prompt", text, "--threads", "1"], check=True, capture_output=True, text=True)
        ours = json.loads(out.stdout.strip().splitlines()[-1])
        theirs = fill(text)
        if isinstance(theirs[0], dict):
            theirs = [theirs]
        if len(ours) != len(theirs):
            failures.append(f"{text!r}: {len(ours)} masks, HF {len(theirs)}")
            continue
        for m, (row, ref) in enumerate(zip(ours, theirs)):
            if [c["token"] for c in row] != [c["token"] for c in ref]:
                failures.append(f"{text!r} mask {m + 1}: tokens {[c['token'] for c in row]}, HF {[c['token'] for c in ref]}")
                continue
            for c, r in zip(row, ref):
                worst = max(worst, abs(c["score"] - r["score"]))
                if c["token_str"] != r["token_str"]:
                    failures.append(f"{text!r}: token_str {c['token_str']!r}, HF {r['token_str']!r}")
                if len(ours) == 1 and c["sequence"] != r["sequence"]:
                    failures.append(f"{text!r}: sequence {c['sequence']!r}, HF {r['sequence']!r}")
        print(f"{text!r}: {len(ours)} mask(s), top-5 of each: " +
              "; ".join(", ".join(f"{c['token_str']!r} {c['score']:.4f}" for c in row[:3]) for row in ours))
    failures += cloze(a, ckpt, fill)
    if worst > TOLERANCE:
        failures.append(f"probabilities differ by up to {worst:.2e}")
    print(f"{a.family}: {len(TEXTS)} texts; largest probability difference {worst:.2e}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
