// lmkit-bench: each benchmark prints what it measured, against what, and the ratio.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace lmkit::bench {

/// `lmkit-bench layer`: forward + backward of one encoder layer.
void add_layer_command(CLI::App& app);

/// `lmkit-bench train`: the training step of lmkit-pretrain.
void add_train_command(CLI::App& app);
/// `lmkit-bench data`: objective throughput through the loader.
void add_data_command(CLI::App& app);
/// `lmkit-bench generate`: generation with and without the KV cache.
void add_generate_command(CLI::App& app);
/// `lmkit-bench load`: loading a checkpoint without vs with the random initialisation first.
void add_load_command(CLI::App& app);

/// Median of `samples` (copied).
double median(std::vector<double> samples);

/// Runs `work` under LibTorch's profiler — CPU ops, and CUDA kernels with their GPU times when
/// `cuda` — and writes the Chrome trace to `path` (bench/trace_summary.py sums it). `work`
/// synchronises the device itself before it returns.
void profile_to(const std::string& path, bool cuda, const std::function<void()>& work);

}  // namespace lmkit::bench
