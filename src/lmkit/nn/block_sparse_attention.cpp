// BigBird's block-sparse attention (Zaheer et al. 2020), as HF's BigBirdBlockSparseAttention:
// global first and last blocks, a sliding window of three blocks and random_blocks random
// ones, each of block_size positions. An input of at most (5 + 2·random_blocks)·block_size
// positions takes full attention, as HF's does.
#include <ATen/ATen.h>

#include "lmkit/core/error.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/attentions_builtin.h"

namespace lmkit::nn {

namespace {

class BlockSparseAttention : public AttentionKernel {
 public:
  BlockSparseAttention(torch::nn::Module& host, const AttentionSettings& s)
      : AttentionKernel(host, s), block_(s.integer("block_size")), random_(s.integer("random_blocks")) {}

  /// HF's switch: block-sparse only past (5 + 2r) blocks, where it saves anything.
  bool sparse(int64_t t) const { return t > (5 + 2 * random_) * block_; }

  at::Tensor attend(const AttentionInputs& in) override {
    const at::Tensor &q = in.q, &k = in.k, &v = in.v;
    const int64_t b = q.size(0), h = q.size(1), t = q.size(2);
    if (!sparse(t)) {
      return scaled_dot_product(q, k, v, additive_bias(in.mask, b, t, q.scalar_type()), settings_.scale, settings_.dropout,
                                training(), settings_.backend);
    }
    at::Tensor real = real_keys(in.mask, b, t, "BigBird");
    const int64_t padded = (t + block_ - 1) / block_ * block_, nb = padded / block_;
    if (!real.defined()) real = at::ones({b, t}, q.options().dtype(at::kBool));
    real = at::constant_pad_nd(real.to(at::kByte), {0, padded - t}).ne(0);  // HF pads to whole blocks with masked keys
    auto pad = [&](const at::Tensor& x) { return at::constant_pad_nd(x, {0, 0, 0, padded - t}); };
    at::Tensor blocks = in.mask.random_blocks;
    if (blocks.defined()) {  // given (the test hook): checked; drawn ones are valid by construction, with no host sync
      check_blocks(blocks, h, nb, t);
    } else {
      blocks = training() ? draw_random_blocks(h, nb, random_, q.device()) : at::zeros({h, nb - 2, random_}, q.options().dtype(at::kLong));
    }
    return block_sparse_attention(pad(q), pad(k), pad(v), real, block_, blocks, settings_.scale).slice(2, 0, t);
  }

  double flops_per_token(int64_t keys) const override {
    return AttentionKernel::flops_per_token(sparse(keys) ? (5 + random_) * block_ : keys);  // over (5 + r) blocks
  }

 private:
  void check_blocks(const at::Tensor& blocks, int64_t h, int64_t nb, int64_t t) const {
    // Integers, named (float32 blocks reached gather() and its raw error).
    check_input(at::isIntegralType(blocks.scalar_type(), /*includeBool=*/false),
                "attention: BigBird's random blocks must be an integer tensor of block numbers, got " +
                    std::string(c10::toString(blocks.scalar_type())));
    check_input(blocks.dim() == 3 && blocks.size(0) == h && blocks.size(1) == nb - 2 && blocks.size(2) == random_,
                "attention: BigBird's random blocks must be (" + std::to_string(h) + ", " + std::to_string(nb - 2) + ", " +
                    std::to_string(random_) + ") for " + std::to_string(t) + " positions, got " + c10::str(blocks.sizes()));
    check_input(blocks.numel() == 0 || (blocks.min().item<int64_t>() >= 0 && blocks.max().item<int64_t>() < nb),
                "attention: BigBird's random blocks must be block numbers in [0, " + std::to_string(nb) + ")");
  }

  int64_t block_, random_;
};

}  // namespace

AttentionSpec block_sparse_attention_spec() {
  AttentionSpec s;
  s.name = "block_sparse";
  s.summary = "global, window and random blocks of block_size positions (Zaheer et al. 2020; BigBird's own)";
  s.causal = false;
  s.cache = false;
  s.documents = false;
  s.family_only = true;  // selected by BigBird's attention_type, its blocks by block_size and num_random_blocks
  s.check = [](const AttentionSettings& settings) {
    check_input(settings.integer("block_size") >= 1 && settings.integer("random_blocks") >= 0,
                "attention: BigBird's block_size must be at least 1 and random_blocks at least 0");
  };
  s.create = [](torch::nn::Module& host, const AttentionSettings& settings) {
    return std::make_unique<BlockSparseAttention>(host, settings);
  };
  return s;
}

}  // namespace lmkit::nn
