// Token classification evaluation: entity-level precision, recall and F1 exactly
// as seqeval computes them in its default mode (IOB1 and IOB2 alike: an I-X after
// O or after another type starts an entity; E- and S- tags as IOBES), per entity
// type and micro-averaged, plus token accuracy; and the CoNLL predictions file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lmkit/core/config.h"
#include "lmkit/data/token_tasks.h"
#include "lmkit/models/model.h"

namespace lmkit::eval {

/// An entity: its type and the first and last word, counted over the sentences
/// joined with an O between them (seqeval's offsets).
struct Entity {
  std::string type;
  int64_t begin = 0, end = 0;
  bool operator<(const Entity& o) const;
};

/// seqeval.metrics.sequence_labeling.get_entities(sentences) (suffix=False).
std::vector<Entity> get_entities(const std::vector<std::vector<std::string>>& sentences);

/// seqeval's classification_report in numbers: {"precision", "recall", "f1",
/// "accuracy", "entities" (gold), "per_type": {TYPE: {precision, recall, f1, support}}};
/// a ratio with a zero denominator is 0, as seqeval's default.
Json entity_scores(const std::vector<std::vector<std::string>>& gold, const std::vector<std::vector<std::string>>& predicted);

/// Runs a token classifier over `dataset` in order and maps each word's first-subword
/// prediction back to the word. Returns entity_scores() of the words plus loss
/// (mean over the labelled subwords), sentences and words; fills `predicted` (a tag
/// per word of each sentence) when given.
Json evaluate_token_classifier(models::Model& model, const data::TokenClassificationDataset& dataset,
                               const std::map<std::string, int64_t>& tag_map, int64_t batch_size, int32_t pad_id,
                               c10::Device device, std::vector<std::vector<std::string>>* predicted = nullptr);

/// The CoNLL file lmkit-finetune writes: "word gold predicted" a line, a blank line after each sentence.
std::string predictions_conll(const std::vector<data::TaggedSentence>& sentences,
                              const std::vector<std::vector<std::string>>& predicted);

}  // namespace lmkit::eval
