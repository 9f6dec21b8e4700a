// The attentions lmkit registers itself (attention_kernel.h), one file each.
#pragma once

#include "lmkit/nn/attention_kernel.h"

namespace lmkit::nn {

/// softmax(QKᵀ·s + bias)·V through SDPA (flash/efficient/cuDNN kernels where they apply).
AttentionSpec full_attention();
/// Wang et al. 2020: keys and values projected along the sequence to k rows (linformer_attention.cpp).
AttentionSpec linformer_attention();
/// Shaw et al. 2018: learned key and value terms by clipped relative distance (relative_attention.cpp).
AttentionSpec relative_attention();
/// Beltagy et al. 2020: a band of local keys and global tokens (longformer_attention.cpp).
AttentionSpec longformer_attention();
/// Zaheer et al. 2020: BigBird's block-sparse attention (block_sparse_attention.cpp).
AttentionSpec block_sparse_attention_spec();

}  // namespace lmkit::nn
