#!/usr/bin/env python3
"""Live HuggingFace interop checks (CTest runs a family's cases as one test: CMakeLists.txt).

  hf_interop.py hf-to-lmkit:FAMILY [lmkit-to-hf:FAMILY ...] --bin BIN_DIR --work DIR
      Several cases run in one process (CTest groups a family's cases so); each gets
      its own folder under DIR and its own line, and a failing case does not stop the rest.
  hf-to-lmkit:FAMILY
      A small random HF model of FAMILY is saved with save_pretrained(); lmkit-forward
      loads that directory and must give HF's outputs, loss and every parameter
      gradient.
  lmkit-to-hf:FAMILY
      lmkit-pretrain (and lmkit-finetune for the classifier) writes a checkpoint;
      from_pretrained() must load it with no missing, unexpected or mismatched keys,
      and give lmkit-forward's outputs.

FAMILY: bert (BertForPreTraining), bert_seqcls (BertForSequenceClassification),
gpt2 (GPT2LMHeadModel), t5 (v1.0: ReLU, tied), t5_v1_1 (gated GELU, untied),
roberta (RobertaForMaskedLM), roberta_seqcls (RobertaForSequenceClassification);
lmkit-to-hf spanbert: lmkit's BertForSpanPreTraining read by HF's BertForMaskedLM (its
MLM loss and logits equal; the span boundary head's tensors are the only ones HF leaves).
Token classification (bert_tokcls, roberta_tokcls, gpt2_tokcls, t5_tokcls: HF's
*ForTokenClassification): hf-to-lmkit on a small config made here, with tags on some
tokens and -100 elsewhere; lmkit-to-hf through lmkit-finetune --task token-classification
on the made-up NER fixture (tests/fixtures/ner).
Llama (llama: LlamaForCausalLM, untied; llama_tied; llama_seqcls: lmkit-to-hf through
lmkit-finetune, whose classifier records the pad it batched with, EOS, as pad_token_id;
llama_tokcls): config and inputs made here (LLAMA_CONFIG, llama_inputs): grouped-query
attention (4 query heads, 2 key/value heads), rotary positions with rope_theta 5000, rows
of 24 with the second right-padded. Mistral (mistral: MistralForCausalLM; mistral_seqcls): Llama's config with
sliding_window 8, so the 24-token rows take lmkit's banded O(T·window) path, and greedy
generation runs 40 tokens past the window (HF's and lmkit's rolling caches). BLOOM (bloom:
BloomForCausalLM, bloom_seqcls, bloom_tokcls): BLOOM_CONFIG with 6 heads, so ALiBi's slopes
take HF's rule for a head count that is no power of two; Llama's inputs.
ELECTRA, from the plugin examples/electra (--plugin, or $LMKIT_PLUGINS): electra
(ElectraForPreTraining, the discriminator), electra_gen (ElectraForMaskedLM, the
generator), electra_seqcls, electra_tokcls; ELECTRA_CONFIG with embedding_size 32 below
hidden_size 64 (embeddings_project), token types, a right-padded row.
RoBERTa's config and inputs are made here (ROBERTA_CONFIG, roberta_inputs): rows
right-padded with <pad> (id 1), whose positions RoBERTa counts from padding_idx + 1.
Longformer (longformer: LongformerForMaskedLM, longformer_seqcls, longformer_tokcls):
LONGFORMER_CONFIG with windows of 4 and 8 (one a layer), rows of 29 (no multiple of either:
HF pads them, lmkit does not), the second right-padded after 21; global_attention_mask
marks three tokens of the first row and two of the second (and one padding position, which
HF's mask merge drops); the classifier gets none, so both put global attention on <s>.
BigBird (big_bird: BigBirdForPreTraining, big_bird_seqcls, big_bird_tokcls, big_bird_train:
BigBirdForMaskedLM in training mode): BIGBIRD_CONFIG with block_size 4 and 2 random blocks,
rows of 50 (block-sparse: above (5 + 2·2)·4 = 36; HF pads them to 52, lmkit does not), the
second right-padded after 37; the classifier's rows of 20 take full attention, as HF switches.
In eval mode HF draws no random blocks (each random slot holds block 0) and neither does
lmkit; big_bird_train runs HF in training mode (dropout 0), records the blocks it drew and
hands them to lmkit-forward as `bigbird_random_blocks`.
Tolerance: |lmkit - HF| <= 1e-5 * max(1, max|HF|) for every output and gradient
(float32 on both sides, same LibTorch, eval mode).

Exits 0 on agreement, 1 on a mismatch, 77 (CTest: skipped) when transformers is not importable.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import cases

try:
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
except ImportError as e:  # a LibTorch given by the user, without the project's .venv
    print(f"skipped: the HF interop tests need torch, transformers and safetensors in this Python ({e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(SOURCE, "tests", "fixtures", "hf")
SAMPLE = os.path.join(SOURCE, "data", "wikitext-2-sample")
TOLERANCE = 1e-5

# family -> (fixture with its config and inputs, HF class, name of the labels tensor in the fixture inputs)
FAMILIES = {
    "bert": ("bert", transformers.BertForPreTraining, "mlm_labels"),
    "bert_seqcls": ("bert_seqcls", transformers.BertForSequenceClassification, "labels"),
    "gpt2": ("gpt2", transformers.GPT2LMHeadModel, "labels"),
    "t5": ("t5_relu", transformers.T5ForConditionalGeneration, "labels"),
    "t5_v1_1": ("t5_gated_gelu", transformers.T5ForConditionalGeneration, "labels"),
    "roberta": (None, transformers.RobertaForMaskedLM, "labels"),
    "roberta_seqcls": (None, transformers.RobertaForSequenceClassification, "labels"),
    "spanbert": (None, transformers.BertForMaskedLM, "labels"),  # lmkit-to-hf only: BertForSpanPreTraining's encoder + MLM
    "bert_tokcls": (None, transformers.BertForTokenClassification, "labels"),
    "roberta_tokcls": (None, transformers.RobertaForTokenClassification, "labels"),
    "gpt2_tokcls": (None, transformers.GPT2ForTokenClassification, "labels"),
    "t5_tokcls": (None, transformers.T5ForTokenClassification, "labels"),
    "llama": (None, transformers.LlamaForCausalLM, "labels"),
    "llama_tied": (None, transformers.LlamaForCausalLM, "labels"),
    "llama_seqcls": (None, transformers.LlamaForSequenceClassification, "labels"),
    "llama_tokcls": (None, transformers.LlamaForTokenClassification, "labels"),
    "mistral": (None, transformers.MistralForCausalLM, "labels"),
    "mistral_seqcls": (None, transformers.MistralForSequenceClassification, "labels"),
    "bloom": (None, transformers.BloomForCausalLM, "labels"),
    "bloom_seqcls": (None, transformers.BloomForSequenceClassification, "labels"),
    "bloom_tokcls": (None, transformers.BloomForTokenClassification, "labels"),
    "longformer": (None, transformers.LongformerForMaskedLM, "labels"),
    "longformer_seqcls": (None, transformers.LongformerForSequenceClassification, "labels"),
    "longformer_tokcls": (None, transformers.LongformerForTokenClassification, "labels"),
    "big_bird": (None, transformers.BigBirdForPreTraining, "labels"),
    "big_bird_seqcls": (None, transformers.BigBirdForSequenceClassification, "labels"),
    "big_bird_tokcls": (None, transformers.BigBirdForTokenClassification, "labels"),
    "big_bird_train": (None, transformers.BigBirdForMaskedLM, "labels"),
    "electra": (None, transformers.ElectraForPreTraining, "labels"),
    "electra_gen": (None, transformers.ElectraForMaskedLM, "labels"),
    "electra_seqcls": (None, transformers.ElectraForSequenceClassification, "labels"),
    "electra_tokcls": (None, transformers.ElectraForTokenClassification, "labels"),
    "bert_qa": (None, transformers.BertForQuestionAnswering, "start_positions"),
    "roberta_qa": (None, transformers.RobertaForQuestionAnswering, "start_positions"),
    "longformer_qa": (None, transformers.LongformerForQuestionAnswering, "start_positions"),
    "big_bird_qa": (None, transformers.BigBirdForQuestionAnswering, "start_positions"),
    "vit_imgcls": (None, transformers.ViTForImageClassification, "labels"),
    "vit_interp": (None, transformers.ViTForImageClassification, "labels"),
    "vit_mae": (None, transformers.ViTMAEForPreTraining, "pixel_values"),
}
NUM_TAGS = 5


# Grouped-query attention (4 query heads, 2 key/value heads), head_dim 16, rope_theta off
# its default, attention and MLP biases off as in Llama; pad id 0 for the classifier's last token.
LLAMA_CONFIG = {"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
                "rms_norm_eps": 1e-5, "rope_theta": 5000.0, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


MISTRAL_WINDOW = 8
# 6 heads: 4 slopes of the power-of-two rule and 2 interleaved from the next one.
BLOOM_CONFIG = {"vocab_size": 1000, "hidden_size": 48, "n_layer": 2, "n_head": 6, "layer_norm_epsilon": 1e-5,
                "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


ELECTRA_CONFIG = {"vocab_size": 1000, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64}


LONGFORMER_CONFIG = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                     "intermediate_size": 128, "max_position_embeddings": 130, "type_vocab_size": 1,
                     "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
                     "sep_token_id": 2, "attention_window": [4, 8]}


BIGBIRD_CONFIG = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "intermediate_size": 128, "max_position_embeddings": 128, "block_size": 4, "num_random_blocks": 2,
                  "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "sep_token_id": 3}


def big_bird_inputs(family):
    """Two rows of 50 (20 for the classifier), the second right-padded after 37 (12), token
    types; MLM labels at four positions and NSP labels, one class per row, or a tag per token."""
    g = torch.Generator().manual_seed(5)
    t, real = (20, 12) if family == "big_bird_seqcls" else (50, 37)
    ids = torch.randint(5, BIGBIRD_CONFIG["vocab_size"], (2, t), generator=g)
    mask = torch.ones_like(ids)
    ids[1, real:], mask[1, real:] = 0, 0
    types = (torch.arange(t) >= t // 2).long().expand(2, t).contiguous()
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if family == "big_bird_seqcls":
        batch["labels"] = torch.tensor([1, 0])
    elif family == "big_bird_tokcls":
        labels = torch.randint(0, NUM_TAGS, (2, t), generator=g)
        labels[:, 4], labels[1, real:] = -100, -100
        batch["labels"] = labels
    else:
        labels = torch.full_like(ids, -100)
        for r, c in ((0, 3), (0, 26), (0, 49), (1, 30)):
            labels[r, c] = ids[r, c]
        batch["labels"] = labels
        if family == "big_bird":
            batch["next_sentence_label"] = torch.tensor([0, 1])
    return batch


def hf_training_forward(model, batch):
    """HF's forward and backward in training mode (the config's dropout is 0), with the random
    blocks each layer drew: (layers, heads, blocks - 2, r)."""
    import numpy as np
    from transformers.models.big_bird import modeling_big_bird as mbb
    drawn = []
    original = mbb.BigBirdBlockSparseAttention._bigbird_block_rand_mask_with_head

    def record(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        drawn.append(np.stack(out))
        return out

    mbb.BigBirdBlockSparseAttention._bigbird_block_rand_mask_with_head = record
    try:
        model.train()
        model.zero_grad(set_to_none=True)
        out = model(**batch)
        out.loss.backward()
    finally:
        mbb.BigBirdBlockSparseAttention._bigbird_block_rand_mask_with_head = original
    return out, torch.tensor(np.stack(drawn), dtype=torch.long)


def longformer_inputs(family):
    """Two rows of 29, the second right-padded with <pad> after 21; global tokens (none for
    the classifier, which then puts one on <s>); MLM labels at four positions (one global),
    one class per row, or a tag per token."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, LONGFORMER_CONFIG["vocab_size"], (2, 29), generator=g)
    ids[:, 0] = 0
    mask = torch.ones_like(ids)
    ids[1, 21:], mask[1, 21:] = 1, 0
    batch = {"input_ids": ids, "attention_mask": mask}
    if family != "longformer_seqcls":
        glob = torch.zeros_like(ids)
        glob[0, [0, 7, 15]] = 1
        glob[1, [0, 20, 25]] = 1  # 25 is padding
        batch["global_attention_mask"] = glob
    if family == "longformer_seqcls":
        batch["labels"] = torch.tensor([1, 0])
    elif family == "longformer_tokcls":
        labels = torch.randint(0, NUM_TAGS, (2, 29), generator=g)
        labels[:, 4], labels[1, 21:] = -100, -100
        batch["labels"] = labels
    else:
        labels = torch.full_like(ids, -100)
        for r, c in ((0, 3), (0, 7), (0, 27), (1, 19)):
            labels[r, c] = ids[r, c]
        batch["labels"] = labels
    return batch


def electra_inputs(family):
    """Two rows of 12 with token types (the second half 1), the second right-padded after 8;
    replaced (1) or original (0) per token, MLM labels at three positions, a class per row,
    or a tag per token."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, ELECTRA_CONFIG["vocab_size"], (2, 12), generator=g)
    mask = torch.ones_like(ids)
    ids[1, 8:], mask[1, 8:] = 0, 0
    types = (torch.arange(12) >= 6).long().expand(2, 12).contiguous()
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if family == "electra":
        batch["labels"] = torch.randint(0, 2, (2, 12), generator=g)
    elif family == "electra_gen":
        labels = torch.full_like(ids, -100)
        for r, c in ((0, 3), (0, 9), (1, 5)):
            labels[r, c] = ids[r, c]
        batch["labels"] = labels
    elif family == "electra_seqcls":
        batch["labels"] = torch.tensor([1, 0])
    else:
        labels = torch.randint(0, NUM_TAGS, (2, 12), generator=g)
        labels[:, 4], labels[1, 8:] = -100, -100
        batch["labels"] = labels
    return batch


def rotary(family):
    """The decoders tested on llama_inputs: llama*, mistral and bloom* (ALiBi)."""
    return family.split("_")[0] in ("llama", "mistral", "bloom")


def llama_inputs(family):
    """Two rows of 24, the second right-padded after 17 tokens; causal-LM labels (-100 on the
    padding), one class per row, or a tag per token."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, LLAMA_CONFIG["vocab_size"], (2, 24), generator=g)
    mask = torch.ones_like(ids)
    ids[1, 17:], mask[1, 17:] = 0, 0
    if family.endswith("_seqcls"):
        return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([1, 0])}
    if family.endswith("_tokcls"):
        labels = torch.randint(0, NUM_TAGS, (2, 24), generator=g)
        labels[:, 4], labels[1, 17:] = -100, -100
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
    labels = ids.clone()
    labels[1, 17:] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def made_config(family):
    """The HF config of a family without a committed fixture (RoBERTa, Llama, the token classifiers)."""
    if family == "vit_mae":
        return transformers.ViTMAEConfig(**VIT_CONFIG, **MAE_DECODER)
    if family.startswith("vit"):
        return transformers.ViTConfig(**VIT_CONFIG, num_labels=NUM_TAGS)
    if family.startswith("electra"):
        return transformers.ElectraConfig(**ELECTRA_CONFIG, num_labels=NUM_TAGS if family.endswith("tokcls") else 2)
    if family.startswith("bloom"):
        return transformers.BloomConfig(**BLOOM_CONFIG, num_labels=NUM_TAGS if family.endswith("tokcls") else 2)
    if family.startswith("mistral"):
        return transformers.MistralConfig(**LLAMA_CONFIG, sliding_window=MISTRAL_WINDOW)
    if family.startswith("llama"):
        return transformers.LlamaConfig(**LLAMA_CONFIG, tie_word_embeddings=family == "llama_tied",
                                        num_labels=NUM_TAGS if family.endswith("tokcls") else 2)
    if family.startswith("roberta"):
        return transformers.RobertaConfig(**ROBERTA_CONFIG, num_labels=NUM_TAGS if family.endswith("tokcls") else 2)
    if family.startswith("big_bird"):
        dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0} if family == "big_bird_train" else {}
        return transformers.BigBirdConfig(**BIGBIRD_CONFIG, **dropout, num_labels=NUM_TAGS if family.endswith("tokcls") else 2)
    if family.startswith("longformer"):
        return transformers.LongformerConfig(**LONGFORMER_CONFIG, num_labels=NUM_TAGS if family.endswith("tokcls") else 2)
    c = {k: v for k, v in small_config(family).items() if k != "model_type"}
    cls = {"bert": transformers.BertConfig, "gpt2": transformers.GPT2Config, "t5": transformers.T5Config}[
        family.split("_")[0]]
    extra = {"classifier_dropout": 0.1} if family.startswith("t5") else \
        {"bos_token_id": 1, "eos_token_id": 1} if family.startswith("gpt2") else {}
    return cls(**c, num_labels=2 if family.endswith("_qa") else NUM_TAGS, **extra)


# 32×32 images of 3 channels in patches of 8 (16 patches), GELU, dropout off (ViT's default).
VIT_CONFIG = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
              "image_size": 32, "patch_size": 8, "num_channels": 3, "layer_norm_eps": 1e-6}
MAE_DECODER = {"decoder_hidden_size": 32, "decoder_num_hidden_layers": 2, "decoder_num_attention_heads": 4,
               "decoder_intermediate_size": 64, "norm_pix_loss": True}


def vit_inputs(family):
    """Two images (48×40 for vit_interp: positions interpolated, as HF's interpolate_pos_encoding),
    a class each; MAE's per-patch noise (HF's `noise`), so both drop the same 75% of patches."""
    g = torch.Generator().manual_seed(5)
    h, w = (48, 40) if family == "vit_interp" else (32, 32)
    batch = {"pixel_values": torch.randn(2, 3, h, w, generator=g)}
    if family == "vit_mae":
        batch["noise"] = torch.rand(2, 16, generator=g)
    else:
        batch["labels"] = torch.tensor([1, 3])
    return batch


def qa_inputs(family, config):
    """Question-answering rows: <cls> question <sep> context <sep> (RoBERTa's and Longformer's
    </s></s> between), the second right-padded; no global_attention_mask (Longformer puts global
    attention on the question, to the first separator) and no token types (BigBird's come from
    its question mask); answer positions, one end past the row (clamped and ignored, as HF's)."""
    g = torch.Generator().manual_seed(5)
    t, real, question = {"big_bird_qa": (50, 37, 6), "longformer_qa": (29, 21, 5)}.get(family, (16, 11, 4))
    ids = torch.randint(5, config.vocab_size, (2, t), generator=g)
    mask = torch.ones_like(ids)
    sep = config.sep_token_id if family in ("longformer_qa", "big_bird_qa") else 3
    roberta = family in ("roberta_qa", "longformer_qa")
    ids[:, 0] = 0 if roberta else 2
    ids[:, question] = sep
    if roberta:
        ids[:, question + 1] = sep
    ids[0, t - 1], ids[1, real - 1] = sep, sep
    ids[1, real:], mask[1, real:] = config.pad_token_id, 0
    return {"input_ids": ids, "attention_mask": mask, "start_positions": torch.tensor([question + 3, 0]),
            "end_positions": torch.tensor([question + 5, t + 7])}


def tokcls_inputs(family, vocab):
    """Two rows of 12, the second right-padded after 8 tokens; a tag on most tokens, -100 on
    some (the subwords after a word's first) and on the padding."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, vocab, (2, 12), generator=g)
    mask = torch.ones_like(ids)
    pad = 1 if family.startswith("roberta") else 0
    ids[1, 8:], mask[1, 8:] = pad, 0
    if family.startswith("roberta"):
        ids[:, 0] = 0
    labels = torch.randint(0, NUM_TAGS, (2, 12), generator=g)
    labels[:, 4] = -100
    labels[1, 8:] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
ROBERTA_CONFIG = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "intermediate_size": 128, "max_position_embeddings": 130, "type_vocab_size": 1,
                  "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}


def roberta_inputs(family):
    """Two rows of 12, the second right-padded with <pad> after 8 tokens; MLM labels at
    three positions, or one class per row."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, ROBERTA_CONFIG["vocab_size"], (2, 12), generator=g)
    ids[:, 0] = 0
    mask = torch.ones_like(ids)
    ids[1, 8:], mask[1, 8:] = 1, 0
    if family == "roberta_seqcls":
        return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([1, 0])}
    labels = torch.full_like(ids, -100)
    for r, c in ((0, 3), (0, 9), (1, 5)):
        labels[r, c] = ids[r, c]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
# HF output attributes; lmkit-forward writes each under the same name
OUTPUT_NAMES = ["loss", "logits", "prediction_logits", "seq_relationship_logits", "encoder_last_hidden_state",
                "start_logits", "end_logits", "mask", "ids_restore"]


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        print(" ".join(cmd))
        print(r.stdout)
        raise RuntimeError(f"{os.path.basename(cmd[0])} exited {r.returncode}")
    return r.stdout


def redraw(model, seed):
    """Weights far from HF's init (N(0, 0.1) everywhere, norms 1 + N(0, 0.1)), as the committed
    fixtures do: a port that drops a bias or a norm's affine then fails."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g) * 0.1
            p.copy_(1 + noise if ("LayerNorm.weight" in name or "ln_" in name or "layer_norm.weight" in name)
                    else noise)


def hf_inputs(family, inputs):
    fixture, _, labels_name = FAMILIES[family]
    keys = ["input_ids", "attention_mask", "token_type_ids", "decoder_input_ids", "next_sentence_label"]
    out = {k: inputs[k] for k in keys if k in inputs}
    out["labels"] = inputs[labels_name]
    return out


def hf_forward(model, batch, gradients):
    model.eval()
    model.zero_grad(set_to_none=True)
    # lmkit interpolates ViT's positions for another image size by itself; HF is asked to.
    other_size = "pixel_values" in batch and batch["pixel_values"].shape[-2:] != (model.config.image_size,) * 2
    with torch.set_grad_enabled(gradients):
        out = model(**batch, **({"interpolate_pos_encoding": True} if other_size else {}))
    if gradients:
        out.loss.backward()
    return out


def compare(name, got, want):
    got, want = got.double(), want.double()
    if got.shape != want.shape:
        return f"{name}: shape {tuple(got.shape)} vs HF {tuple(want.shape)}", 0.0
    err = (got - want).abs().max().item() if want.numel() else 0.0
    # BigBird's QA head takes 1e6 off the question's logits: the scale is the other logits'.
    kept = want[want.abs() < 1e5] if name in ("start_logits", "end_logits") else want
    scale = max(1.0, kept.abs().max().item() if kept.numel() else 0.0)
    return (f"{name}: max |diff| {err:.3g} (scale {scale:.3g})" if err > TOLERANCE * scale else None), err / scale


# Transformers 5 names ViT's modules otherwise than the checkpoints it writes and lmkit reads.
LEGACY_NAMES = [(r"(^|\.)layers\.(\d+)\.", r"\1encoder.layer.\2."), (r"attention\.q_proj", "attention.attention.query"),
                (r"attention\.k_proj", "attention.attention.key"), (r"attention\.v_proj", "attention.attention.value"),
                (r"attention\.o_proj", "attention.output.dense"), (r"mlp\.fc1", "intermediate.dense"),
                (r"mlp\.fc2", "output.dense")]


def legacy_name(name):
    import re
    for pattern, replacement in LEGACY_NAMES:
        name = re.sub(pattern, replacement, name)
    return name


def check_outputs(hf_out, lmkit_out, model=None):
    """Every HF output that lmkit writes, and every parameter gradient when `model` is given."""
    failures, worst, checked = [], 0.0, 0
    for name in OUTPUT_NAMES:
        want = getattr(hf_out, name, None)
        if want is None:
            continue
        if name not in lmkit_out:
            failures.append(f"{name}: missing from lmkit-forward's output")
            continue
        bad, rel = compare(name, lmkit_out[name], want.detach())
        failures += [bad] if bad else []
        worst, checked = max(worst, rel), checked + 1
    grads = 0
    if model is not None:
        for pname, p in model.named_parameters():  # tied parameters are listed once, with the summed gradient
            key = "grad." + pname
            if key not in lmkit_out:
                key = "grad." + legacy_name(pname)
            if key not in lmkit_out:
                failures.append(f"{key}: missing from lmkit-forward's output")
                continue
            bad, rel = compare(key, lmkit_out[key], p.grad if p.grad is not None else torch.zeros_like(p))
            failures += [bad] if bad else []
            worst, grads = max(worst, rel), grads + 1
    return failures, worst, checked, grads


def lmkit_forward(bin_dir, checkpoint, inputs_path, out_path, gradients):
    cmd = [os.path.join(bin_dir, "lmkit-forward"), "--checkpoint", checkpoint, "--inputs", inputs_path,
           "--output", out_path, "--threads", "1"]
    run(cmd + (["--gradients"] if gradients else []))
    return load_file(out_path)


def hf_to_lmkit(family, bin_dir, work):
    fixture, cls, _ = FAMILIES[family]
    if fixture is None:
        config = made_config(family)
    else:
        config = transformers.AutoConfig.from_pretrained(os.path.join(FIXTURES, fixture))
    torch.manual_seed(0)
    model = cls(config)
    redraw(model, seed=7)
    ckpt = os.path.join(work, "hf")
    model.save_pretrained(ckpt)
    if family.endswith("_qa"):
        batch = qa_inputs(family, config)
    elif family.startswith("vit"):
        batch = vit_inputs(family)
    elif family.startswith("electra"):
        batch = electra_inputs(family)
    elif family.startswith("longformer"):
        batch = longformer_inputs(family)
    elif family.startswith("big_bird"):
        batch = big_bird_inputs(family)
    elif rotary(family):
        batch = llama_inputs(family)
    elif family.endswith("tokcls"):
        batch = tokcls_inputs(family, config.vocab_size)
    elif fixture is None:
        batch = roberta_inputs(family)
    else:
        batch = hf_inputs(family, load_file(os.path.join(FIXTURES, fixture, "inputs.safetensors")))
    inputs_path = os.path.join(work, "inputs.safetensors")
    if family == "big_bird_train":
        hf_out, drawn = hf_training_forward(model, batch)
        batch = {**batch, "bigbird_random_blocks": drawn}
    save_file({k: v.contiguous() for k, v in batch.items()}, inputs_path)
    if family != "big_bird_train":
        hf_out = hf_forward(model, batch, gradients=True)
    lmkit_out = lmkit_forward(bin_dir, ckpt, inputs_path, os.path.join(work, "lmkit.safetensors"), gradients=True)
    failures, worst, outputs, grads = check_outputs(hf_out, lmkit_out, model)
    if grads == 0:
        failures.append("no gradients compared")
    generated = ""
    if family in ("llama", "llama_tied", "mistral", "bloom"):
        failures += greedy_generation(model, bin_dir, ckpt)
        generated = "; greedy generation with the KV cache and without it equals HF's generate, 40 tokens"
        if family == "mistral":
            generated += f" (5 times the window of {MISTRAL_WINDOW})"
    return failures, f"{outputs} outputs and {grads} parameter gradients; worst |diff|/scale {worst:.2e}{generated}"


def greedy_generation(model, bin_dir, ckpt):
    """lmkit-generate's greedy tokens, with the KV cache (rotary keys cached at their own
    positions) and with a full recompute each step, against HF's generate()."""
    prompt = [5, 17, 42, 99]
    with torch.no_grad():
        want = model.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False, eos_token_id=None,
                              pad_token_id=0)[0, len(prompt):].tolist()
    failures = []
    for extra in ([], ["--no-cache"]):
        out = run([os.path.join(bin_dir, "lmkit-generate"), "--checkpoint", ckpt, "--prompt-ids", ",".join(map(str, prompt)),
                   "--max-new-tokens", "40", "--ids", "--threads", "1"] + extra)
        got = [int(x) for x in out.strip().split("\n")[-1].split(",")]
        if got != want:
            failures.append(f"generation {' '.join(extra) or 'with the cache'}: {got} vs HF {want}")
    return failures


def small_config(family):
    """A model preset small enough to pretrain for two steps in seconds."""
    if family in ("bert", "bert_seqcls", "spanbert", "bert_tokcls", "bert_qa"):
        return {"model_type": "bert", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 128}
    if family in ("roberta", "roberta_seqcls", "roberta_tokcls", "roberta_qa"):
        return {"model_type": "roberta", **{k: v for k, v in ROBERTA_CONFIG.items() if k.endswith("_size") or
                                            k in ("num_hidden_layers", "num_attention_heads", "max_position_embeddings")}}
    if family in ("gpt2", "gpt2_tokcls"):
        return {"model_type": "gpt2", "vocab_size": 1000, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128}
    if family.startswith("electra"):
        return {"model_type": "electra", **ELECTRA_CONFIG}
    if family.startswith("big_bird"):
        # Blocks of 2 with one random block: the 16-token rows below are block-sparse (above 14).
        return {"model_type": "big_bird", **{k: v for k, v in BIGBIRD_CONFIG.items() if not k.endswith("_token_id")},
                "block_size": 2, "num_random_blocks": 1}
    if family.startswith("longformer"):
        return {"model_type": "longformer", **{k: v for k, v in LONGFORMER_CONFIG.items() if not k.endswith("_token_id")}}
    if family.startswith("bloom"):
        return {"model_type": "bloom", **{k: v for k, v in BLOOM_CONFIG.items() if not k.endswith("_token_id")}}
    if family.startswith("mistral"):
        return {"model_type": "mistral", **{k: v for k, v in LLAMA_CONFIG.items() if not k.endswith("_token_id")},
                "sliding_window": MISTRAL_WINDOW}
    if family.startswith("llama"):
        return {"model_type": "llama", **{k: v for k, v in LLAMA_CONFIG.items() if not k.endswith("_token_id")},
                "tie_word_embeddings": family == "llama_tied"}
    gated = family == "t5_v1_1"
    return {"model_type": "t5", "vocab_size": 1000, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2,
            "num_decoder_layers": 2, "num_heads": 4, "feed_forward_proj": "gated-gelu" if gated else "relu",
            "tie_word_embeddings": not gated}


def classification_file(path, lines):
    with open(path, "w") as f:
        f.write("sentence\tlabel\n")
        for line in lines:
            f.write(f"{line}\t{len(line.split()) % 2}\n")


def lmkit_to_hf(family, bin_dir, work):
    preset = os.path.join(work, "preset.json")
    with open(preset, "w") as f:
        json.dump(small_config(family), f)
    objective = {"bert": "mlm+nsp", "bert_seqcls": "mlm+nsp", "gpt2": "clm", "roberta": "mlm",
                 "roberta_seqcls": "mlm", "spanbert": "mlm+sbo", "bert_tokcls": "mlm", "roberta_tokcls": "mlm",
                 "gpt2_tokcls": "clm", "longformer": "mlm", "longformer_seqcls": "mlm", "longformer_tokcls": "mlm",
                 "big_bird": "mlm+nsp", "big_bird_seqcls": "mlm", "big_bird_tokcls": "mlm", "bert_qa": "mlm", "roberta_qa": "mlm",
                 "longformer_qa": "mlm", "big_bird_qa": "mlm"}.get(family, "clm" if rotary(family) else "mlm" if family.startswith("electra") else "span")
    run_dir = os.path.join(work, "pretrain")
    run([os.path.join(bin_dir, "lmkit-pretrain"), "--model", preset, "--train", os.path.join(SAMPLE, "valid.txt"),
         "--output", run_dir, "--objective", objective, "--vocab-size", "1000", "--steps", "2", "--batch-size", "4",
         "--seq-len", "32", "--threads", "1", "--seed", "3"])
    ckpt = os.path.join(run_dir, "final")
    if family.endswith("_seqcls"):
        with open(os.path.join(SAMPLE, "valid.txt")) as f:
            lines = [l.strip() for l in f if len(l.split()) > 3][:64]
        classification_file(os.path.join(work, "train.tsv"), lines[:48])
        classification_file(os.path.join(work, "dev.tsv"), lines[48:])
        run([os.path.join(bin_dir, "lmkit-finetune"), "--checkpoint", ckpt, "--train", os.path.join(work, "train.tsv"),
             "--dev", os.path.join(work, "dev.tsv"), "--output", os.path.join(work, "finetune"), "--epochs", "1",
             "--batch-size", "8", "--max-length", "32", "--threads", "1"])
        ckpt = os.path.join(work, "finetune", "best")
    if family.endswith("tokcls"):
        ner = os.path.join(SOURCE, "tests", "fixtures", "ner")
        run([os.path.join(bin_dir, "lmkit-finetune"), "--task", "token-classification", "--checkpoint", ckpt,
             "--train", os.path.join(ner, "train.conll"), "--dev", os.path.join(ner, "dev.conll"),
             "--output", os.path.join(work, "finetune"), "--epochs", "1", "--batch-size", "16", "--max-length", "32",
             "--threads", "1"])
        ckpt = os.path.join(work, "finetune", "best")
    if family.endswith("_qa"):
        squad = os.path.join(SOURCE, "tests", "fixtures", "squad")
        run([os.path.join(bin_dir, "lmkit-finetune"), "--task", "question-answering", "--checkpoint", ckpt,
             "--train", os.path.join(squad, "train.json"), "--dev", os.path.join(squad, "dev.json"),
             "--output", os.path.join(work, "finetune"), "--epochs", "1", "--batch-size", "16", "--max-length", "64",
             "--max-query-length", "16", "--doc-stride", "16", "--threads", "1"])
        ckpt = os.path.join(work, "finetune", "best")
    _, cls, _ = FAMILIES[family]
    model, info = cls.from_pretrained(ckpt, output_loading_info=True)
    sbo_head = []
    if family == "spanbert":  # HF has no span-boundary head: BertForMaskedLM leaves SpanBERT's 10 tensors aside
        sbo_head = [k for k in info["unexpected_keys"] if k.startswith("cls.pair_target_predictions.")]
        info["unexpected_keys"] = [k for k in info["unexpected_keys"] if k not in sbo_head]
    failures = [f"{k}: {v}" for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")]
    if family == "spanbert" and len(sbo_head) != 10:
        failures.append(f"expected the span boundary head's 10 tensors beside BertForMaskedLM's, got {sbo_head}")
    # Inputs within the trained vocabulary, the second row right-padded.
    g = torch.Generator().manual_seed(11)
    vocab = model.config.vocab_size
    ids = torch.randint(4, vocab, (2, 16), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    if family.startswith(("roberta", "longformer")) or family in ("llama_seqcls", "bloom_seqcls", "mistral_seqcls"):
        # padding is the pad id: RoBERTa's positions skip it, HF's Llama classifier finds the last token by it
        ids[1, 10:] = model.config.pad_token_id
    batch = {"input_ids": ids, "attention_mask": mask}
    if family.endswith("_qa"):  # a separator after the question (Longformer's global tokens, BigBird's question mask)
        ids[:, 4] = model.config.sep_token_id if family in ("longformer_qa", "big_bird_qa") else ids[:, 4]
    if family in ("longformer", "longformer_tokcls", "longformer_qa"):
        glob = torch.zeros_like(ids)
        glob[:, [0, 5]] = 1
        batch["global_attention_mask"] = glob
    if family in ("bert", "big_bird"):
        batch["token_type_ids"] = (torch.arange(16) >= 8).long().expand(2, 16).contiguous()
        labels = torch.full_like(ids, -100)
        labels[:, 3] = ids[:, 3]
        batch["labels"], batch["next_sentence_label"] = labels, torch.tensor([0, 1])
    elif family.endswith("_seqcls"):
        batch["labels"] = torch.tensor([0, 1])
    elif family.endswith("tokcls"):
        batch["labels"] = torch.randint(0, model.config.num_labels, (2, 16), generator=g).masked_fill(mask == 0, -100)
    elif family.endswith("_qa"):
        batch["start_positions"], batch["end_positions"] = torch.tensor([6, 0]), torch.tensor([8, 0])
    elif family in ("roberta", "spanbert", "electra_gen", "longformer"):
        labels = torch.full_like(ids, -100)
        labels[:, 3:6] = ids[:, 3:6]  # one span per row
        batch["labels"] = labels
    elif family in ("gpt2", "llama", "llama_tied", "mistral", "bloom"):
        batch["labels"] = ids.masked_fill(mask == 0, -100)
    else:
        batch["decoder_input_ids"] = torch.randint(4, vocab, (2, 6), generator=g)
        batch["labels"] = torch.randint(4, vocab, (2, 6), generator=g)
    inputs_path = os.path.join(work, "inputs.safetensors")
    save_file(batch, inputs_path)
    hf_out = hf_forward(model, batch, gradients=False)
    lmkit_out = lmkit_forward(bin_dir, ckpt, inputs_path, os.path.join(work, "lmkit.safetensors"), gradients=False)
    if family == "spanbert":  # HF's loss is the MLM term; lmkit's adds the span boundary term
        total, mlm, sbo = lmkit_out["loss"], lmkit_out["loss.mlm"], lmkit_out["loss.sbo"]
        if not (torch.isfinite(sbo) and sbo > 0 and torch.allclose(total, mlm + sbo)):
            failures.append(f"loss {total} is not loss.mlm {mlm} + loss.sbo {sbo}")
        lmkit_out["loss"] = mlm
    more, worst, outputs, _ = check_outputs(hf_out, lmkit_out)
    failures += more
    if outputs == 0:
        failures.append("no outputs compared")
    aside = f" (beside the span boundary head's {len(sbo_head)} tensors)" if sbo_head else ""
    return failures, (f"{type(model).__name__} loaded with no missing/unexpected keys{aside}; {outputs} outputs; "
                      f"worst |diff|/scale {worst:.2e}")


def vit_lmkit_to_hf(family, bin_dir, work):
    """No image pipeline trains a ViT yet: lmkit reads HF's random model and writes it back with
    lmkit-forward --save (vit: as ViTModel, its pooler a new head), and HF's from_pretrained
    must load lmkit's files with no missing or unexpected keys and give lmkit-forward's outputs."""
    config = made_config(family)
    torch.manual_seed(0)
    cls = FAMILIES[family][1]
    model = cls(config)
    redraw(model, seed=7)
    model.save_pretrained(os.path.join(work, "hf"))
    batch = vit_inputs(family)
    inputs_path = os.path.join(work, "inputs.safetensors")
    architecture = []
    if family == "vit_imgcls":  # the base model under a pooler lmkit starts at random
        batch.pop("labels")
        cls, architecture = transformers.ViTModel, ["--architecture", "ViTModel", "--new-head"]
    save_file(batch, inputs_path)
    saved = os.path.join(work, "lmkit")
    run([os.path.join(bin_dir, "lmkit-forward"), "--checkpoint", os.path.join(work, "hf"), "--inputs", inputs_path,
         "--output", os.path.join(work, "lmkit.safetensors"), "--save", saved, "--threads", "1"] + architecture)
    lmkit_out = load_file(os.path.join(work, "lmkit.safetensors"))
    back, info = cls.from_pretrained(saved, output_loading_info=True)
    failures = [f"{k}: {v}" for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")]
    hf_out = hf_forward(back, batch, gradients=False)
    names = ["last_hidden_state", "pooler_output"] if family == "vit_imgcls" else OUTPUT_NAMES
    worst, checked = 0.0, 0
    for name in names:
        want = getattr(hf_out, name, None)
        if want is None:
            continue
        bad, rel = compare(name, lmkit_out[name], want.detach())
        failures += [bad] if bad else []
        worst, checked = max(worst, rel), checked + 1
    if checked == 0:
        failures.append("no outputs compared")
    summary = (f"{type(back).__name__} loaded lmkit-forward --save's files with no missing/unexpected keys; "
               f"{checked} outputs; worst |diff|/scale {worst:.2e}")
    if family == "vit_mae":
        more, said = mae_as_vit(bin_dir, work, batch)
        failures, summary = failures + more, summary + "; " + said
    return failures, summary


def mae_as_vit(bin_dir, work, batch):
    """An MAE checkpoint finetunes as a ViT: HF's ViTModel.from_pretrained reads its encoder (the
    fixed sine-cosine positions as the learned table), and so must lmkit (--architecture ViTModel)."""
    pixels = {"pixel_values": batch["pixel_values"]}
    inputs_path = os.path.join(work, "vit_inputs.safetensors")
    save_file(pixels, inputs_path)
    out = os.path.join(work, "as_vit.safetensors")
    run([os.path.join(bin_dir, "lmkit-forward"), "--checkpoint", os.path.join(work, "hf"), "--inputs", inputs_path,
         "--output", out, "--architecture", "ViTModel", "--new-head", "--threads", "1"])
    hf = transformers.ViTModel.from_pretrained(os.path.join(work, "hf"))
    want = hf_forward(hf, pixels, gradients=False).last_hidden_state.detach()
    bad, rel = compare("last_hidden_state (MAE as ViTModel)", load_file(out)["last_hidden_state"], want)
    return ([bad] if bad else []), f"read as ViTModel (HF's from_pretrained of the MAE files): |diff|/scale {rel:.2e}"


def run_case(direction, family, bin_dir, work):
    shutil.rmtree(work, ignore_errors=True)  # lmkit's apps replace no earlier outputs without --overwrite
    os.makedirs(work)
    fn = hf_to_lmkit if direction == "hf-to-lmkit" else vit_lmkit_to_hf if family.startswith("vit") else lmkit_to_hf
    failures, summary = fn(family, bin_dir, work)
    print(f"{direction} {family} (transformers {transformers.__version__}, torch {torch.__version__}): {summary}")
    for f in failures:
        print(f"FAIL: {direction} {family}: {f}")
    return not failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+", metavar="CASE",
                    help="DIRECTION:FAMILY, several in one process (tests/interop/cases.py), or DIRECTION FAMILY")
    ap.add_argument("--bin", required=True, help="folder with lmkit-forward, lmkit-pretrain, lmkit-finetune")
    ap.add_argument("--work", required=True, help="scratch folder (created; a subfolder DIRECTION-FAMILY a case)")
    ap.add_argument("--plugin", help="a plugin the apps load first (ELECTRA's: examples/electra)")
    a = ap.parse_args()
    parsed = cases.parse(ap, a.cases, {"hf-to-lmkit": FAMILIES, "lmkit-to-hf": FAMILIES})
    if a.plugin:
        os.environ["LMKIT_PLUGINS"] = a.plugin
    torch.set_num_threads(1)
    cases.run(parsed, a.work, lambda d, f, folder: run_case(d, f, a.bin, folder))


if __name__ == "__main__":
    main()
