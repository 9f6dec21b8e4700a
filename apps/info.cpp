// lmkit-info: what this machine gives lmkit (LibTorch, threads, BLAS rate,
// bf16, CUDA) and, given a preset or checkpoint, the model's architecture,
// parameter count by component, and memory.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdio>
#include <thread>

#include "lmkit/core/app.h"
#include "lmkit/core/cuda.h"
#include "lmkit/core/plugin.h"
#include "lmkit/core/config.h"
#include "lmkit/core/runtime.h"
#include "lmkit/nn/attention_kernel.h"
#include "lmkit/data/pipeline.h"
#include "lmkit/models/family.h"
#include "lmkit/models/model.h"
#include "lmkit/models/summary.h"
#include "lmkit/tasks/metric.h"
#include "lmkit/tasks/task.h"
#include "lmkit/train/optimizer.h"
#include "lmkit/tokenizer/tokenizer.h"

namespace {

lmkit::Json system_info(const lmkit::RuntimeOptions& runtime) {
  lmkit::init_runtime(runtime);
  lmkit::Json j;
  j["libtorch"] = TORCH_VERSION;
  j["threads"] = at::get_num_threads();
  j["cores"] = std::thread::hardware_concurrency();
  j["cpu_bf16"] = lmkit::cpu_has_bf16();
  j["cuda_devices"] = lmkit::cuda_available() ? torch::cuda::device_count() : 0;
  j["gemm_fp32_gflops"] = lmkit::measure_gemm_gflops(1024, 0.3);
  j["blas"] = lmkit::blas_library();
  return j;
}

void print_system(const lmkit::Json& s) {
  std::printf("LibTorch           %s\n", s["libtorch"].get<std::string>().c_str());
  std::printf("threads            %d of %u cores\n", s["threads"].get<int>(), s["cores"].get<unsigned>());
  const double gemm = s["gemm_fp32_gflops"].get<double>();
  std::printf("fp32 GEMM 1024^2   %.1f GFLOP/s%s\n", gemm,
              gemm < lmkit::kImplausibleGemmGflops ? "  (reference BLAS? run scripts/setup.sh)" : "");
  std::printf("BLAS               %s\n", s["blas"].get<std::string>().c_str());
  std::printf("CPU bf16           %s\n", s["cpu_bf16"].get<bool>() ? "yes (avx512_bf16/amx)" : "no");
  std::printf("CUDA devices       %d\n", s["cuda_devices"].get<int>());
}

// Every open kind's entries and who registered each ("lmkit" or a plugin's path).
lmkit::Json registered() {
  using lmkit::Json;
  auto entry = [](const std::string& name, const std::string& summary, const std::string& source) {
    return Json{{"name", name}, {"summary", summary}, {"source", source}};
  };
  Json out = {{"families", Json::array()}, {"objectives", Json::array()}, {"tasks", Json::array()},
              {"metrics", Json::array()}, {"optimizers", Json::array()}, {"attentions", Json::array()}};
  for (const auto& f : lmkit::models::families()) out["families"].push_back(entry(f.model_type, f.summary, f.source));
  for (const auto& o : lmkit::data::objectives()) out["objectives"].push_back(entry(o.name, o.summary, o.source));
  for (const auto& t : lmkit::tasks::tasks()) out["tasks"].push_back(entry(t.name, t.summary, t.source));
  for (const auto& m : lmkit::tasks::metrics()) out["metrics"].push_back(entry(m.name, m.summary, m.source));
  for (const auto& o : lmkit::train::optimizers()) out["optimizers"].push_back(entry(o.name, o.summary, o.source));
  for (const auto& a : lmkit::nn::attentions()) out["attentions"].push_back(entry(a.name, a.summary, a.source));
  return out;
}

void print_registered(const lmkit::Json& kinds) {
  for (const auto& [kind, entries] : kinds.items()) {
    std::printf("%s\n", kind.c_str());
    for (const auto& e : entries) {
      const std::string source = e["source"] == "lmkit" ? "" : "  [" + e["source"].get<std::string>() + "]";
      std::printf("  %-22s %s%s\n", e["name"].get<std::string>().c_str(), e["summary"].get<std::string>().c_str(),
                  source.c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before the flags are built: a plugin's families and objectives appear in them.
  if (const int rc = lmkit::load_plugins(argc, argv)) return rc;
  CLI::App app(
      "lmkit-info: a model's architecture, parameter count by component and memory (PATH: a preset JSON or a "
      "checkpoint directory); without PATH, this machine as lmkit sees it (LibTorch, threads, BLAS rate, bf16, CUDA)");
  lmkit::RuntimeOptions runtime;
  bool json = false, system = false, fields = false, kinds = false;
  std::string path, architecture;
  app.add_option("PATH", path, "preset JSON (one of models/) or checkpoint directory");
  app.add_option("--architecture", architecture, "head to build, e.g. BertForSequenceClassification");
  app.add_flag("--system", system, "also describe this machine");
  app.add_flag("--fields", fields,
               "list the config's fields: each key, its value, its default and what a value must be (with PATH)");
  app.add_flag("--registered", kinds,
               "list what is registered (families, objectives, tasks, metrics, optimizers, attentions), plugins' entries "
               "included");
  app.add_flag("--json", json, "print one JSON object instead of a table");
  lmkit::add_runtime_flags(app, runtime);
  return lmkit::run_app(app, argc, argv, [&] {
    lmkit::Json out;
    lmkit::check_input(!fields || !path.empty(), "--fields needs PATH (a preset JSON or a checkpoint directory)");
    if (!path.empty()) {
      const lmkit::models::SkipWeightInit shapes_only;  // counts and sizes: no random draw
      auto model = lmkit::models::model_from_path(path, /*load_weights=*/false, architecture);
      out = lmkit::models::summarize(*model);
      if (fields) out["fields"] = model->config_fields();
      // The tokenizer the other apps would use with this checkpoint.
      if (lmkit::tokenizer::Tokenizer::present(path)) {
        const auto tok = lmkit::tokenizer::Tokenizer::load(path);
        out["tokenizer"] = {{"source", tok.source()}, {"family", tok.family()},
                            {"format", tok.format()}, {"vocab_size", tok.vocab_size()}};
      }
    }
    if (kinds) out["registered"] = registered();
    if ((path.empty() && !kinds) || system) out["system"] = system_info(runtime);
    if (json) {
      std::printf("%s\n", out.dump().c_str());
      return;
    }
    if (out.contains("architecture")) std::printf("%s", lmkit::models::format_summary(out).c_str());
    if (out.contains("fields")) std::printf("%s", lmkit::models::format_fields(out["fields"]).c_str());
    if (out.contains("tokenizer")) {
      const auto& t = out["tokenizer"];
      std::printf("tokenizer          %s (%s, %s, %lld tokens)\n", t["source"].get<std::string>().c_str(),
                  t["family"].get<std::string>().c_str(), t["format"].get<std::string>().c_str(),
                  static_cast<long long>(t["vocab_size"].get<int64_t>()));
    }
    if (out.contains("registered")) print_registered(out["registered"]);
    if (out.contains("system")) print_system(out["system"]);
  });
}
