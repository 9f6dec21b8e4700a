// Forward + backward of one encoder layer (BERT-style, post-norm, exact GELU),
// by default at bert-mini's shape: B=32, T=128, d=256, 4 heads, FFN 1024.
//
// FLOPs counted (matmuls only; each multiply-add is 2 FLOPs), forward:
//   projections  2·B·T·(4·d² + 2·d·F)      (Q, K, V, output; FFN in and out)
//   attention    2·2·B·T²·d                (QKᵀ and P·V over all heads)
// backward = 2 × forward, so a training step = 3 × forward.
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>

#include "bench.h"
#include "lmkit/core/app.h"
#include "lmkit/core/runtime.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/transformer_layer.h"

namespace lmkit::bench {

namespace {

struct LayerArgs {
  RuntimeOptions runtime;
  int64_t batch = 32, seq = 128, dim = 256, heads = 4, ffn = 1024;
  int steps = 20, warmup = 3;
  double dropout = 0.1;
  bool causal = false;
};

void run_layer(const LayerArgs& a) {
  const c10::Device device = init_runtime(a.runtime);
  nn::TransformerLayer layer(nn::TransformerLayerOptions(a.dim, a.heads, a.ffn)
                                 .dropout(a.dropout)
                                 .attention_dropout(a.dropout)
                                 .norm_eps(1e-12));
  layer->to(device);
  layer->train();
  auto opts = at::TensorOptions().device(device);
  at::Tensor x = at::randn({a.batch, a.seq, a.dim}, opts).requires_grad_(true);
  at::Tensor bias = nn::attention_bias(at::ones({a.batch, a.seq}, opts.dtype(at::kLong)), a.causal, a.seq, a.seq,
                                       at::kFloat, device);
  auto sync = [&] {
    if (device.is_cuda()) x.grad().cpu();
  };
  std::vector<double> ms;
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    layer->zero_grad();
    x.mutable_grad() = at::Tensor();
    layer(x, bias).sum().backward();
    sync();
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= a.warmup) ms.push_back(dt);
  }
  const double step_ms = median(ms);
  const double bt = static_cast<double>(a.batch * a.seq), d = static_cast<double>(a.dim);
  const double fwd = 2 * bt * (4 * d * d + 2 * d * a.ffn) + 4 * bt * a.seq * d;
  const double gflops = 3 * fwd / (step_ms / 1e3) / 1e9;
  const double gemm = measure_gemm_gflops(1024, 0.5, device);
  std::printf("encoder layer fwd+bwd  B=%lld T=%lld d=%lld heads=%lld ffn=%lld dropout=%.2f threads=%d device=%s\n",
              static_cast<long long>(a.batch), static_cast<long long>(a.seq), static_cast<long long>(a.dim),
              static_cast<long long>(a.heads), static_cast<long long>(a.ffn), a.dropout, at::get_num_threads(),
              device.str().c_str());
  std::printf("step (median of %d)    %.2f ms\n", a.steps, step_ms);
  std::printf("tokens/s               %.0f\n", bt / (step_ms / 1e3));
  std::printf("achieved               %.1f GFLOP/s  (3 x forward matmul FLOPs = %.3f GFLOP)\n", gflops, 3 * fwd / 1e9);
  std::printf("fp32 GEMM 1024^2       %.1f GFLOP/s  (same run)\n", gemm);
  std::printf("ratio                  %.2f of the GEMM rate\n", gflops / gemm);
}

}  // namespace

void add_layer_command(CLI::App& app) {
  auto args = std::make_shared<LayerArgs>();
  CLI::App* cmd = app.add_subcommand("layer", "forward+backward of one encoder layer vs the GEMM rate");
  add_runtime_flags(*cmd, args->runtime);
  cmd->add_option("--batch-size", args->batch, "batch size B")->check(positive());
  cmd->add_option("--seq-len", args->seq, "sequence length T")->check(positive());
  cmd->add_option("--hidden", args->dim, "model width d")->check(positive());
  cmd->add_option("--heads", args->heads, "attention heads")->check(positive());
  cmd->add_option("--ffn", args->ffn, "feed-forward width")->check(positive());
  cmd->add_option("--steps", args->steps, "timed steps")->check(positive());
  cmd->add_option("--warmup", args->warmup, "untimed steps first")->check(non_negative());
  cmd->add_option("--dropout", args->dropout, "dropout on residuals and attention")->check(in_range(0.0, 1.0));
  cmd->add_flag("--causal", args->causal, "causal mask (decoder-style)");
  cmd->callback([args] { run_layer(*args); });
}

}  // namespace lmkit::bench
