#!/usr/bin/env python3
"""lmkit's TensorBoard event files read back by the tensorboard package's own reader.

  tensorboard_check.py --bin BIN_DIR --work DIR

lmkit-pretrain (a small GPT, logging every step, validating every 3) is stopped after
step 4 as if interrupted and resumed to step 8; lmkit-finetune trains a classifier for
two epochs. In each run directory, tensorboard's EventAccumulator must find one event
file whose scalars equal metrics.jsonl (every numeric field as SPLIT/KEY, at its step,
each step once: the resumed run is one curve) and the run's config as text.
Exits 0 on agreement, 1 on a mismatch, 77 when tensorboard is not importable.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"skipped: needs the tensorboard package ({e})")
    sys.exit(77)

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(SOURCE, "data", "wikitext-2-sample")


def run(bin_dir, *args):
    r = subprocess.run([os.path.join(bin_dir, args[0]), *args[1:], "--threads", "1"], capture_output=True, text=True)
    if r.returncode not in (0, 3):  # 3: stopped as if interrupted (--stop-at)
        sys.exit(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")


def flatten(prefix, record, out):
    for k, v in record.items():
        if prefix.count("/") == 0 and k in ("step", "split"):
            continue
        if isinstance(v, dict):
            flatten(f"{prefix}/{k}", v, out)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"{prefix}/{k}"] = v


def check(run_dir, failures):
    files = glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))
    if len(files) != 1:
        failures.append(f"{run_dir}: {len(files)} event files, not 1")
        return 0
    want = {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        r = json.loads(line)
        flat = {}
        flatten(r.get("split", "train"), r, flat)
        for tag, v in flat.items():
            want.setdefault(tag, []).append((r["step"], v))
    ea = EventAccumulator(run_dir, size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    tags = ea.Tags()
    if sorted(tags["scalars"]) != sorted(want):
        failures.append(f"{run_dir}: scalar tags {sorted(set(tags['scalars']) ^ set(want))} differ from metrics.jsonl")
    points = 0
    for tag, series in want.items():
        got = [(e.step, e.value) for e in ea.Scalars(tag)] if tag in tags["scalars"] else []
        expect = [(s, float(np.float32(v))) for s, v in series]
        if got != expect:
            failures.append(f"{run_dir} {tag}: TensorBoard {got[:4]}... metrics.jsonl {expect[:4]}...")
        points += len(got)
    if "config" not in tags["tensors"]:
        failures.append(f"{run_dir}: no 'config' text")
    else:
        text = ea.Tensors("config")[0].tensor_proto.string_val[0].decode()
        if json.loads(text.strip("`\n")) != json.load(open(os.path.join(run_dir, "config.json"))):
            failures.append(f"{run_dir}: the 'config' text is not config.json")
    return points


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    preset = os.path.join(a.work, "gpt.json")
    with open(preset, "w") as f:
        json.dump({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2, "n_positions": 64}, f)
    pre = os.path.join(a.work, "pretrain")
    common = ["--model", preset, "--train", os.path.join(SAMPLE, "valid.txt"), "--valid", os.path.join(SAMPLE, "valid.txt"),
              "--output", pre, "--vocab-size", "600", "--steps", "8", "--batch-size", "4", "--seq-len", "32",
              "--log-every", "1", "--eval-every", "3", "--eval-batches", "2", "--save-every", "2", "--seed", "3"]
    run(a.bin, "lmkit-pretrain", *common, "--stop-at", "4")
    run(a.bin, "lmkit-pretrain", *common, "--resume")
    ft = os.path.join(a.work, "finetune")
    with open(os.path.join(a.work, "train.tsv"), "w") as f:
        f.write("sentence\tlabel\n" + "".join(f"{w} film\t{i % 2}\n" for i, w in enumerate(["good", "bad"] * 8)))
    run(a.bin, "lmkit-finetune", "--checkpoint", os.path.join(pre, "final"), "--train", os.path.join(a.work, "train.tsv"),
        "--dev", os.path.join(a.work, "train.tsv"), "--output", ft, "--epochs", "2", "--batch-size", "4")
    failures = []
    points = check(pre, failures) + check(ft, failures)
    print(f"tensorboard event files of lmkit-pretrain (stopped at step 4, resumed to 8) and lmkit-finetune: "
          f"{points} scalar points equal to metrics.jsonl")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
