#include "lmkit/tasks/evaluation.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "lmkit/core/error.h"
#include "lmkit/core/file.h"
#include "lmkit/core/names.h"
#include "lmkit/core/plugin.h"
#include "lmkit/data/corpus.h"
#include "lmkit/models/family.h"
#include "lmkit/models/registry.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace lmkit::tasks {

namespace fs = std::filesystem;

namespace {

// The stamp lmkit-evaluate puts in every result file. The file is its own to replace for
// the same evaluation (metric, checkpoint and data); another evaluation's result is kept
// (the default result.json of an earlier command), and a user's file needs --overwrite.
constexpr const char* kWrittenBy = "written_by";
constexpr const char* kStamp = "lmkit-evaluate";

// A path as one file or folder, however it is spelt (relative, absolute, with a trailing slash).
std::string same_spelling(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(path, ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// The paths of a result's "data" (a string or a list of them), spelt one way.
Json same_spelling(const Json& data) {
  if (data.is_string()) return same_spelling(data.get<std::string>());
  Json out = Json::array();
  if (data.is_array()) {
    for (const auto& d : data) out.push_back(d.is_string() ? Json(same_spelling(d.get<std::string>())) : d);
  }
  return out;
}

void check_result_file(const EvaluationRequest& a, bool many) {
  const std::string path = a.result_path();
  bool ours = false;
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && !a.overwrite) {
    Json j;
    try {
      j = Json::parse(read_file(path));
    } catch (const std::exception&) {
    }
    if (j.is_object() && j.value(kWrittenBy, "") == kStamp) {
      const std::string metric = j.value("metric", "");
      const std::string checkpoint = j.value("checkpoint", "");
      const Json data = j.value("data", Json());
      ours = metric == a.metric && same_spelling(checkpoint) == same_spelling(a.checkpoint) &&
             same_spelling(data) == same_spelling(a.data_json(many));
      check_input(ours, (a.output.empty() ? "the default --output " : "--output ") + path + " holds another evaluation (" +
                            metric + " of " + checkpoint + " on " + (data.is_string() ? data.get<std::string>() : data.dump()) +
                            "): give --output FILE for this one, or --overwrite");
    }
  }
  check_output_file(path, a.overwrite || ours);
  if (!a.predictions.empty()) {
    check_input(fs::weakly_canonical(a.predictions, ec) != fs::weakly_canonical(path, ec),
                "--predictions and --output name the same file (" + path + ")");
  }
}

// The checkpoint's family when it reads images, else nullptr (text, or no config.json: said where the model loads).
const models::Family* image_family(const std::string& checkpoint) {
  const std::string file = checkpoint + "/config.json";
  if (!fs::exists(file)) return nullptr;
  const models::Family& family = models::family_of_config(load_json_file(file), file);
  return family.images ? &family : nullptr;
}

// A model that reads images takes the metric of a task with its head (image-classification), no text metric.
void check_images_metric(const EvaluationRequest& a, const MetricSpec& m, const models::Family& family) {
  std::vector<std::string> takes;
  for (const auto& t : tasks()) {
    if (!family.head(t.head).empty()) takes.push_back(t.metric);
  }
  check_input(std::find(takes.begin(), takes.end(), m.name) != takes.end(),
              "--metric " + m.name + " reads text; " + a.checkpoint + " is a model_type '" + family.model_type +
                  "' model, which reads images" + (takes.empty() ? "" : " (its metric: " + join_names(takes, " or ") + ")"));
}

// Where the metric applies, said before the model loads.
void check_applies(const EvaluationRequest& a, const MetricSpec& m) {
  if (!m.refuses) return;
  const std::string file = a.checkpoint + "/config.json";
  const Json config = load_json_file(file);
  const models::Family& family = models::family_of_config(config, file);
  const std::string why = call_registered(m.source, "metric '" + m.name + "': refuses", [&] { return m.refuses(family, config); });
  check_input(why.empty(), why);
}

// A figure as a person reads it: four decimals, integers as they are, text without
// quotes, a list comma-joined, null (a correlation over constant gold scores) as undefined.
std::string shown(const Json& v) {
  if (v.is_number_float()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", v.get<double>());
    return text;
  }
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "undefined";
  if (!v.is_array()) return v.dump();
  std::string list;
  for (const auto& x : v) list += (list.empty() ? "" : ", ") + shown(x);
  return list;
}

// The result as an aligned table on stdout: a row per figure, and a nested object (the
// per-type scores) as a row per entry with its figures as columns. The JSON file has it all.
}  // namespace

void print_result(const Json& r) {
  std::printf("%s of %s on %s\n", r["metric"].get<std::string>().c_str(), r["checkpoint"].get<std::string>().c_str(),
              shown(r["data"]).c_str());
  size_t width = 0;
  for (auto it = r.begin(); it != r.end(); ++it) width = std::max(width, it.key().size());
  std::vector<std::string> nested;
  for (auto it = r.begin(); it != r.end(); ++it) {
    const std::string& key = it.key();
    if (key == "metric" || key == "checkpoint" || key == "data" || key == kWrittenBy) continue;
    if (it.value().is_object()) nested.push_back(key);
    else std::printf("  %-*s  %s\n", static_cast<int>(width), key.c_str(), shown(it.value()).c_str());
  }
  for (const auto& key : nested) {
    const Json& rows = r[key];
    if (rows.empty() || !rows.begin().value().is_object()) {
      std::printf("  %-*s  %s\n", static_cast<int>(width), key.c_str(), rows.dump().c_str());
      continue;
    }
    std::printf("  %-*s", static_cast<int>(width), key.c_str());
    for (auto c = rows.begin().value().begin(); c != rows.begin().value().end(); ++c) std::printf("  %10s", c.key().c_str());
    std::printf("\n");
    for (auto row = rows.begin(); row != rows.end(); ++row) {
      std::printf("    %-*s", static_cast<int>(width) - 2, row.key().c_str());
      for (auto c = row.value().begin(); c != row.value().end(); ++c) std::printf("  %10s", shown(c.value()).c_str());
      std::printf("\n");
    }
  }
}

Json EvaluationRequest::data_json(bool many) const { return many ? Json(data) : Json(data.back()); }

std::string EvaluationRequest::result_path() const { return output.empty() ? "result.json" : output; }

void check_request(const EvaluationRequest& a, const MetricSpec& m) {
  check_input(a.data.size() == 1 || m.many_data, "--data is repeatable for the in-context metrics only");
  std::vector<std::string> with_predictions, with_max;
  for (const auto& x : metrics()) {
    if (x.predictions) with_predictions.push_back(x.name);
    if (x.max_examples) with_max.push_back(x.name);
  }
  check_input(a.predictions.empty() || m.predictions,
              "--predictions applies to --metric " + join_names(with_predictions, ", ") + ", not " + m.name);
  if (!a.predictions.empty()) check_output_file(a.predictions, a.overwrite, "--predictions");
  check_input(a.max_examples == 0 || m.max_examples,
              "--max-eval-examples applies to --metric " + join_names(with_max, ", ") + ", not " + m.name +
                  " (give a shorter --data file" + (m.name == "pseudo-perplexity" ? ", or --max-sequences)" : ")"));
  if (m.corpus_data) {
    if (!data::is_corpus(a.data.back())) data::check_text_file(a.data.back());  // a file, a directory or pattern of shards
  }
  check_result_file(a, m.many_data);
  check_input(fs::is_directory(a.checkpoint), "--checkpoint " + a.checkpoint + ": no such checkpoint directory");
  if (const models::Family* images = image_family(a.checkpoint)) {
    check_images_metric(a, m, *images);
  } else {
    check_input(tokenizer::Tokenizer::present(a.checkpoint),
                a.checkpoint + ": no tokenizer (evaluation needs the checkpoint's tokenizer)");
  }
  check_applies(a, m);
}

bool reads_images(const std::string& checkpoint) { return image_family(checkpoint) != nullptr; }

Json stamp_result(Json figures, const EvaluationRequest& a, const MetricSpec& m) {
  figures["metric"] = m.name;
  figures["checkpoint"] = a.checkpoint;
  figures[kWrittenBy] = kStamp;
  figures["data"] = a.data_json(m.many_data);
  return figures;
}

}  // namespace lmkit::tasks
