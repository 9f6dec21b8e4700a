// lmkit-bench: each benchmark prints what it measured, against what, and the ratio.
#pragma once

#include <CLI/CLI.hpp>

namespace lmkit::bench {

/// `lmkit-bench layer`: forward + backward of one encoder layer.
void add_layer_command(CLI::App& app);

/// Median of `samples` (copied).
double median(std::vector<double> samples);

}  // namespace lmkit::bench
