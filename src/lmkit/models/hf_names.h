// HuggingFace correspondence helpers: the tensor-name table entries of common
// blocks, and HF config keys every family reads or writes alike.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/modules/linear.h>

#include "lmkit/core/config.h"
#include "lmkit/core/config_table.h"
#include "lmkit/models/model.h"
#include "lmkit/nn/attention.h"
#include "lmkit/nn/norm.h"

namespace lmkit::models {

/// Adds an HF tensor for a plain Linear; used by every family's hf_tensors().
void add_linear(std::vector<HfTensor>& out, const std::string& hf_prefix, torch::nn::Linear& linear,
                bool transpose = false);
/// Adds HF tensors for a fused projection: `names[i]` gets rows [i·n, (i+1)·n) of the fused weight/bias.
void add_fused_linear(std::vector<HfTensor>& out, const std::vector<std::string>& hf_prefixes, torch::nn::Linear& fused);
void add_norm(std::vector<HfTensor>& out, const std::string& hf_prefix, nn::Norm& norm);
/// The tensors an attention kernel registered on `attention` itself (AttentionKernel::
/// parameter_names without a '.': Linformer's projections, Shaw's tables, a plugin's), each
/// under hf_prefix + its name. Submodules a kernel adds (Longformer's global projections) have
/// HF names of their own, which the family lists.
void add_kernel_tensors(std::vector<HfTensor>& out, const std::string& hf_prefix, const nn::MultiHeadAttentionImpl& attention);

/// HF's generic PretrainedConfig keys (generation defaults, bookkeeping): accepted and ignored.
void ignore_generic_hf_keys(ConfigReader& reader);
/// Reads num_labels from HF's id2label (or lmkit's num_labels).
int64_t read_num_labels(ConfigReader& reader, int64_t fallback);
/// Writes id2label/label2id for `num_labels` classes as HF does.
void write_num_labels(Json& j, int64_t num_labels);

/// Reads HF's config.json object `j` into `c` through `table`, strictly: HF's generic keys
/// accepted and ignored, any other key the table lacks an InputError naming `file`, with its
/// did-you-mean.
template <class C>
void read_hf_config(const ConfigTable<C>& table, const Json& j, const std::string& file, C& c) {
  ConfigReader r(j, file);
  ignore_generic_hf_keys(r);
  table.read(r, c);
  r.finish();
}

/// HF's config.json object of `c`: {"model_type": model_type} and the table's fields.
template <class C>
Json write_hf_config(const ConfigTable<C>& table, const std::string& model_type, const C& c) {
  Json j = {{"model_type", model_type}};
  table.write(j, c);
  return j;
}

/// The classes of a classifier head: read by read_num_labels, written by write_num_labels.
template <class C>
ConfigField<C> labels_field(int64_t C::*member) {
  return {"num_labels", "integer >= 1 (or id2label, one name a class)",
          [=](ConfigReader& r, C& c) { c.*member = read_num_labels(r, c.*member); },
          [=](const C& c) { return Json(c.*member); }, {}, [=](Json& j, const C& c) { write_num_labels(j, c.*member); }, {}};
}

}  // namespace lmkit::models
