#!/usr/bin/env python3
"""In-context evaluation against lm-evaluation-harness (the pinned lm-eval).

  icl_parity.py --bin BIN_DIR --work DIR [--model hf|lmkit]

hf: a small random GPT2LMHeadModel with a byte-level BPE tokenizer trained here (HF's
tokenizers) on the bundled WikiText-2 sample, saved with save_pretrained; lmkit: a GPT
that lmkit-pretrain trained for two steps (its own tokenizer). Both have 64 positions,
so that 3-shot contexts are left-truncated. For each fixture task (tests/fixtures/icl:
multiple choice, schema, completion, LAMBADA's text) and 0 and 3 shots, lm-eval runs a
local custom task (YAML over the JSONL, no hub) with log_samples, and lmkit-evaluate
scores the same file: every log-likelihood within 1e-4, every greedy flag, and every
accuracy (acc, acc_norm) equal.
Exits 0 on agreement, 1 on a mismatch, 77 when lm_eval is not importable.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import torch
    import transformers
    import lm_eval
    from lm_eval.tasks import TaskManager
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as e:
    print(f"skipped: needs lm_eval, transformers and tokenizers in this Python ({e})")
    sys.exit(77)

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(SOURCE, "tests", "fixtures", "icl")
SAMPLE = os.path.join(SOURCE, "data", "wikitext-2-sample", "valid.txt")
TOLERANCE = 1e-4

# fixture -> lm-eval task config (the templates render the fields verbatim; Jinja keeps trailing newlines)
TASKS = {
    "multiple_choice": {"output_type": "multiple_choice", "doc_to_text": "{{query}}", "doc_to_choice": "{{choices}}",
                        "doc_to_target": "{{gold}}", "metrics": ["acc", "acc_norm"]},
    "schema": {"output_type": "multiple_choice", "doc_to_text": "{{gold}}", "doc_to_choice": "{{context_options}}",
               "doc_to_target": "{{continuation}}", "metrics": ["acc"]},
    # lm-eval's loglikelihood requests take the target as it renders (no target_delimiter): the space goes there.
    "completion": {"output_type": "loglikelihood", "doc_to_text": "{{context}}", "doc_to_target": "{{' '+continuation}}",
                   "target_delimiter": "", "metrics": ["perplexity", "acc"]},
    "lambada": {"output_type": "loglikelihood", "doc_to_text": "{{text.split(' ')[:-1]|join(' ')}}",
                "doc_to_target": "{{' '+text.split(' ')[-1]}}", "target_delimiter": "", "metrics": ["perplexity", "acc"]},
}


def hf_model(work):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train([SAMPLE], trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = os.path.join(work, "hf")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.save_pretrained(path)
    eos = fast.convert_tokens_to_ids("<|endoftext|>")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(fast), n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                     bos_token_id=eos, eos_token_id=eos)
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    return path


def lmkit_model(bin_dir, work):
    preset = os.path.join(work, "gpt.json")
    with open(preset, "w") as f:
        json.dump({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64}, f)
    out = os.path.join(work, "pretrain")
    subprocess.run([os.path.join(bin_dir, "lmkit-pretrain"), "--model", preset, "--train", SAMPLE, "--output", out,
                    "--vocab-size", "600", "--steps", "2", "--batch-size", "4", "--seq-len", "32", "--threads", "1",
                    "--seed", "3"], check=True, capture_output=True)
    return os.path.join(out, "final")


def write_tasks(work):
    folder = os.path.join(work, "tasks")
    os.makedirs(folder)
    for name, t in TASKS.items():
        lines = [f"task: lmkit_{name}", "dataset_path: json",
                 f"dataset_kwargs:\n  data_files:\n    test: {os.path.join(FIXTURES, name + '.jsonl')}",
                 "test_split: test", "fewshot_split: test", f"output_type: {t['output_type']}",
                 f"doc_to_text: {json.dumps(t['doc_to_text'])}", f"doc_to_target: {json.dumps(t['doc_to_target'])}",
                 f"target_delimiter: {json.dumps(t.get('target_delimiter', ' '))}", 'fewshot_delimiter: "\\n"',
                 "metric_list:"] + [f"  - metric: {m}" for m in t["metrics"]]
        if "doc_to_choice" in t:
            lines.insert(-1 - len(t["metrics"]), f"doc_to_choice: {json.dumps(t['doc_to_choice'])}")
        with open(os.path.join(folder, f"lmkit_{name}.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return folder


def compare(name, shots, harness, lmkit, failures):
    samples = sorted(harness["samples"][f"lmkit_{name}"], key=lambda s: s["doc_id"])
    ours = [json.loads(line) for line in open(lmkit["predictions"])]
    worst, pairs = 0.0, 0
    if len(samples) != len(ours):
        failures.append(f"{name} {shots}-shot: {len(samples)} lm-eval samples, {len(ours)} lmkit lines")
        return worst, pairs
    for s, o in zip(samples, ours):
        resps = [r[0] for r in s["resps"]]  # (loglikelihood, is_greedy) per request
        for k, (ll, greedy) in enumerate(resps):
            diff = abs(ll - o["loglikelihoods"][k])
            worst, pairs = max(worst, diff), pairs + 1
            if diff > TOLERANCE or bool(greedy) != o["greedy"][k]:
                failures.append(f"{name} {shots}-shot example {s['doc_id']} pair {k}: lm-eval ({ll:.6f}, {greedy}) "
                                f"lmkit ({o['loglikelihoods'][k]:.6f}, {o['greedy'][k]})")
    res = harness["results"][f"lmkit_{name}"]
    r = json.load(open(lmkit["result"]))
    checks = [("acc,none", "accuracy")] + ([("acc_norm,none", "accuracy_norm")] if name == "multiple_choice" else [])
    checks += [("perplexity,none", "perplexity")] if TASKS[name]["output_type"] == "loglikelihood" else []
    for theirs, mine in checks:
        same = abs(res[theirs] - r[mine]) <= (1e-4 * r[mine] if mine == "perplexity" else 1e-12)
        if not same:
            failures.append(f"{name} {shots}-shot: lm-eval {theirs} {res[theirs]} lmkit {mine} {r[mine]}")
    return worst, pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--model", nargs="+", choices=["hf", "lmkit"], default=["hf"],
                    help="the checkpoints compared, in one process (lm_eval imports once): WORK/MODEL each")
    a = ap.parse_args()
    torch.set_num_threads(1)
    shutil.rmtree(a.work, ignore_errors=True)
    failures = []
    for model in a.model:
        failures += compare_model(model, a.bin, os.path.join(a.work, model))
    for f in failures[:20]:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


def compare_model(model, bin_dir, work):
    os.makedirs(work)
    ckpt = hf_model(work) if model == "hf" else lmkit_model(bin_dir, work)
    manager = TaskManager(include_path=write_tasks(work))
    failures, worst, pairs = [], 0.0, 0
    for shots in (0, 3):
        harness = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={ckpt},dtype=float32", device="cpu",
                                          tasks=[f"lmkit_{n}" for n in TASKS], num_fewshot=shots, batch_size=4,
                                          task_manager=manager, log_samples=True, fewshot_random_seed=1234)
        for name in TASKS:
            out = {"result": os.path.join(work, f"{name}-{shots}.json"),
                   "predictions": os.path.join(work, f"{name}-{shots}.jsonl")}
            metric = "completion" if TASKS[name]["output_type"] == "loglikelihood" else "multiple-choice"
            subprocess.run([os.path.join(bin_dir, "lmkit-evaluate"), "--checkpoint", ckpt, "--metric", metric, "--data",
                            os.path.join(FIXTURES, name + ".jsonl"), "--shots", str(shots), "--output", out["result"],
                            "--predictions", out["predictions"], "--threads", "1", "--batch-size", "3"],
                           check=True, capture_output=True)
            w, p = compare(name, shots, harness, out, failures)
            worst, pairs = max(worst, w), pairs + p
    print(f"lm-eval {lm_eval.__version__} vs lmkit-evaluate ({model} checkpoint): {pairs} log-likelihoods over "
          f"{len(TASKS)} tasks x 0/3 shots, worst |diff| {worst:.2e}")
    return failures


if __name__ == "__main__":
    main()
