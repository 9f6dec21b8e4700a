// The validation loss of a model over a dataset: what the trainer reports at each
// evaluation and lmkit-evaluate's perplexities build on.
#pragma once

#include <memory>

#include "lmkit/core/config.h"
#include "lmkit/data/dataset.h"
#include "lmkit/data/loader.h"
#include "lmkit/dist/group.h"
#include "lmkit/models/model.h"

namespace lmkit::eval {

/// Validation figures: loss (mean over targets), perplexity = exp(loss), the
/// number of targets and tokens, and where the model reports a masked-LM loss
/// apart (BERT pre-training) mlm_loss, mlm_perplexity, nsp_loss and nsp_accuracy.
/// The model is in eval mode meanwhile. With a `group`, each rank evaluates its
/// share and the sums are reduced (every rank gets the figures); `max_batches`
/// then counts batches of batch_size × ranks. With `accuracy`, also the accuracy of the
/// logits' argmax over the labelled positions (a token classifier's).
Json evaluate_loss(models::Model& model, std::shared_ptr<const data::Dataset> dataset, data::LoaderOptions loader,
                   c10::Device device, int64_t max_batches = 0, dist::Group* group = nullptr, bool accuracy = false);

}  // namespace lmkit::eval
