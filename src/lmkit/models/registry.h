// Builds any lmkit model from a config.json (HF key names + model_type) and
// moves weights between lmkit models and HF checkpoint directories.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/io/safetensors.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"

namespace lmkit::models {

/// Builds the model `config` describes. `architecture` picks the head (an HF
/// class name such as "BertForSequenceClassification"); empty means the
/// config's own "architectures" entry, else the family's pretraining model.
/// `file` names the config in error messages.
std::shared_ptr<Model> create_model(const Json& config, const std::string& file, const std::string& architecture = "");

/// A config's own architecture: the first entry of its "architectures", "" when it has none.
std::string config_architecture(const Json& config);

/// The family of a model config read from `file`: an InputError naming the file when it is not
/// an object, has no string model_type, or names one no family registered (and which plugin
/// built it, when the checkpoint records one: pass --plugin PATH).
const Family& family_of_config(const Json& config, const std::string& file);

/// `config` as the family that finetunes it with `head`: the config itself when its family has the
/// head, else its Family::finetunes_as (a vit_mae config as a vit's) when that has it; else unchanged.
Json finetuning_config(const Json& config, const std::string& head, const std::string& file);

/// The architectures create_model() accepts for a model_type.
std::vector<std::string> supported_architectures(const std::string& model_type);

/// The pretraining objective for a model_type: `objective` when it applies (bert:
/// mlm+nsp or mlm; gpt2: clm; t5: span; transformer: seq2seq), the type's default
/// (the first of those) when empty; InputError naming what applies otherwise.
std::string pretraining_objective(const std::string& model_type, const std::string& objective = "");

/// The architecture a model_type pretrains as with `objective` ("" for the type's default).
std::string pretraining_architecture(const std::string& model_type, const std::string& objective);

/// HF tensors of `model` under HF names, transposed where HF stores them so.
std::vector<std::pair<std::string, at::Tensor>> hf_state_dict(Model& model);

/// The gradients after a backward pass, under HF's parameter names and in HF's
/// layout (row slices of fused QKV, Conv1D transposed): what HF's
/// `named_parameters()` would hold in `.grad`; zeros where the loss does not reach a parameter.
std::vector<std::pair<std::string, at::Tensor>> hf_gradients(Model& model);

struct LoadReport {
  std::vector<std::string> missing;     ///< model tensors the file lacks (left as initialised)
  std::vector<std::string> unexpected;  ///< file tensors the model does not use
  std::vector<std::string> missing_companions;  ///< companion folders the directory lacks (left as initialised)
};

/// Copies the file's tensors into `model` (converting dtypes; shapes must match;
/// a tensor holding NaN or Inf is an InputError).
/// Names are tried as given, with and without the base-model prefix. With
/// `strict`, a missing tensor is an InputError; otherwise it is reported.
LoadReport load_hf_weights(Model& model, const io::TensorFile& file, const std::string& file_name, bool strict = true);

/// The file beside config.json naming the plugin whose family a checkpoint's model_type is
/// ({"model_type", "plugin": its absolute path}); loading such a checkpoint without the
/// plugin is an InputError saying to pass --plugin PATH.
inline constexpr const char* kPluginRecord = "lmkit_plugin.json";

/// Writes config.json (+ "architectures") and model.safetensors into `dir`, atomically;
/// a RuntimeError, and nothing written, when a weight holds NaN or Inf.
/// `extra(tmp_dir)` may add files (tokenizer, trainer state) before the directory is committed.
void save_pretrained(Model& model, const std::string& dir,
                     const std::function<void(const std::string&)>& extra = nullptr);

/// Loads each of model.companions() whose folder `dir` holds (DIR/FOLDER/model.safetensors),
/// strictly; a companion without its folder keeps its initialisation. Returns the folders read.
std::vector<std::string> load_companions(Model& model, const std::string& dir);

/// Loads a checkpoint directory (config.json + model.safetensors), checked as HF's
/// from_pretrained reports (docs/training.md, Guarantees): every tensor the model
/// needs must be in the file, unless `new_head` allows the ones the checkpoint lacks
/// to start from random initialisation (e.g. a classifier on a pretrained encoder;
/// they are listed on stderr and in `report`); tensors the model does not use are
/// listed on stderr, and an error when they are more layers of what the model has
/// (a config.json that disagrees with its weights); non-finite values are an error.
/// With `architecture` set, a head other than the checkpoint's own is requested.
/// `overrides` are merged into the config first (e.g. {"num_labels": 5} for a new head).
/// A companion the model declares (ELECTRA's generator/) that the directory lacks keeps its
/// initialisation with one warning line; with `companions_required` (a run or a metric that
/// uses it: --init, --metric objective) it is an InputError naming the folder.
std::shared_ptr<Model> load_pretrained(const std::string& dir, const std::string& architecture = "",
                                       LoadReport* report = nullptr, const Json& overrides = Json::object(),
                                       bool new_head = false, bool companions_required = false);

/// InputError unless a tokenizer of `tokenizer_vocab` ids fits the model's embedding
/// (which may have more rows, as HF's T5 has 32128 for 32100 ids, never fewer).
void check_vocabulary(const Model& model, int64_t tokenizer_vocab, const std::string& what);

}  // namespace lmkit::models
