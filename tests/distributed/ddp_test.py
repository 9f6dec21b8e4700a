#!/usr/bin/env python3
"""Data-parallel training, tested on this machine over loopback with 2 processes.

  collectives      lmkit-dist-check under torchrun: all-reduce, broadcast, barrier and
                   the gradient reducer against values each rank computes alone.
  equivalence F    F = bert (MLM + NSP), gpt (causal LM), t5 (span corruption) or
                   finetune (BERT classification, a partial last batch; also its --accumulation,
                   an epoch's last step shorter, and --recompute): with dropout 0,
                   2 ranks x batch B logs the same losses (within 1e-4) and ends
                   with the same weights as 1 process x batch 2B, and as 1 process x B
                   with --accumulation 2; validation figures agree too. The ranks start as
                   srun (bert, t5) or mpirun (gpt, finetune) would start them (launch.py).
  resume           2 ranks stopped at step 4 and resumed (a restarted job, started as srun
                   would) end as an uninterrupted 2-rank run under torchrun: same losses,
                   same weights.
  nccl             where a GPU is: torchrun with 1 process on --device cuda (NCCL, world
                   size 1) trains like the same run without torchrun, and so does
                   --shard-optimizer 1, its all-gather overlapped or not, and --recompute with
                   --dtype bf16-weights (skipped without one).
  zero             (ranks started as srun would) --shard-optimizer 1 and 2 (ZeRO) against unsharded data parallelism at 2 and 3
                   ranks: losses and weights within fp32 reduction-order rounding (the largest
                   difference is printed); each rank's optimizer state is 1/N of the whole, in
                   bytes; the all-gather overlapped with the forward (20 KB buckets: each layer
                   waits for its own) equals it at the step's end, bit for bit; a stopped and
                   resumed stage-2 run ends bit for bit as an uninterrupted one; its checkpoint resumes on 3 ranks and on 1 process, each with one warning;
                   optimizers that cannot be sharded, and sharding without ranks, are refused.
  recompute        --recompute under 2 ranks, unsharded and sharded (stage 1, 2): the same losses and
                   weights as without it, bit for bit (GPT with dropout), or to rounding (Linformer's
                   projection shared by every layer); stopped and resumed, bit for bit.
  bf16-weights     --dtype bf16-weights under 2 ranks: against one process, within bf16's rounding;
                   stages 1 and 2 against unsharded; the overlapped all-gather = the step-end one and a
                   stopped and resumed stage-2 run = uninterrupted, bit for bit.
  failure          two ranks started by hand (RANK, WORLD_SIZE, MASTER_ADDR/PORT): kill -9
                   one mid-training and the other exits non-zero with one error: line
                   within the timeout; stop one (SIGSTOP) and the other gives up after
                   --dist-timeout.

Exit 0 only when every check holds; 77 (CTest: skipped) without torch/safetensors.
"""
import argparse, json, os, re, shutil, signal, subprocess, sys, time

from launch import free_port  # tests/distributed/launch.py, beside this file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "data", "wikitext-2-sample")
SST = os.path.join(ROOT, "tests", "fixtures", "text", "sst2.dev.tsv")
TOL = 1e-4
# Sharded vs unsharded: the gradient chunks are summed by reduce-scatter instead of all-reduce, and
# the clipping norm from per-rank chunk norms: fp32 rounding of the order, measured 2e-7 here.
ZERO_TOL = 1e-5

try:
    import torch
    from safetensors.torch import load_file
except ImportError as e:
    print(f"LMKIT_SKIP: {e}")
    sys.exit(77)

MODELS = {
    "bert": {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 128, "max_position_embeddings": 128,
             "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
    "gpt": {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 128,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
    # Recomputation under data parallelism: dropout on (each rank replays its own masks), and
    # Linformer's projection shared by every layer (its gradient summed over the layers first).
    "gpt-dropout": {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, "n_positions": 128,
                    "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1},
    "linformer": {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 2,
                  "intermediate_size": 128, "max_position_embeddings": 128, "hidden_dropout_prob": 0.1,
                  "attention_probs_dropout_prob": 0.0, "attention": "linformer", "linformer_k": 16,
                  "linformer_sharing": "layerwise"},
    "t5": {"model_type": "t5", "d_model": 64, "d_kv": 32, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
           "num_heads": 2, "feed_forward_proj": "relu", "tie_word_embeddings": True, "dropout_rate": 0.0},
}

failures = []


def check(ok, what, detail=""):
    """Prints the verdict; `detail` (a run's stderr) only under a failure."""
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)
        if detail:
            print(detail.strip()[-1000:], flush=True)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print("command failed:", " ".join(cmd), "\n", r.stdout[-3000:], r.stderr[-3000:], sep="")
        sys.exit(1)
    return r


def torchrun(args, nproc=2):
    beside = os.path.join(os.path.dirname(sys.executable), "torchrun")  # a venv's; else the module (a system Python)
    start = [beside] if os.path.exists(beside) else [sys.executable, "-m", "torch.distributed.run"]
    return start + ["--no-python", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
                    "--master-port", str(free_port())] + args


LAUNCHER = {"bert": "slurm", "t5": "slurm", "gpt": "openmpi", "finetune": "openmpi"}


def launch(args, nproc=2, style="slurm"):
    """The ranks started by their environment alone, as srun or mpirun would (launch.py): each
    torchrun start imports torch (~2.5 s here), and these variables are lmkit's other launch paths."""
    return [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py"), "--nproc", str(nproc),
            "--as", style, "--"] + args


def losses(run_dir, split="train"):
    out = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j.get("split") == split:
                out.append(j)
    return out


def compare_runs(a, b, label, weights="final", valid_keys=("loss",)):
    la, lb = losses(a), losses(b)
    check(len(la) == len(lb) and len(la) > 0, f"{label}: {len(la)} and {len(lb)} logged train steps")
    worst = max((abs(x["loss"] - y["loss"]) for x, y in zip(la, lb)), default=float("inf"))
    check(worst <= TOL, f"{label}: train losses agree (max |diff| {worst:.2e}, {len(la)} steps)")
    va, vb = losses(a, "valid"), losses(b, "valid")
    if va or vb:
        vworst = max((abs(x[k] - y[k]) for x, y in zip(va, vb) for k in valid_keys), default=float("inf"))
        check(len(va) == len(vb) and vworst <= TOL,
              f"{label}: validation agrees ({len(va)} evaluations, {'/'.join(valid_keys)} max |diff| {vworst:.2e})")
    wa = load_file(os.path.join(a, weights, "model.safetensors"))
    wb = load_file(os.path.join(b, weights, "model.safetensors"))
    check(wa.keys() == wb.keys(), f"{label}: same tensors in {weights}/")
    wworst = max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)
    moved = max(float((wa[k].float()).abs().max()) for k in wa)
    check(wworst <= TOL, f"{label}: same final weights (max |diff| {wworst:.2e}, weights up to {moved:.2f})")


def pretrain_args(family, work, out, batch, extra=(), train=None, valid=None):
    cfg = os.path.join(work, f"{family}.json")
    with open(cfg, "w") as f:
        json.dump(MODELS[family], f)
    args = [os.path.join(BIN, "lmkit-pretrain"), "--model", cfg, "--train", train or os.path.join(DATA, "train.txt"),
            "--valid", valid or os.path.join(DATA, "valid.txt"), "--output", out, "--steps", "8", "--batch-size", str(batch),
            "--seq-len", "64", "--lr", "1e-3", "--warmup", "2", "--log-every", "1", "--eval-every", "4",
            "--threads", "1", "--seed", "7", "--vocab-size", "1000"]
    return args + list(extra)


def equivalence(family, work):
    if family == "finetune":
        return equivalence_finetune(work)
    # GPT trains a weighted mixture: its draws must not depend on how many processes share a batch.
    train, valid = os.path.join(DATA, "train.txt"), os.path.join(DATA, "valid.txt")
    mix = {"train": f"wiki=0.6:{train},short=0.4:{valid}"} if family == "gpt" else {}
    one = os.path.join(work, "one")
    t0 = time.time()
    run(pretrain_args(family, work, one, 16, **mix))
    tok = ["--tokenizer", os.path.join(one, "tokenizer.model")]
    two = os.path.join(work, "two")
    t1 = time.time()
    run(launch(pretrain_args(family, work, two, 8, tok, **mix), style=LAUNCHER[family]))
    t2 = time.time()
    acc = os.path.join(work, "accumulate")
    run(pretrain_args(family, work, acc, 8, tok + ["--accumulation", "2"], **mix))
    print(f"       1 x 16: {t1 - t0:.1f} s, 2 x 8 (as {LAUNCHER[family]} starts them): {t2 - t1:.1f} s")
    keys = ("loss", "mlm_loss", "nsp_accuracy") if family == "bert" else ("loss",)
    compare_runs(one, two, f"{family} 2 ranks x 8 vs 1 x 16", valid_keys=keys)
    compare_runs(one, acc, f"{family} 1 x 8 accumulating 2 vs 1 x 16", valid_keys=keys)
    if mix:
        drawn = [json.load(open(os.path.join(d, "result.json"))).get("train_sources") for d in (one, two, acc)]
        check(drawn[0] == drawn[1] == drawn[2] and drawn[0] is not None,
              f"{family}: the mixture drew the same of each source on 1 and 2 processes ({drawn[0]})")


def finetune_inputs(work):
    """A 1,000-piece BERT tokenizer trained on the sample, and the small BERT's config: (tokenizer, config)."""
    tok_dir = os.path.join(work, "tok")
    run([os.path.join(BIN, "lmkit-tokenize"), "train", "--input", os.path.join(DATA, "train.txt"), "--output", tok_dir,
         "--vocab-size", "1000", "--family", "bert"])
    cfg = os.path.join(work, "bert.json")
    with open(cfg, "w") as f:
        json.dump(MODELS["bert"], f)
    return tok_dir, cfg


def equivalence_finetune(work):
    # 872 SST-2 dev sentences as training data: 54 batches of 16 and a last one of 8 (4 per rank).
    tok_dir, cfg = finetune_inputs(work)

    def args(out, batch):
        return [os.path.join(BIN, "lmkit-finetune"), "--init", "random", "--model", cfg, "--tokenizer", tok_dir,
                "--train", SST, "--dev", SST, "--output", out, "--epochs", "1", "--batch-size", str(batch),
                "--max-length", "48", "--lr", "1e-3", "--threads", "1", "--seed", "3"]
    one, two = os.path.join(work, "one"), os.path.join(work, "two")
    run(args(one, 16))
    run(launch(args(two, 8), style=LAUNCHER["finetune"]))
    compare_runs(one, two, "finetune 2 ranks x 8 vs 1 x 16", weights="best", valid_keys=("accuracy", "loss"))
    # --accumulation: 55 steps an epoch, the last one the epoch's last batch alone (54 x 2 + 1 of 8),
    # in one process and under 2 ranks; --recompute: the stored path's weights, bit for bit.
    acc, two_acc, rec = (os.path.join(work, d) for d in ("accumulate", "two-accumulate", "recompute"))
    run(args(acc, 8) + ["--accumulation", "2"])
    run(launch(args(two_acc, 4) + ["--accumulation", "2"], style=LAUNCHER["finetune"]))
    run(args(rec, 16) + ["--recompute"])
    for d, label in ((acc, "1 x 8 accumulating 2"), (two_acc, "2 ranks x 4 accumulating 2")):
        compare_runs(one, d, f"finetune {label} vs 1 x 16", weights="best", valid_keys=("accuracy", "loss"))
        per = [json.load(open(os.path.join(x, "result.json")))["steps_per_epoch"] for x in (one, d)]
        check(per[0] == per[1] == 55, f"finetune {label}: {per[1]} steps an epoch, as 1 x 16's {per[0]}")
    check(max_weight_diff(one, rec) == 0.0 and [x["loss"] for x in losses(one)] == [x["loss"] for x in losses(rec)],
          "finetune --recompute vs stored activations: the same losses and weights, bit for bit")
    ra, rb = (json.load(open(os.path.join(d, "result.json"))) for d in (one, two))
    check(abs(ra["accuracy"] - rb["accuracy"]) <= TOL, f"finetune: dev accuracy {ra['accuracy']:.4f} vs {rb['accuracy']:.4f}")
    preds = [[l.split("\t")[:3] for l in open(os.path.join(d, "predictions.tsv"))] for d in (one, two)]
    check(preds[0] == preds[1] and len(preds[0]) == 873, f"finetune: the same {len(preds[1]) - 1} predictions (rank 0 writes them)")


def resume(work):
    # A weighted mixture of two sources, each through its own epochs, validated per source. No
    # --tokenizer: rank 0 trains it on both sources and encodes them, the other rank waits and reads them.
    train, valid = os.path.join(DATA, "train.txt"), os.path.join(DATA, "valid.txt")
    mix = {"train": f"wiki=0.7:{train},short=0.3:{valid}", "valid": f"wiki:{valid},short:{valid}"}
    full = os.path.join(work, "full")
    run(torchrun(pretrain_args("bert", work, full, 8, ["--save-every", "4"], **mix)))
    # The stopped and resumed job started as srun would (a job restarted by another launcher is the same job).
    cut = os.path.join(work, "cut")
    run(launch(pretrain_args("bert", work, cut, 8, ["--save-every", "4", "--stop-at", "4"], **mix)))
    check(not os.path.exists(os.path.join(cut, "final")), "resume: the stopped run has no final/")
    r = run(launch(pretrain_args("bert", work, cut, 8, ["--save-every", "4", "--resume"], **mix)))
    check("resuming from" in r.stderr and "step 4" in r.stderr, "resume: both ranks continue from step 4")
    compare_runs(full, cut, "resume 2 ranks: stopped at 4 + resumed vs uninterrupted",
                 valid_keys=("loss", "mlm_loss", "nsp_accuracy"))
    ra, rb = (json.load(open(os.path.join(d, "result.json"))) for d in (full, cut))
    drawn = ra.get("train_sources", {})
    check(drawn == rb.get("train_sources") and drawn.get("wiki", {}).get("samples") == 90 and
          drawn.get("short", {}).get("samples") == 38,
          f"resume: the mixture drew wiki 90 and short 38 of 8 x 16 samples, resumed or not ({drawn})")
    va = losses(cut, "valid")
    check(len(va) == 2 and all(set(v.get("sources", {})) == {"wiki", "short"} for v in va),
          "resume: each validation reports both sources")


def nccl(work):
    if not torch.cuda.is_available():
        print("LMKIT_SKIP: no CUDA device")
        sys.exit(77)
    plain, ranked = os.path.join(work, "plain"), os.path.join(work, "nccl")
    run(pretrain_args("gpt", work, plain, 16, ["--device", "cuda"]))
    tok = ["--tokenizer", os.path.join(plain, "tokenizer.model")]
    r = run(torchrun(pretrain_args("gpt", work, ranked, 16, tok + ["--device", "cuda"]), nproc=1))
    check("backend nccl" in r.stderr, "nccl: the group is NCCL's")
    compare_runs(plain, ranked, "nccl 1 GPU under torchrun vs plain")
    # The sharded optimizer on NCCL (one GPU, so one rank: its reduce-scatter and all-gathers are still
    # NCCL's, on NCCL's stream), the all-gather overlapped with the forward and at the step's end.
    outs = []
    for flag in ("--overlap-param-gather", "--no-overlap-param-gather"):
        outs.append(os.path.join(work, "zero" + ("-end" if "no-" in flag else "")))
        run(torchrun(pretrain_args("gpt", work, outs[-1], 16, tok + ["--device", "cuda", "--shard-optimizer", "1",
                                                                   "--bucket-mb", "0.02", flag]), nproc=1))
    compare_runs(plain, outs[0], "nccl: --shard-optimizer 1, overlapped all-gather, vs plain")
    check([x["loss"] for x in losses(outs[0])] == [x["loss"] for x in losses(outs[1])] and
          max_weight_diff(*outs) == 0.0, "nccl: the overlapped all-gather = the step-end one, bit for bit")
    # Recomputed layers and bf16 weights through the NCCL reducer: bf16 gradients copied into float32
    # buckets on the GPU from the post-accumulate hook, each layer run again in backward; against the
    # same flags without torchrun (the same optimizer: on this machine's CPU, bit for bit).
    both = ["--device", "cuda", "--recompute", "--dtype", "bf16-weights"]
    alone, ranked = os.path.join(work, "bf16-recompute"), os.path.join(work, "bf16-recompute-nccl")
    run(pretrain_args("gpt", work, alone, 16, tok + both))
    run(torchrun(pretrain_args("gpt", work, ranked, 16, tok + both + ["--bucket-mb", "0.02"]), nproc=1))
    compare_runs(alone, ranked, "nccl: --recompute --dtype bf16-weights under torchrun vs the same alone")


def failure(work):
    base = pretrain_args("bert", work, os.path.join(work, "run"), 8, [])
    base[base.index("--steps") + 1] = "1000000"
    base[base.index("--eval-every") + 1] = "0"
    out = base.index("--output")  # each start gives its own (an app refuses a one-value flag given twice)
    del base[out:out + 2]

    def start(timeout):
        port = free_port()
        procs = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
            procs.append(subprocess.Popen(base + ["--dist-timeout", str(timeout), "--output", os.path.join(work, f"run{port}")],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        metrics = os.path.join(work, f"run{port}", "metrics.jsonl")
        deadline = time.time() + 120
        while time.time() < deadline and not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
            time.sleep(0.2)
        check(os.path.exists(metrics), "failure: both ranks started training")
        time.sleep(0.5)
        return procs

    def outcome(proc, limit):
        t = time.time()
        try:
            _, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            return None, time.time() - t, ""
        lines = [l for l in err.splitlines() if l.startswith("error:")]
        return proc.returncode, time.time() - t, lines[-1] if lines else ""

    # A rank that dies: its sockets close, the survivor's next collective fails at once.
    procs = start(timeout=60)
    procs[1].send_signal(signal.SIGKILL)
    rc, waited, line = outcome(procs[0], 90)
    procs[1].wait()
    check(rc not in (None, 0), f"failure: rank 1 killed -> rank 0 exits {rc} after {waited:.1f} s (--dist-timeout 60)")
    check(line.startswith("error: rank 0 of 2:"), f"failure: one error line: {line[:160]}")

    # A rank that hangs: nothing closes, the survivor gives up after --dist-timeout.
    procs = start(timeout=5)
    procs[1].send_signal(signal.SIGSTOP)
    rc, waited, line = outcome(procs[0], 90)
    procs[1].send_signal(signal.SIGKILL)
    procs[1].wait()
    check(rc not in (None, 0) and waited < 60,
          f"failure: rank 1 stopped -> rank 0 exits {rc} after {waited:.1f} s (--dist-timeout 5)")
    check(line.startswith("error: rank 0 of 2:"), f"failure: one error line: {line[:160]}")

    # SIGTERM to one rank only (a scheduler preempting one machine): the request travels with
    # the step's all-reduce, both ranks stop after the same step, rank 0 writes its checkpoint.
    procs = start(timeout=60)
    procs[1].send_signal(signal.SIGTERM)
    errs = []
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            err = ""
        errs.append(err)
    steps = [re.search(r"after step (\d+)", e) for e in errs]
    check(all(p.returncode == 3 for p in procs) and all(steps) and steps[0].group(1) == steps[1].group(1),
          f"signal: SIGTERM to rank 1 -> exits {[p.returncode for p in procs]}, "
          f"steps {[m.group(1) if m else None for m in steps]}")
    check("interrupted by SIGTERM" in errs[1] and "interrupted by a signal on another rank" in errs[0],
          "signal: each rank says why it stopped")
    if all(steps):
        args = procs[0].args
        run_dir = args[len(args) - 1 - args[::-1].index("--output") + 1]
        ckpt = os.path.join(run_dir, "checkpoints", f"step-{steps[0].group(1)}")
        check(os.path.exists(os.path.join(ckpt, "optimizer.pt")), f"signal: {ckpt} is complete")

    # Rendezvous with nobody there: one error line, no c10d stack traces.
    env = dict(os.environ, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    r = subprocess.run(base + ["--dist-timeout", "3", "--output", os.path.join(work, "alone")], env=env,
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(lines) <= 2 and lines[-1].startswith("error: rank 1: rendezvous"),
          f"failure: no rank 0 -> exit {r.returncode}, {len(lines)} stderr lines, last: {lines[-1][:160] if lines else ''}")

    # A diverged run (lr 1e30): every rank skips the same steps and stops after 10 in a row; rank 0
    # says so once (each rank said it: the same line twice).
    args = pretrain_args("bert", work, os.path.join(work, "diverged"), 4)
    args[args.index("--steps") + 1] = "14"
    args[args.index("--eval-every") + 1] = "0"
    args[args.index("--lr") + 1] = "1e30"
    r = subprocess.run(launch(args), capture_output=True, text=True, timeout=300)
    lines = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    check(r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: stopping at step 11: 10 consecutive"),
          f"failure: a diverged run at 2 ranks -> exit {r.returncode}, error lines {lines}")


def max_weight_diff(a, b):
    wa = load_file(os.path.join(a, "final", "model.safetensors"))
    wb = load_file(os.path.join(b, "final", "model.safetensors"))
    return max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)


def state_lines(stderr):
    """The trainer's line on each rank: (rank, world, elements held, of total, bytes)."""
    return sorted((int(m[0]), int(m[1]), int(m[2]), int(m[3]), int(m[4])) for m in re.findall(
        r"rank (\d+) of (\d+): optimizer state of (\d+) of (\d+) parameter elements, (\d+) bytes", stderr))


def unread(out):
    """A refused run's folder: gone, or holding only its lock."""
    return not os.path.exists(out) or os.listdir(out) == [".lock"]


def zero(work):
    tok = []
    runs = {}
    # 2 sharded ranks in buckets of 20 KB, so that the all-gather overlapped with the next forward (the
    # default) reaches each layer at its gate: a layer that ran on parameters not yet gathered would
    # train other weights than unsharded data parallelism (tests/nn/layer_gate_test.cpp: every family).
    small = ["--bucket-mb", "0.02"]
    for ranks, stage in ((2, 0), (2, 1), (2, 2), (3, 0), (3, 1)):
        out = os.path.join(work, f"r{ranks}-s{stage}")
        r = run(launch(pretrain_args("gpt", work, out, 4, tok + ["--shard-optimizer", str(stage), "--save-every", "4"] +
                                     (small if ranks == 2 and stage else [])), nproc=ranks))
        if not tok:
            tok = ["--tokenizer", os.path.join(out, "tokenizer.model")]
        runs[(ranks, stage)] = out
        if stage:
            lines = state_lines(r.stderr)
            total = lines[0][3] if lines else 0
            held = [l[2] for l in lines]
            check(len(lines) == ranks and sum(held) == total and all(abs(h - total / ranks) <= ranks * 8 for h in held),
                  f"zero: {ranks} ranks, stage {stage}: each rank updates ~1/{ranks} of {total} elements {held}")
            check(all(l[4] == 8 * l[2] for l in lines),
                  f"zero: {ranks} ranks, stage {stage}: AdamW state bytes = 8 x elements held {[l[4] for l in lines]} "
                  f"(unsharded: {8 * total} on every rank)")
            if ranks == 2:
                said = re.findall(r"rank 0: parameter all-gather overlapped with the forward: (\d+) of (\d+) buckets", r.stderr)
                check(said and 0 < int(said[0][0]) < int(said[0][1]),
                      f"zero: 2 ranks, stage {stage}: rank 0's layers waited for {' of '.join(said[0]) if said else 'no'} "
                      f"buckets of the all-gather (the rest hold the embeddings or the final norm)")
    for ranks in (2, 3):
        for stage in ((1, 2) if ranks == 2 else (1,)):
            a, b = runs[(ranks, 0)], runs[(ranks, stage)]
            la, lb = losses(a), losses(b)
            worst = max(abs(x["loss"] - y["loss"]) for x, y in zip(la, lb))
            wdiff = max_weight_diff(a, b)
            check(len(la) == len(lb) == 8 and worst <= ZERO_TOL and wdiff <= ZERO_TOL,
                  f"zero: {ranks} ranks stage {stage} vs unsharded: losses max |diff| {worst:.2e}, "
                  f"final weights max |diff| {wdiff:.2e} (bound {ZERO_TOL:g})")
    # The all-gather at the step's end instead: the same arithmetic, so bit for bit.
    end = os.path.join(work, "r2-s2-end")
    r = run(launch(pretrain_args("gpt", work, end, 4, tok + ["--shard-optimizer", "2", "--save-every", "4"] + small +
                                 ["--no-overlap-param-gather"])))
    check(max_weight_diff(runs[(2, 2)], end) == 0.0 and
          [x["loss"] for x in losses(end)] == [x["loss"] for x in losses(runs[(2, 2)])] and "overlapped" not in r.stderr,
          "zero: stage 2, 2 ranks: the all-gather overlapped with the forward = at the step's end, bit for bit")
    # Gradient accumulation, sharded: 2 ranks x 2 micro-batches of 2 = 2 ranks x 4.
    acc = os.path.join(work, "accumulate")
    run(launch(pretrain_args("gpt", work, acc, 2, tok + ["--shard-optimizer", "2", "--accumulation", "2"])))
    la, lb = losses(runs[(2, 0)]), losses(acc)
    worst = max(abs(x["loss"] - y["loss"]) for x, y in zip(la, lb))
    wdiff = max_weight_diff(runs[(2, 0)], acc)
    check(worst <= ZERO_TOL and wdiff <= ZERO_TOL,
          f"zero: stage 2 accumulating 2 x 2 vs unsharded 4: losses {worst:.2e}, weights {wdiff:.2e}")
    # Finetuning, sharded: BERT classification, 2 ranks, stage 1 vs unsharded.
    tok_dir, cfg = finetune_inputs(work)
    ft = {}
    # Stage 2 accumulating: each micro-batch reduce-scattered and added to the rank's chunks.
    for stage, batch, extra in ((0, "8", []), (1, "8", []), ("2-accumulate", "4", ["--accumulation", "2"])):
        ft[stage] = os.path.join(work, f"finetune-{stage}")
        run(launch([os.path.join(BIN, "lmkit-finetune"), "--init", "random", "--model", cfg, "--tokenizer", tok_dir,
                      "--train", SST, "--dev", SST, "--output", ft[stage], "--epochs", "1", "--batch-size", batch,
                      "--max-length", "48", "--lr", "1e-3", "--threads", "1", "--seed", "3", "--max-train-examples", "256",
                      "--max-dev-examples", "64", "--shard-optimizer", str(stage)[0]] + extra))
    for stage, label in ((1, "stage 1"), ("2-accumulate", "stage 2, 2 ranks x 4 accumulating 2,")):
        ra, rb = (json.load(open(os.path.join(ft[s], "result.json"))) for s in (0, stage))
        fa, fb = (load_file(os.path.join(ft[s], "best", "model.safetensors")) for s in (0, stage))
        fdiff = max(float((fa[k] - fb[k]).abs().max()) for k in fa)
        check(fdiff <= ZERO_TOL and ra["accuracy"] == rb["accuracy"],
              f"zero: finetuning, {label} vs unsharded: best weights {fdiff:.2e}, dev accuracy {ra['accuracy']:.4f} and "
              f"{rb['accuracy']:.4f}")
    # Stop and resume, sharded: the same run, bit for bit.
    cut = os.path.join(work, "cut")
    run(launch(pretrain_args("gpt", work, cut, 4, tok + ["--shard-optimizer", "2", "--save-every", "4", "--stop-at", "4"] +
                             small)))
    # Resumed with the all-gather at the step's end: a flag that changes no weight, so --resume takes it.
    run(launch(pretrain_args("gpt", work, cut, 4, tok + ["--shard-optimizer", "2", "--save-every", "4", "--resume"] + small +
                             ["--no-overlap-param-gather"])))
    check(max_weight_diff(runs[(2, 2)], cut) == 0.0 and
          [x["loss"] for x in losses(cut)] == [x["loss"] for x in losses(runs[(2, 2)])],
          "zero: stage 2, 2 ranks stopped at 4 and resumed (--no-overlap-param-gather) = uninterrupted, bit for bit")
    # Stage 2 accumulating, stopped and resumed: the same run, bit for bit.
    full, cut2 = os.path.join(work, "acc-full"), os.path.join(work, "acc-cut")
    acc2 = tok + ["--shard-optimizer", "2", "--accumulation", "2", "--save-every", "4"] + small
    run(launch(pretrain_args("gpt", work, full, 2, acc2)))
    run(launch(pretrain_args("gpt", work, cut2, 2, acc2 + ["--stop-at", "4"])))
    run(launch(pretrain_args("gpt", work, cut2, 2, acc2 + ["--resume"])))
    check(max_weight_diff(full, cut2) == 0.0 and [x["loss"] for x in losses(full)] == [x["loss"] for x in losses(cut2)],
          "zero: stage 2 accumulating 2, 2 ranks stopped at 4 and resumed = uninterrupted, bit for bit")
    # The checkpoint holds the whole state: it resumes on 3 sharded ranks and on 1 process.
    for label, cmd in (("3 ranks, stage 1", lambda out: launch(pretrain_args(
                           "gpt", work, out, 4, tok + ["--shard-optimizer", "1", "--save-every", "4", "--resume",
                                                       "--allow-changes"]), nproc=3)),
                       ("1 process, unsharded", lambda out: pretrain_args(
                           "gpt", work, out, 4, tok + ["--save-every", "4", "--resume", "--allow-changes"]))):
        out = os.path.join(work, label.replace(" ", "").replace(",", "-"))
        shutil.copytree(cut, out)
        shutil.rmtree(os.path.join(out, "final"))
        os.remove(os.path.join(out, "result.json")) if os.path.exists(os.path.join(out, "result.json")) else None
        with open(os.path.join(out, "checkpoints", "latest"), "w") as f:
            f.write("step-4\n")
        for d in os.listdir(os.path.join(out, "checkpoints")):
            if d.startswith("step-") and d != "step-4":
                shutil.rmtree(os.path.join(out, "checkpoints", d))
        r = run(cmd(out))
        warned = r.stderr.count("warning: the checkpoint was written by 2 rank(s)")
        check(warned == 1 and os.path.exists(os.path.join(out, "final", "model.safetensors")),
              f"zero: the stage-2 checkpoint of step 4 resumes on {label} ({warned} warning)")
    refusals(work, tok, runs[(2, 0)])


def recompute(work):
    """--recompute under data parallelism, unsharded and sharded: each rank's gradients are the stored
    path's, so the runs equal those without it (bit for bit where no parameter is shared across
    layers; Linformer's layerwise projection sums its layers' parts in another order)."""
    toks = {}  # each family's tokenizer, trained by its first run
    runs = {}
    for family, stage, flags in (("gpt-dropout", 0, []), ("gpt-dropout", 0, ["--recompute"]),
                                 ("gpt-dropout", 2, []), ("gpt-dropout", 2, ["--recompute"]),
                                 ("linformer", 0, []), ("linformer", 1, ["--recompute"])):
        out = os.path.join(work, f"{family}-s{stage}{'-recompute' if flags else ''}")
        run(launch(pretrain_args(family, work, out, 4, toks.get(family, []) + ["--shard-optimizer", str(stage),
                                                                             "--save-every", "4", "--bucket-mb", "0.02"] + flags)))
        toks.setdefault(family, ["--tokenizer", os.path.join(out, "tokenizer.model")])
        runs[(family, stage, bool(flags))] = out
    for stage in (0, 2):
        a, b = runs[("gpt-dropout", stage, False)], runs[("gpt-dropout", stage, True)]
        same = [x["loss"] for x in losses(a)] == [x["loss"] for x in losses(b)] and len(losses(a)) == 8
        check(same and max_weight_diff(a, b) == 0.0,
              f"recompute: gpt with dropout, 2 ranks, stage {stage}: --recompute = stored activations, bit for bit")
    a, b = runs[("linformer", 0, False)], runs[("linformer", 1, True)]
    worst = max(abs(x["loss"] - y["loss"]) for x, y in zip(losses(a), losses(b)))
    wdiff = max_weight_diff(a, b)
    check(len(losses(b)) == 8 and worst <= ZERO_TOL and wdiff <= ZERO_TOL,
          f"recompute: Linformer's layerwise projection, 2 ranks, stage 1 + --recompute vs unsharded: losses "
          f"{worst:.2e}, final weights {wdiff:.2e} (bound {ZERO_TOL:g})")
    # Stopped and resumed, sharded and recomputed: the same run, bit for bit.
    cut = os.path.join(work, "cut")
    base = toks["gpt-dropout"] + ["--shard-optimizer", "2", "--save-every", "4", "--bucket-mb", "0.02", "--recompute"]
    run(launch(pretrain_args("gpt-dropout", work, cut, 4, base + ["--stop-at", "4"])))
    run(launch(pretrain_args("gpt-dropout", work, cut, 4, base + ["--resume"])))
    full = runs[("gpt-dropout", 2, True)]
    check(max_weight_diff(full, cut) == 0.0 and [x["loss"] for x in losses(cut)] == [x["loss"] for x in losses(full)],
          "recompute: stage 2 + --recompute, 2 ranks stopped at 4 and resumed = uninterrupted, bit for bit")


def bf16_weights(work):
    """--dtype bf16-weights under data parallelism: bf16 gradients reduced in float32 buckets, float32
    masters updated (sharded or not). Against one process of the same precision, as close as bf16's
    rounding allows; between stages, within the rounding of masters that differ in their last bit."""
    base = ["--dtype", "bf16-weights", "--save-every", "4"]
    one = os.path.join(work, "one")
    run(pretrain_args("gpt", work, one, 8, base))
    base += ["--bucket-mb", "0.02"]  # each layer's parameters in buckets of their own
    tok = ["--tokenizer", os.path.join(one, "tokenizer.model")]
    runs = {}
    for stage, extra in ((0, []), (1, []), (1, ["--no-overlap-param-gather"]), (2, [])):
        out = os.path.join(work, f"s{stage}{'-end' if extra else ''}")
        run(launch(pretrain_args("gpt", work, out, 4, tok + base + ["--shard-optimizer", str(stage)] + extra)))
        runs[(stage, bool(extra))] = out

    def diffs(a, b):
        la, lb = losses(a), losses(b)
        return (max(abs(x["loss"] - y["loss"]) for x, y in zip(la, lb)) if len(la) == len(lb) == 8 else float("inf"),
                max_weight_diff(a, b))
    lw, ww = diffs(one, runs[(0, False)])
    # The weights by their mean difference: AdamW turns a bf16 rounding of a near-zero gradient into a
    # whole step of either sign, so a few weights differ by up to 1e-3 where the rest agree to ~1e-6.
    wa, wb = (load_file(os.path.join(d, "final", "model.safetensors")) for d in (one, runs[(0, False)]))
    mean = sum(float((wa[k] - wb[k]).abs().sum()) for k in wa) / sum(v.numel() for v in wa.values())
    check(lw <= 2e-4 and mean <= 5e-5, f"bf16-weights: 2 ranks x 4 vs 1 process x 8: losses {lw:.2e}, final weights "
                                       f"{mean:.2e} apart on average, {ww:.2e} at most (bounds 2e-4, 5e-5: bf16 "
                                       f"gradients of half batches)")
    for stage in (1, 2):
        lw, ww = diffs(runs[(0, False)], runs[(stage, False)])
        check(lw <= 1e-4 and ww <= 1e-4, f"bf16-weights: 2 ranks, stage {stage} vs unsharded: losses {lw:.2e}, "
                                         f"final weights {ww:.2e} (bound 1e-4)")
    lw, ww = diffs(runs[(1, False)], runs[(1, True)])
    check(lw == 0.0 and ww == 0.0, "bf16-weights: stage 1, the all-gather overlapped with the forward (landing in the "
                                   "bf16 copies) = at the step's end, bit for bit")
    cut = os.path.join(work, "cut")
    run(launch(pretrain_args("gpt", work, cut, 4, tok + base + ["--shard-optimizer", "2", "--stop-at", "4"])))
    run(launch(pretrain_args("gpt", work, cut, 4, tok + base + ["--shard-optimizer", "2", "--resume"])))
    lw, ww = diffs(runs[(2, False)], cut)
    check(lw == 0.0 and ww == 0.0, "bf16-weights: stage 2, 2 ranks stopped at 4 and resumed = uninterrupted, bit for bit")


def one_error_line(r, said):
    """A refused launched job: exit 2, and the error said once (by rank 0) with nothing after it from
    the other ranks (no 'barrier failed: Connection closed by peer')."""
    lines = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    return r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {said}")


def refusals(work, tok, used):
    """Refused data-parallel runs (2 ranks on this node): each says why in one line, before the data."""
    bad = pretrain_args("gpt", work, os.path.join(work, "bad"), 4, tok + ["--shard-optimizer", "1", "--optimizer", "lamb"])
    r = subprocess.run(launch(bad), capture_output=True, text=True)
    check(one_error_line(r, "--shard-optimizer: --optimizer lamb cannot be sharded"),
          f"zero: --optimizer lamb is refused by name, once (exit {r.returncode})", r.stderr)
    # Before any data is read: nothing in the run folder but the lock (rank 0 removes the folder it
    # made unless the launcher's SIGTERM, sent when rank 1 exits first, ends it before it can).
    check(unread(os.path.join(work, "bad")), "zero: the refusal comes before the data (no corpus, no tokenizer)")
    # Refused by rank 0 alone (the run folder, the training text), while the other rank waits for it.
    for args, said in ((pretrain_args("gpt", work, used, 4, tok), f"--output {used}: holds an earlier run"),
                       (pretrain_args("gpt", work, os.path.join(work, "no-text"), 4, [],
                                      train=os.path.join(work, "missing.txt")), f"{work}/missing.txt: no such")):
        r = subprocess.run(launch(args), capture_output=True, text=True)
        check(one_error_line(r, said), f"data parallelism: rank 0's refusal said once (exit {r.returncode})", r.stderr)
    r = subprocess.run(launch(pretrain_args("gpt", work, os.path.join(work, "flag"), 0, tok)), capture_output=True, text=True)
    check(one_error_line(r, "--batch-size: 0 is out of range"), f"data parallelism: a bad flag said once (exit {r.returncode})")
    r = subprocess.run(pretrain_args("gpt", work, os.path.join(work, "alone"), 4, tok + ["--shard-optimizer", "1"]),
                       capture_output=True, text=True)
    check(r.returncode == 2 and "error: --shard-optimizer 1 shards across data-parallel ranks" in r.stderr
          and not os.path.exists(os.path.join(work, "alone")), f"zero: without ranks, exit {r.returncode} and one error line")


def main():
    global BIN
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["collectives", "equivalence", "resume", "nccl", "failure", "zero", "recompute",
                                    "bf16-weights"])
    p.add_argument("family", nargs="?", default="bert", choices=["bert", "gpt", "t5", "finetune"])
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    BIN = a.bin
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    if a.case == "collectives":
        r = subprocess.run(torchrun([os.path.join(BIN, "lmkit-dist-check")]), capture_output=True, text=True)
        print("\n".join(sorted(l for l in r.stdout.splitlines() if l.startswith("rank"))))
        check(r.returncode == 0 and "FAIL" not in r.stdout and r.stdout.count(" ok ") > 20,
              f"collectives: lmkit-dist-check on 2 ranks exits {r.returncode}")
        if r.returncode != 0:
            print(r.stderr[-2000:])
    elif a.case == "equivalence":
        equivalence(a.family, a.work)
    elif a.case == "resume":
        resume(a.work)
    elif a.case == "nccl":
        nccl(a.work)
    elif a.case == "zero":
        zero(a.work)
    elif a.case == "recompute":
        recompute(a.work)
    elif a.case == "bf16-weights":
        bf16_weights(a.work)
    else:
        failure(a.work)
    print(f"{len(failures)} failed" if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
