// A family's one table of the HF classes it builds: each class's name, the head it
// builds (the family's own enum) and the finetuning head it serves. Family::architectures,
// Family::heads, the family's create() and its model's architecture() all read it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmkit/core/config.h"

namespace lmkit::models {

template <class Head>
struct Architecture {
  std::string name;       ///< the HF class: "BertForSequenceClassification"
  Head head;              ///< what the model builds for it
  std::string task_head;  ///< the finetuning head it is (kClassificationHead, ...), "" for none
};

template <class Head>
class ArchitectureTable {
 public:
  /// `rows`: the first is the family's default architecture.
  explicit ArchitectureTable(std::vector<Architecture<Head>> rows) : rows_(std::move(rows)) {}

  /// The class names, the default first (Family::architectures).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& r : rows_) out.push_back(r.name);
    return out;
  }
  /// Finetuning head -> class name (Family::heads).
  std::map<std::string, std::string> heads() const {
    std::map<std::string, std::string> out;
    for (const auto& r : rows_) {
      if (!r.task_head.empty()) out.emplace(r.task_head, r.name);
    }
    return out;
  }
  /// The head `name` builds; the default's for a name the table lacks (the registry checks names first).
  Head head(const std::string& name) const {
    for (const auto& r : rows_) {
      if (r.name == name) return r.head;
    }
    return rows_.front().head;
  }
  /// The class name of `head` (the model's architecture()).
  const std::string& name(Head head) const {
    for (const auto& r : rows_) {
      if (r.head == head) return r.name;
    }
    return rows_.front().name;
  }

 private:
  std::vector<Architecture<Head>> rows_;
};

class Model;

/// A family's create() (Family::create): reads config C with `read`, sets C::head from the
/// architecture's row of `table` and builds M from it.
template <class M, class C, class Head>
std::function<std::shared_ptr<Model>(const Json&, const std::string&, const std::string&)> family_creator(
    ArchitectureTable<Head> table, std::function<C(const Json&, const std::string&)> read) {
  return [table, read](const Json& config, const std::string& file, const std::string& arch) -> std::shared_ptr<Model> {
    C c = read(config, file);
    c.head = table.head(arch);
    return std::make_shared<M>(c);
  };
}

}  // namespace lmkit::models
