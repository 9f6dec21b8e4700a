// A model's architecture, parameter count by component, and memory: what
// lmkit-info prints for a preset or a checkpoint.
#pragma once

#include <memory>
#include <string>

#include "lmkit/core/config.h"
#include "lmkit/models/model.h"

namespace lmkit::models {

/// Builds the model PATH describes: a preset / config JSON file, or a checkpoint
/// directory (its config.json; weights are loaded only when `load_weights`).
std::shared_ptr<Model> model_from_path(const std::string& path, bool load_weights, const std::string& architecture = "");

/// {model_type, architecture, parameters, components: {name: count}, memory: {...}, config}.
/// Components group parameters by their top-level module (embeddings, layers, heads).
/// Memory: fp32 weights, and training with AdamW (weights + gradients + two moments, 16 bytes/parameter).
Json summarize(Model& model);

/// A readable table of summarize()'s object.
std::string format_summary(const Json& summary);

/// A readable table of Model::config_fields(): key, value, default, what a value must be;
/// a `*` marks a value other than the default.
std::string format_fields(const Json& fields);

}  // namespace lmkit::models
