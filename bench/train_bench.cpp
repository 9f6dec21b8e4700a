// lmkit-bench train: the training step of lmkit-pretrain (train::train_step:
// forward, backward, clip, AdamW) on random token data, so no tokenizer or
// corpus is needed. Warm-up steps are excluded; the median step time is reported.
//
// FLOPs counted (matmuls only, 2 per multiply-add; a training step is 3× the forward):
//   per token, per layer:  2·(matrix parameters of the layer) + 4·T·H·hd   (projections; QKᵀ and P·V)
//   per predicted token:   2·d·V (+ 2·d² for BERT's MLM transform)        (only where a loss is taken)
// Encoder–decoder models count encoder tokens through the encoder and decoder
// tokens through the decoder (cross-attention against the S encoder positions).
#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "bench.h"
#include "lmkit/nn/recompute.h"
#include "lmkit/core/allocator.h"
#include "lmkit/core/app.h"
#include "lmkit/core/file.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/models/summary.h"
#include "lmkit/train/step.h"

namespace lmkit::bench {

namespace {

struct TrainArgs {
  RuntimeOptions runtime;
  std::string model, objective, dtype = "fp32";
  int64_t batch = 32, seq = 128, vocab = 0, target_len = 0;
  int steps = 10, warmup = 3;
  bool tf32 = false, overwrite = false;
  std::string profile;  // a Chrome trace of two steps after the timed ones (kernels with their GPU times)
  double peak_tflops = 0;  // 0: an H100 SXM's dense peak for the dtype on CUDA, none on CPU
  bool recompute = false;  // --recompute: each layer's activations recomputed in backward
};

void run_train(const TrainArgs& a) {
  const c10::Device device = init_runtime(a.runtime);
  if (!a.profile.empty()) check_output_file(a.profile, a.overwrite, "--profile");  // before minutes of timing
  Json config = load_json_file(a.model);
  if (a.vocab > 0) config["vocab_size"] = a.vocab;
  const std::string type = config.value("model_type", "");
  const models::Family& family = models::family(type);
  // Masked LM is timed alone unless asked (the HF peer is BertForMaskedLM); --objective must apply.
  const bool has_mlm = std::any_of(family.objectives.begin(), family.objectives.end(),
                                   [](const models::Objective& o) { return o.name == "mlm"; });
  const models::Objective& chosen = family.objective(a.objective.empty() && has_mlm ? "mlm" : a.objective);
  const std::string& objective = chosen.name;
  auto model = models::create_model(config, a.model, chosen.architecture);
  model->to(device);
  model->train();
  if (a.tf32) at::globalContext().setAllowTF32CuBLAS(true), at::globalContext().setAllowTF32CuDNN(true);
  const int64_t vocab = model->vocab_size();
  const data::ObjectiveSpec& spec = data::objective(objective);
  int64_t target_len = a.target_len;
  if (target_len == 0) target_len = spec.target_length ? spec.target_length(a.seq) : a.seq;
  auto random_batch = [&] { return spec.synthetic(a.batch, a.seq, target_len, vocab).to(device); };

  auto optimizer = train::make_adamw(*model, {1e-4, 0.01, 0.9, 0.999, 1e-6});
  const train::Precision precision = train::parse_precision(a.dtype);
  const bool bf16 = precision != train::Precision::kFp32;
  std::vector<double> ms, forward_ms, backward_ms, update_ms;
  double loss = 0;
  double rss_warm = 0, rss_tenth = 0, heap_warm = 0, heap_tenth = 0;
  const int tenth = std::max(1, a.steps / 10);
  // The timed steps run as lmkit-pretrain runs them (the device waited for once per step);
  // then a few more wait after each part, for a true forward / backward / update split.
  const int split_steps = device.is_cuda() ? std::min(a.steps, 5) : 0;
  const nn::RecomputeScope recompute(a.recompute);
  for (int i = 0; i < a.warmup + a.steps + split_steps; ++i) {
    Batch b = random_batch();
    const bool split = i >= a.warmup + a.steps;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = train::train_step(*model, *optimizer, {b}, 1.0, precision, nullptr, split || !device.is_cuda());
    if (device.is_cuda()) model->parameters()[0].cpu();
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i + 1 == a.warmup) rss_warm = current_rss_mib(), heap_warm = heap_in_use_mib();
    if (i + 1 == a.warmup + tenth) rss_tenth = current_rss_mib(), heap_tenth = heap_in_use_mib();
    if (i >= a.warmup && !split) ms.push_back(dt);
    if (i >= a.warmup && (split || !device.is_cuda())) {
      forward_ms.push_back(r.forward_ms), backward_ms.push_back(r.backward_ms), update_ms.push_back(r.update_ms);
    }
    if (!split) loss = r.loss;
  }
  if (!a.profile.empty()) {
    profile_to(a.profile, device.is_cuda(), [&] {
      for (int i = 0; i < 2; ++i) {
        Batch b = random_batch();
        train::train_step(*model, *optimizer, {b}, 1.0, precision);
      }
      if (device.is_cuda()) model->parameters()[0].cpu();
    });
  }
  const double rss_end = current_rss_mib(), heap_end = heap_in_use_mib();
  const double step_ms = median(ms);

  // Useful matmul FLOPs of one step (see the header comment): three times the forward's.
  const double bt = static_cast<double>(a.batch * a.seq);
  const double per_step = 3.0 * bt * model->flops_per_token(a.seq, target_len);
  const double gflops = per_step / (step_ms / 1e3) / 1e9;
  const double gemm = measure_gemm_gflops(1024, 0.5, device);
  // Encoder–decoder models count encoder + decoder tokens (as the HuggingFace reference does).
  const bool encoder_decoder = family.encoder_decoder;
  const double step_tokens = bt + (encoder_decoder ? static_cast<double>(a.batch * target_len) : 0.0);
  const double tokens_per_sec = step_tokens / (step_ms / 1e3);
  std::printf("model                  %s (%s, %lld parameters, vocab %lld) objective %s dtype %s\n", a.model.c_str(),
              model->architecture().c_str(), static_cast<long long>(models::count_parameters(*model)),
              static_cast<long long>(vocab), objective.c_str(), a.dtype.c_str());
  std::printf("shape                  batch %lld x %lld tokens%s, threads %d, device %s%s\n", static_cast<long long>(a.batch),
              static_cast<long long>(a.seq),
              encoder_decoder ? (" -> " + std::to_string(target_len) + " target").c_str() : "",
              at::get_num_threads(), device.str().c_str(), a.recompute ? ", layers recomputed in backward" : "");
  std::printf("step (median of %d)    %.1f ms  (forward + backward + clip + AdamW; loss %.3f)\n", a.steps, step_ms, loss);
  std::printf("parts (medians%s) forward %.1f ms, backward %.1f ms, clip + AdamW %.1f ms\n",
              device.is_cuda() ? (" of " + std::to_string(split_steps) + " synced steps").c_str() : "",
              median(forward_ms), median(backward_ms), median(update_ms));
  std::printf("achieved               %.1f GFLOP/s useful matmul FLOPs (%.2f GFLOP/step)\n", gflops, per_step / 1e9);
  std::printf("fp32 GEMM 1024^2       %.1f GFLOP/s (same run); ratio %.2f\n", gemm, gflops / gemm);
  double peak = a.peak_tflops;
  if (peak == 0 && device.is_cuda()) peak = bf16 ? 989.4 : a.tf32 ? 494.7 : 66.9;  // H100 SXM, dense
  if (peak > 0) {
    std::printf("MFU                    %.1f%% of %.1f TFLOP/s%s\n", 100 * gflops / (peak * 1e3), peak,
                a.peak_tflops == 0 ? " (an H100 SXM's dense peak for the dtype; --peak-tflops for another)" : "");
  }
  if (device.is_cuda()) {
    const auto stats = at::accelerator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    std::printf("peak GPU memory        %.0f MiB allocated (%.0f MiB reserved), whole run\n",
                stats.allocated_bytes[all].peak / 1048576.0, stats.reserved_bytes[all].peak / 1048576.0);
  }
  std::printf("peak RSS               %.0f MiB\n", peak_rss_mib());
  // Memory after warm-up, after the first tenth of the timed steps and at the end. The RSS
  // keeps what the caching allocator holds and grows with fragmentation while the
  // allocator settles; the heap in use is what a leak would grow.
  std::printf("RSS                    %.0f / %.0f / %.0f MiB after warm-up / timed step %d / step %d\n", rss_warm,
              rss_tenth, rss_end, tenth, a.steps);
  const CpuCacheStats cache = cpu_cache_stats();
  std::printf("tensor cache           %.0f MiB held by tensors, %.0f MiB cached for reuse; %zu hits, %zu misses\n",
              cache.live_bytes / 1048576.0, cache.cached_bytes / 1048576.0, cache.hits, cache.misses);
  if (heap_end >= 0) {
    std::printf("heap in use            %.1f / %.1f / %.1f MiB: %+.2f MiB over the last %d steps\n", heap_warm,
                heap_tenth, heap_end, heap_end - heap_tenth, a.steps - tenth);
  }
  std::printf("tokens/s               %.0f%s\n", tokens_per_sec, encoder_decoder ? " (encoder + decoder tokens)" : "");
  std::printf("tokens_per_sec %.0f\n", tokens_per_sec);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "the lmkit-pretrain training step on random tokens: ms, tokens/s, GFLOP/s");
  cmd->add_option("--model", a->model, "model preset JSON")->required();
  cmd->add_option("--batch-size", a->batch, "batch size")->check(positive());
  cmd->add_option("--seq-len", a->seq, "tokens per sequence (encoder length for T5)")->check(positive());
  cmd->add_option("--target-len", a->target_len, "decoder length (T5 default: span corruption's)")->check(non_negative());
  cmd->add_option("--steps", a->steps, "timed steps")->check(positive());
  cmd->add_option("--warmup", a->warmup, "untimed steps first")->check(non_negative());
  cmd->add_option("--dtype", a->dtype, "fp32, bf16 (autocast over fp32 weights) or bf16-weights (bf16 weights, fp32 masters)")
      ->check(CLI::IsMember({"fp32", "bf16", "bf16-weights"}));
  cmd->add_option("--objective", a->objective, data::objective_names() + " (default by model type)");
  cmd->add_flag("--recompute", a->recompute, "recompute each layer's activations in backward (lmkit-pretrain --recompute)");
  cmd->add_option("--vocab-size", a->vocab, "override the preset's vocabulary")->check(in_range(128, double(int64_t{1} << 31)));
  cmd->add_flag("--tf32", a->tf32, "fp32 matmuls on TensorFloat-32 tensor cores (CUDA)");
  cmd->add_option("--profile", a->profile, "write a Chrome trace of two more steps (bench/trace_summary.py sums it)");
  cmd->add_flag("--overwrite", a->overwrite, "replace the --profile file if it exists");
  cmd->add_option("--peak-tflops", a->peak_tflops, "the device's dense peak for MFU (default: H100 SXM on CUDA)")
      ->check(in_range(0.0, 1e6));
  add_runtime_flags(*cmd, a->runtime);
  cmd->callback([a] { run_train(*a); });
}

}  // namespace lmkit::bench
