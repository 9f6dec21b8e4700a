#!/usr/bin/env python3
"""The strongest plain-PyTorch peer of `lmkit-bench train` for GPT-2 shapes: a compact
GPT-2 in the style of nanoGPT, written for speed: fused QKV, flash attention
(scaled_dot_product_attention with is_causal), tied LM head, fused AdamW (lr 1e-4,
weight decay 0.01 on matrices, eps 1e-6), global gradient-norm clip 1.0, bf16 autocast
over float32 weights, optionally torch.compile. It reads the same preset as lmkit and
HF (dropout: the preset's, else GPT-2's 0.1, as both of them use) and times the same
random batches (every token a target); the rest of the step is bench/peer_common.py's.

  python3 bench/gpt_peer.py --model models/gpt2-small.json --batch-size 16 --seq-len 1024 \\
      [--steps 10] [--warmup 3] [--dtype bf16|fp32] [--tf32] [--compile] [--pad-vocab 64] [--device cuda]

Prints the median step time, the peak GPU memory and, last, `tokens_per_sec N`.
"""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import peer_common


class Block(nn.Module):
    def __init__(self, d, h, p_attn, p_resid, eps):
        super().__init__()
        self.h, self.p_attn = h, p_attn
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p_resid)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln_1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p_attn if self.training else 0.0, is_causal=True)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, cfg, vocab):
        super().__init__()
        d, eps = cfg["n_embd"], cfg.get("layer_norm_epsilon", 1e-5)
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(cfg.get("n_positions", 1024), d)
        self.drop = nn.Dropout(cfg.get("embd_pdrop", 0.1))
        self.blocks = nn.ModuleList(Block(d, cfg["n_head"], cfg.get("attn_pdrop", 0.1), cfg.get("resid_pdrop", 0.1), eps)
                                    for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(d, eps=eps)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg["n_layer"]) if name.endswith(("proj.weight",)) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids, labels):
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(ids.size(1), device=ids.device)))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x)[:, :-1], self.wte.weight)  # tied head
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))


def main():
    ap = peer_common.parser(__doc__, batch_size=16, seq_len=1024, device="cuda")
    ap.add_argument("--pad-vocab", type=int, default=1, help="round the vocabulary up to a multiple (nanoGPT: 64)")
    a = ap.parse_args()
    device = peer_common.setup(a)
    with open(a.model) as f:
        cfg = json.load(f)
    assert cfg.get("model_type") == "gpt2", "a GPT-2 preset"
    vocab = a.vocab_size or cfg["vocab_size"]
    padded = (vocab + a.pad_vocab - 1) // a.pad_vocab * a.pad_vocab
    model = GPT(cfg, padded).to(device).train()
    step_fn = torch.compile(model) if a.compile else model
    step_s, loss = peer_common.time_steps(a, device, model, lambda ids: step_fn(ids, ids),
                                          lambda: torch.randint(5, vocab, (a.batch_size, a.seq_len)).to(device))
    what = (f"compact PyTorch GPT-2 (torch {torch.__version__}), vocab {padded}, "
            f"batch {a.batch_size} x {a.seq_len}")
    peer_common.report(a, device, what, step_s, loss, a.batch_size * a.seq_len)


if __name__ == "__main__":
    main()
