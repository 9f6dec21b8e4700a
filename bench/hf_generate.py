#!/usr/bin/env python3
"""HuggingFace Transformers peer of `lmkit-bench generate`: the same preset JSON (random
weights), greedy decoding with the KV cache (`generate(do_sample=False, use_cache=True)`) of
exactly --new-tokens tokens after a random prompt, under torch.inference_mode.

  .venv/bin/python bench/hf_generate.py --model models/gpt-mini.json [--vocab-size 8000]
      [--new-tokens 256] [--prompt-len 16] [--batch-size 1] [--attn sdpa|eager] [--threads N]

Prints the best of --rounds timed runs after one warm-up and, last, `tokens_per_sec N`
(new tokens of every sequence, as lmkit-bench generate counts them).
"""
import argparse
import os
import time

import torch

from hf_train import build


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="sdpa")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="0: every core")
    a = ap.parse_args()
    torch.set_num_threads(a.threads or os.cpu_count())
    torch.manual_seed(0)
    kind, model = build(a.model, a.vocab_size, a.attn)
    if kind == "t5" or kind == "bert":
        raise SystemExit(f"error: hf_generate.py times decoder-only models, not {kind}")
    model.eval()
    vocab = model.config.vocab_size
    prompt = torch.randint(5, vocab, (a.batch_size, a.prompt_len))
    # No early stop: every run makes exactly --new-tokens tokens, as lmkit-bench's (stop_at_eos off).
    kwargs = dict(do_sample=False, use_cache=True, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                  attention_mask=torch.ones_like(prompt), pad_token_id=0)
    with torch.inference_mode():
        model.generate(prompt, **kwargs)  # warm-up
        best = float("inf")
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            out = model.generate(prompt, **kwargs)
            best = min(best, time.perf_counter() - t0)
    assert out.shape[1] == a.prompt_len + a.new_tokens, out.shape
    print(f"model                  {a.model} ({kind}, HF {a.attn}), prompt {a.prompt_len}, {a.new_tokens} new tokens, "
          f"batch {a.batch_size}, threads {torch.get_num_threads()}")
    print(f"with KV cache          {best:.2f} s")
    print(f"tokens_per_sec {a.new_tokens * a.batch_size / best:.0f}")


if __name__ == "__main__":
    main()
