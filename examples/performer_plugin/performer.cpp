// Performer's FAVOR+ attention (Choromanski et al. 2021, "Rethinking Attention with
// Performers") as an lmkit plugin: one file, one registration. softmax(QKᵀ/√d)·V is
// approximated with positive orthogonal random features φ (the paper's Lemma 1, §2.3-2.4):
//   φ(x) = m^−½ · exp(ω_i·x' − |x'|²/2)  for the m rows ω_i,  x' = x / d^¼,
//   Att(Q, K, V) = D⁻¹ (φ(Q) (φ(K)ᵀ V)),  D = diag(φ(Q) (φ(K)ᵀ 1)),
// in O(T·m·d) time and memory instead of O(T²·d). The rows are drawn once, orthogonal in
// blocks of d with χ_d norms, from lmkit's generator, and saved with the model (a frozen
// parameter, "performer_features"), so a reference can use the same ones. As
// performer-pytorch, each exponent is shifted by a maximum for stability (the query's own
// row maximum, the keys' overall one), which D cancels, and padded keys' φ rows are zero.
//   {"model_type": "bert", ..., "attention": "performer", "performer_features": 64}
//   lmkit-pretrain --plugin liblmkit_performer.so --model performer-bert.json ...
#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <tuple>

#include "lmkit/core/error.h"
#include "lmkit/core/plugin.h"
#include "lmkit/nn/attention_kernel.h"

namespace {

using namespace lmkit;

// m rows of dimension d: blocks of d orthonormal rows (QR of a Gaussian), each row scaled by
// the norm of an independent Gaussian vector (the χ_d norms of i.i.d. rows).
at::Tensor orthogonal_features(int64_t m, int64_t d) {
  std::vector<at::Tensor> blocks;
  for (int64_t done = 0; done < m; done += d) {
    const at::Tensor q = std::get<0>(at::linalg_qr(at::randn({d, d})));  // columns orthonormal
    blocks.push_back(q.t().slice(0, 0, std::min(d, m - done)));
  }
  const at::Tensor norms = at::randn({m, d}).norm(2, {1}, /*keepdim=*/true);
  return at::cat(blocks, 0) * norms;  // (m, d)
}

class Performer : public nn::AttentionKernel {
 public:
  Performer(torch::nn::Module& host, const nn::AttentionSettings& s) : AttentionKernel(host, s) {
    const int64_t m = s.integer("performer_features");
    features_ = host.register_parameter("performer_features", orthogonal_features(m, s.head_dim), /*requires_grad=*/false);
  }

  at::Tensor attend(const nn::AttentionInputs& in) override {
    const int64_t b = in.k.size(0), t = in.k.size(2);
    const at::Tensor real = nn::real_keys(in.mask, b, t, "Performer");
    const at::Tensor qf = feature_map(in.q, {});  // (B, H, Tq, m)
    const at::Tensor keep = real.defined() ? real.view({b, 1, t, 1}) : at::ones({b, 1, t, 1}, in.k.options().dtype(at::kBool));
    const at::Tensor kf = feature_map(in.k, keep) * keep.to(in.k.scalar_type());  // (B, H, Tk, m); padded keys: 0
    const at::Tensor kv = at::matmul(kf.transpose(-2, -1), in.v);                // (B, H, m, hd)
    const at::Tensor normaliser = at::matmul(qf, kf.sum(2).unsqueeze(-1));       // (B, H, Tq, 1)
    return at::matmul(qf, kv) / normaliser;                                      // (B, H, Tq, hd)
  }

  double flops_per_token(int64_t) const override {
    // φ(q), φ(k), φ(K)ᵀV and φ(Q)·(φ(K)ᵀV): 2·m·hd each a head.
    return 8.0 * static_cast<double>(features_.size(0)) * static_cast<double>(settings_.num_heads * settings_.head_dim);
  }
  std::vector<std::string> parameter_names() const override { return {"performer_features"}; }

 private:
  // φ(x) for x (B, H, T, hd): the scores' scale folded in (x / d^¼ on both sides), and the
  // exponent shifted by the query row's own maximum, or for keys (`keys`: (B, 1, T, 1), the
  // real ones) by the maximum over a head's real keys; the shift is a constant, not trained through.
  at::Tensor feature_map(const at::Tensor& x, const at::Tensor& keys) const {
    const double m = static_cast<double>(features_.size(0));
    const at::Tensor xs = x * std::sqrt(settings_.scale);  // scale = 1/√d: x / d^¼
    const at::Tensor projected = at::matmul(xs, features_.to(x.scalar_type()).t());  // (B, H, T, m)
    const at::Tensor half_norm = xs.pow(2).sum(-1, true) / 2;
    const at::Tensor shift = !keys.defined() ? projected.amax({-1}, true)
                                             : projected.masked_fill(keys.logical_not(), -INFINITY).amax({-2, -1}, true);
    // A head with no real key (an all-padding row) shifts by 0.
    return (at::exp(projected - half_norm - at::nan_to_num(shift.detach(), 0.0, 0.0, 0.0)) + 1e-4) / std::sqrt(m);
  }

  at::Tensor features_;  // (m, hd) ω rows, shared by the heads; not trained
};

void register_performer() {
  nn::AttentionSpec spec;
  spec.name = "performer";
  spec.summary = "FAVOR+ positive orthogonal random features, O(T·m·d) (Choromanski et al. 2021)";
  spec.fields = {{"performer_features", int64_t{64}, "m, the random features a head's softmax kernel is approximated with",
                  1, 65536, {}}};
  spec.causal = false;  // the bidirectional form (an encoder's self-attention)
  spec.cache = false;
  spec.documents = false;  // the sums over keys mix packed documents
  spec.create = [](torch::nn::Module& host, const nn::AttentionSettings& s) { return std::make_unique<Performer>(host, s); };
  nn::register_attention(spec);
}

}  // namespace

LMKIT_PLUGIN(register_performer)
