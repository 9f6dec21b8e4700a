// Helpers shared by the tests.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "lmkit/core/batch.h"

namespace lmkit::test {

/// Two rows of `t` random ids in [pad + 2, vocab), the second right-padded with `pad` after
/// `real`; the attention mask marks the real tokens.
inline Batch right_padded_batch(int64_t vocab, int64_t t, int64_t real, int64_t pad) {
  Batch b;
  b.input_ids = at::randint(pad + 2, vocab, {2, t}, at::kLong);
  b.input_ids.index_put_({1, at::indexing::Slice(real)}, pad);
  b.attention_mask = b.input_ids.ne(pad).to(at::kLong);
  return b;
}

/// A small model's training batch (seed 1): two rows of 12 ids in [5, 97), the second padded after
/// 9 in the attention mask; labels the inputs, or 7 ids for an encoder-decoder's decoder.
inline Batch tiny_training_batch(bool encoder_decoder) {
  at::manual_seed(1);
  Batch b;
  b.input_ids = at::randint(5, 97, {2, 12}, at::kLong);
  b.attention_mask = at::ones({2, 12}, at::kLong);
  b.attention_mask[1].slice(0, 9).fill_(0);
  b.labels = encoder_decoder ? at::randint(5, 97, {2, 7}, at::kLong) : b.input_ids.clone();
  return b;
}

/// How many nodes of the autograd graph behind `out` (each counted once) have `name_part` in
/// their name: whether a path was taken (nn::recompute's, a fused op's, a flash kernel's).
inline int graph_nodes(const at::Tensor& out, const std::string& name_part) {
  std::vector<torch::autograd::Node*> todo = {out.grad_fn().get()};
  std::set<torch::autograd::Node*> seen(todo.begin(), todo.end());
  int found = 0;
  for (size_t i = 0; i < todo.size(); ++i) {
    found += todo[i]->name().find(name_part) != std::string::npos;
    for (const auto& edge : todo[i]->next_edges()) {
      if (edge.function && seen.insert(edge.function.get()).second) todo.push_back(edge.function.get());
    }
  }
  return found;
}

/// Largest absolute difference between two tensors (as float64).
inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

/// A fresh empty directory under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/lmkit_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

/// The checkout (models/, data/, tests/fixtures/) and the apps' folder: the build tree's
/// unless LMKIT_TEST_SOURCE_DIR / LMKIT_TEST_BIN_DIR name others, as on a GPU machine that
/// runs scripts/gpu_bundle.sh's binaries from another checkout (scripts/gpu_verify.sh sets both).
inline std::string dir_from_env(const char* name, const char* built_in) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(built_in);
}
inline std::string source_dir() { return dir_from_env("LMKIT_TEST_SOURCE_DIR", LMKIT_SOURCE_DIR); }
inline std::string bin_dir() { return dir_from_env("LMKIT_TEST_BIN_DIR", LMKIT_BIN_DIR); }
// A model preset shipped in models/ ("bert-tiny" -> .../models/bert-tiny.json).
inline std::string model_preset(const std::string& name) { return source_dir() + "/models/" + name + ".json"; }
/// A HuggingFace fixture (tests/fixtures/hf/NAME): checkpoints and tokenizers HF wrote.
inline std::string hf_fixture(const std::string& name) { return source_dir() + "/tests/fixtures/hf/" + name; }

}  // namespace lmkit::test
