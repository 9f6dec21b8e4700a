#!/usr/bin/env python3
"""Finetuning data as the Hub ships it: Parquet written by the reference writer (HF datasets'
to_parquet, with ClassLabel features as GLUE's and CoNLL-2003's conversions carry them) finetunes
and evaluates exactly as the same rows as JSONL (CTest "parquet: finetuning data ..."): SST-2
classification with integer ClassLabel ids, token classification whose integer tags are named by
the file's own ClassLabel names (in another order than the sorted tags), evaluation on a Parquet
dev set, SQuAD v2.0 as squad_v2's rows (Parquet, and to_json's JSON lines) as its SQuAD JSON;
and a test split's hidden labels (-1) are one error naming the row."""
import hashlib
import json
import os
import subprocess
import sys

import datasets

from checks import arguments, check, status


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    a = arguments()
    w = lambda *names: os.path.join(a.work, *names)
    app = lambda name, *args: subprocess.run([os.path.join(a.bin, name), *args], capture_output=True, text=True)
    datasets.disable_progress_bars()

    r = app("lmkit-pretrain", "--model", os.path.join(a.source, "models", "bert-tiny.json"), "--train",
            os.path.join(a.source, "data", "wikitext-2-sample", "valid.txt"), "--output", w("bert"), "--steps", "1",
            "--batch-size", "2", "--seq-len", "32", "--vocab-size", "1000", "--threads", "1")
    check(r.returncode == 0, f"a tiny BERT to finetune ({r.stderr[-300:]})")

    # SST-2 as the Hub's glue/sst2 Parquet: sentence, label (ClassLabel negative/positive), idx.
    def sst2(split, n):
        rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(a.source, "data", "sst2-sample", split + ".tsv"),
                                                         encoding="utf-8")][1:n + 1]
        return {"sentence": [r[0] for r in rows], "label": [int(r[1]) for r in rows], "idx": list(range(len(rows)))}

    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["negative", "positive"]),
                                  "idx": datasets.Value("int32")})
    for split, n in (("train", 48), ("dev", 32)):
        d = sst2(split, n)
        datasets.Dataset.from_dict(d, features=features).to_parquet(w(f"sst2-{split}-00000-of-00001.parquet"))
        datasets.Dataset.from_dict(d, features=features).to_json(w(f"sst2-{split}.json"))  # JSON lines, named .json
        with open(w(f"sst2-{split}.jsonl"), "w", encoding="utf-8") as f:
            for s, l, i in zip(d["sentence"], d["label"], d["idx"]):
                f.write(json.dumps({"sentence": s, "label": l, "idx": i}) + "\n")
    runs = {}
    for kind, train, dev in (("parquet", "sst2-train-00000-of-00001.parquet", "sst2-dev-00000-of-00001.parquet"),
                             ("jsonl", "sst2-train.jsonl", "sst2-dev.jsonl"),
                             ("to_json", "sst2-train.json", "sst2-dev.json")):
        r = app("lmkit-finetune", "--checkpoint", w("bert", "final"), "--train", w(train), "--dev", w(dev), "--output",
                w("sst2-" + kind), "--epochs", "1", "--batch-size", "8", "--max-length", "32", "--threads", "1")
        check(r.returncode == 0, f"SST-2 finetunes from {kind} ({r.stderr[-400:]})")
        r = app("lmkit-evaluate", "--checkpoint", w("sst2-" + kind, "best"), "--metric", "classification", "--data",
                w(dev), "--output", w(f"sst2-{kind}.json"))
        check(r.returncode == 0, f"and evaluates on its {kind} dev set ({r.stderr[-400:]})")
        runs[kind] = r.returncode == 0 and (digest(w("sst2-" + kind, "best", "model.safetensors")),
                                            json.load(open(w(f"sst2-{kind}.json")))["accuracy"])
    check(runs["parquet"] and runs["parquet"] == runs["jsonl"] and runs["to_json"] == runs["jsonl"],
          f"Parquet, JSONL and to_json's .json: the same finetuned weights and dev accuracy {runs}")

    # GLUE's test splits hide their labels as -1: no class of its own, an error naming the row.
    hidden = sst2("dev", 4)
    hidden["label"] = [-1] * 4
    datasets.Dataset.from_dict(hidden, features=features).to_parquet(w("sst2-test.parquet"))
    r = app("lmkit-evaluate", "--checkpoint", w("sst2-parquet", "best"), "--metric", "classification", "--data",
            w("sst2-test.parquet"), "--output", w("test.json"))
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "sst2-test.parquet: row 1: label -1, a ClassLabel's 'no label'" in lines[0],
          f"hidden test labels: exit {r.returncode}, {r.stderr.strip()[-300:]}")

    # CoNLL-2003 as the Hub's Parquet: tokens, ner_tags as ClassLabel ids in CoNLL-2003's own order.
    sentences, words, tags = [], [], []
    for line in open(os.path.join(a.source, "tests", "fixtures", "ner", "train.conll"), encoding="utf-8"):
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if words:
                sentences.append((words, tags))
            words, tags = [], []
            continue
        words.append(parts[0])
        tags.append(parts[-1])
    if words:
        sentences.append((words, tags))
    sentences = sentences[:40]
    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    check(all(t in names for _, ts in sentences for t in ts) and sorted(names) != names,
          f"{len(sentences)} tagged sentences, their tags among CoNLL-2003's names (which are not in sorted order)")
    ner_features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                      "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names))})
    datasets.Dataset.from_dict({"tokens": [s[0] for s in sentences], "ner_tags": [[names.index(t) for t in s[1]] for s in sentences]},
                               features=ner_features).to_parquet(w("ner.parquet"))
    datasets.Dataset.from_dict({"tokens": [s[0] for s in sentences], "ner_tags": [[names.index(t) for t in s[1]] for s in sentences]},
                               features=ner_features).to_json(w("ner.json"))  # ids without their names: --label-names
    with open(w("names.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(names) + "\n")
    with open(w("ner.jsonl"), "w", encoding="utf-8") as f:
        for ws, ts in sentences:
            f.write(json.dumps({"tokens": ws, "ner_tags": ts}) + "\n")
    ner = {}
    for kind in ("parquet", "jsonl", "json"):
        names_flag = ["--label-names", w("names.txt")] if kind == "json" else []
        r = app("lmkit-finetune", "--checkpoint", w("bert", "final"), "--task", "token-classification", "--train",
                w("ner." + kind), "--dev", w("ner." + kind), "--label-column", "ner_tags", "--output", w("ner-" + kind), "--epochs", "1",
                "--batch-size", "8", "--max-length", "32", "--threads", "1", *names_flag)
        check(r.returncode == 0, f"NER finetunes from {kind} ({r.stderr[-400:]})")
        ner[kind] = r.returncode == 0 and (digest(w("ner-" + kind, "best", "model.safetensors")),
                                           json.load(open(w("ner-" + kind, "best", "config.json")))["id2label"])
    check(ner["parquet"] and ner["parquet"] == ner["jsonl"] and ner["json"] == ner["jsonl"],
          "Parquet's ClassLabel ids named by its own names, to_json's by --label-names: the weights and labels of the JSONL's tag strings")
    # SQuAD v2.0 as the Hub's squad_v2 Parquet and as to_json's JSON lines (named dev.json, as it writes them):
    # rows of id, title, context, question, answers {text, answer_start}; no answer for an unanswerable one.
    squad_features = datasets.Features({
        "id": datasets.Value("string"), "title": datasets.Value("string"), "context": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answers": datasets.Sequence({"text": datasets.Value("string"), "answer_start": datasets.Value("int32")})})
    for split in ("train", "dev"):
        squad = json.load(open(os.path.join(a.source, "tests", "fixtures", "squad", split + ".json"), encoding="utf-8"))
        rows = {k: [] for k in squad_features}
        for article in squad["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    answers = [] if qa.get("is_impossible") else qa["answers"]
                    for k, v in (("id", qa["id"]), ("title", article.get("title", "")), ("context", paragraph["context"]),
                                 ("question", qa["question"]), ("answers", {"text": [x["text"] for x in answers],
                                                                           "answer_start": [x["answer_start"] for x in answers]})):
                        rows[k].append(v)
        rows_set = datasets.Dataset.from_dict(rows, features=squad_features)
        rows_set.to_parquet(w(f"squad-{split}.parquet"))
        os.makedirs(w("rows"), exist_ok=True)
        rows_set.to_json(w("rows", f"{split}.json"))
    qa = {}
    for kind, train, dev in (("json", os.path.join(a.source, "tests", "fixtures", "squad", "train.json"),
                              os.path.join(a.source, "tests", "fixtures", "squad", "dev.json")),
                             ("parquet", w("squad-train.parquet"), w("squad-dev.parquet")),
                             ("rows", w("rows", "train.json"), w("rows", "dev.json"))):
        r = app("lmkit-finetune", "--checkpoint", w("bert", "final"), "--task", "question-answering", "--train", train,
                "--dev", dev, "--output", w("qa-" + kind), "--epochs", "1", "--batch-size", "8", "--max-length", "96",
                "--doc-stride", "16", "--threads", "1")
        check(r.returncode == 0, f"SQuAD v2.0 finetunes from {kind} ({r.stderr[-400:]})")
        r2 = app("lmkit-evaluate", "--checkpoint", w("qa-json", "best"), "--metric", "squad", "--data", dev,
                 "--output", w(f"qa-{kind}.json"))
        check(r2.returncode == 0, f"and the JSON's checkpoint evaluates on its {kind} dev set ({r2.stderr[-400:]})")
        if r.returncode == 0 and r2.returncode == 0:
            result = json.load(open(w(f"qa-{kind}.json")))
            qa[kind] = (digest(w("qa-" + kind, "best", "model.safetensors")),
                        {k: result[k] for k in ("exact_match", "f1", "total", "squad_version", "NoAns_total")})
    check(len(qa) == 3 and qa["parquet"] == qa["json"] and qa["rows"] == qa["json"],
          f"SQuAD's JSON, the Hub's Parquet and to_json's rows: the same weights and dev scores {qa}")
    return status()


if __name__ == "__main__":
    sys.exit(main())
