#!/usr/bin/env python3
"""HuggingFace Transformers peer of `lmkit-bench train`: the same model config, the same
shapes and the same random batches (15% MLM labels for BERT, every token for GPT, span-
corruption target length for T5), AdamW (lr 1e-4, weight decay 0.01, eps 1e-6), global
gradient-norm clip 1.0, fp32 or bf16 autocast over float32 weights.

  .venv/bin/python bench/hf_train.py --model models/bert-mini.json [--vocab-size N]
      [--batch-size 32] [--seq-len 128] [--target-len N] [--steps 10] [--warmup 3]
      [--dtype fp32|bf16] [--tf32] [--attn eager|sdpa] [--compile] [--threads N] [--device cpu|cuda]

Prints the median step time over the timed steps and, last, `tokens_per_sec N` (input
tokens; encoder + decoder tokens for T5, as lmkit-bench counts them).
"""
import json

import torch
import transformers

import peer_common


def span_target_len(inputs_length, noise_density=0.15, mean_span=3.0):
    """T5's compute_input_and_target_lengths, solved for the target length of a packed input."""
    def lengths(tokens_length):
        num_noise = int(round(tokens_length * noise_density))
        num_nonnoise = tokens_length - num_noise
        num_spans = int(round(num_noise / mean_span))
        return num_nonnoise + num_spans + 1, num_noise + num_spans + 1

    tokens_length = inputs_length
    while lengths(tokens_length + 1)[0] <= inputs_length:
        tokens_length += 1
    return lengths(tokens_length)[1]


def build(config_path, vocab, attn):
    with open(config_path) as f:
        cfg = json.load(f)
    if vocab:
        cfg["vocab_size"] = vocab
    kind = cfg.pop("model_type")
    if kind == "t5":  # lmkit's presets leave T5's special ids at their conventional values
        cfg = {"decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 1, **cfg}
    config = transformers.AutoConfig.for_model(kind, **cfg)
    config._attn_implementation = attn
    cls = {"bert": transformers.BertForMaskedLM, "gpt2": transformers.GPT2LMHeadModel,
           "t5": transformers.T5ForConditionalGeneration, "llama": transformers.LlamaForCausalLM,
           "mistral": transformers.MistralForCausalLM}[kind]
    return kind, cls(config)


def batch(kind, b, t, target_len, vocab, device):
    ids = torch.randint(5, vocab, (b, t))
    out = {"input_ids": ids, "attention_mask": torch.ones(b, t, dtype=torch.long)}
    if kind == "bert":
        chosen = torch.rand(b, t) < 0.15
        out["labels"] = torch.where(chosen, torch.randint(5, vocab, (b, t)), torch.full((b, t), -100))
    elif kind in ("gpt2", "llama", "mistral"):
        out["labels"] = ids
    else:
        out["labels"] = torch.randint(5, vocab, (b, target_len))
    return {k: v.to(device) for k, v in out.items()}


def main():
    ap = peer_common.parser(__doc__)
    ap.add_argument("--target-len", type=int, default=0)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="sdpa")
    a = ap.parse_args()
    device = peer_common.setup(a)
    kind, model = build(a.model, a.vocab_size, a.attn)
    model.to(device).train()
    vocab = model.config.vocab_size
    target_len = a.target_len or (span_target_len(a.seq_len) if kind == "t5" else a.seq_len)
    step_fn = torch.compile(model) if a.compile else model
    step_s, loss = peer_common.time_steps(a, device, model, lambda inputs: step_fn(**inputs).loss,
                                          lambda: batch(kind, a.batch_size, a.seq_len, target_len, vocab, device))
    tokens = a.batch_size * (a.seq_len + (target_len if kind == "t5" else 0))
    what = (f"HF transformers {transformers.__version__} torch {torch.__version__}: {type(model).__name__} "
            f"attn={a.attn}, batch {a.batch_size} x {a.seq_len}{f' -> {target_len}' if kind == 't5' else ''}")
    peer_common.report(a, device, what, step_s, loss, tokens)


if __name__ == "__main__":
    main()
