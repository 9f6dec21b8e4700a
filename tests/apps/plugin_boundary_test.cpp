// The plugin boundary, as a hostile plugin author tries it: whatever a plugin throws or
// hands back, every app ends with one `error:` line naming the plugin file and exit 1 or
// 2, never a crash; and --plugin takes one FILE each time it is given.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include "../data/data_fixture.h"
#include "app_runner.h"

using namespace lmkit;
namespace fs = std::filesystem;

namespace {

const std::string kPlugin = LMKIT_HOSTILE_PLUGIN;

struct PluginCase {
  std::string mode;     // $LMKIT_HOSTILE
  std::string command;  // an app and its arguments; PLUGIN, PRESET and OUT are replaced
  int code;             // the exit code
  std::string error;    // a regular expression the one error line matches (after "error: ")
};

std::string replaced(std::string s, const std::string& what, const std::string& with) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size())) s.replace(at, what.size(), with);
  return s;
}

}  // namespace

TEST_CASE("plugin boundary: whatever a plugin throws or hands back is one error line naming it", "[apps][plugin]") {
  test::TempDir dir;
  const std::string preset = dir / "hostile.json", gpt = test::model_preset("gpt-mini");
  { std::ofstream(preset) << R"({"model_type": "hostile", "vocab_size": 100})"; }
  const std::string train =
      " --train " + test::sample("valid.txt") + " --vocab-size 2000 --steps 2 --batch-size 2 --seq-len 32 --threads 1";
  const std::string p = std::regex_replace(kPlugin, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  const std::vector<PluginCase> cases = {
      {"throw-int", "lmkit-info --plugin PLUGIN", 1, p + ": its registration threw something that is not a std::exception"},
      {"throw-cstring", "lmkit-pretrain --plugin PLUGIN --help", 1, p + ": its registration threw something that is not a std::exception"},
      {"throw-std", "lmkit-evaluate --plugin PLUGIN --help", 1, p + ": its registration failed: boom"},
      {"input-error", "lmkit-finetune --plugin PLUGIN --help", 2, p + ": bad setting"},
      {"null-version", "lmkit-info --plugin PLUGIN", 2, p + ": lmkit_plugin_lmkit_version\\(\\) returned no version string.*"},
      {"null-model", "lmkit-info --plugin PLUGIN PRESET", 1, p + ": model_type 'hostile': create returned no model for HostileForMaskedLM"},
      {"create-throws-int", "lmkit-info --plugin PLUGIN PRESET", 1,
       p + ": model_type 'hostile': create threw something that is not a std::exception"},
      {"no-adopt", "lmkit-pretrain --plugin PLUGIN --model PRESET --output OUT" + train, 2,
       p + ": model_type 'hostile' has no adopt_vocabulary.*"},
      {"objective", "lmkit-bench --plugin PLUGIN train --model " + gpt + " --objective hostile-obj --steps 1", 2,
       p + ": objective 'hostile-obj' has no synthetic_batch.*"},
      {"objective", "lmkit-pretrain --plugin PLUGIN --model " + gpt + " --objective hostile-obj --output OUT" + train, 1,
       p + ": objective 'hostile-obj': make_dataset returned no dataset"},
      {"task", "lmkit-finetune --plugin PLUGIN --help", 1, p + ": task 'hostile-task': create returned no task"},
      {"", "lmkit-info --plugin=", 2, "--plugin needs a FILE \\(it was given an empty one\\)"},
      {"", "lmkit-info --plugin", 2, "--plugin needs a FILE"},
      {"", "lmkit-info --plugin OUT", 2, ".*/run-[0-9]+: no such plugin file"},
      {"", "lmkit-info --plugin .", 2, "\\.: a directory, not a plugin file \\(name its \\.so\\)"},
  };
  int n = 0;
  for (const PluginCase& c : cases) {
    const std::string out = dir / ("run-" + std::to_string(n++));
    std::string command = replaced(replaced(replaced(c.command, "PLUGIN", kPlugin), "PRESET", preset), "OUT", out);
    INFO(c.mode << ": " << command);
    auto r = test::run_shell("LMKIT_HOSTILE=" + c.mode + " " + test::bin_dir() + "/" + command + " 2>&1");
    INFO(r.out);
    CHECK(r.code == c.code);
    // One line, the error, and nothing after it (no backtrace, no "terminate called").
    CHECK(std::regex_match(r.out, std::regex("(.*\n)*error: " + c.error + "\n")));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') <= 3);
  }
}

TEST_CASE("plugin boundary: a run trained with a plugin resumed without it names the plugin", "[apps][plugin]") {
  test::TempDir dir;
  const std::string cmd = "lmkit-pretrain --model " + test::model_preset("bert-tiny") + " --train " + test::sample("valid.txt") +
                          " --output " + (dir / "run") + " --vocab-size 2000 --steps 2 --batch-size 2 --seq-len 32 --threads 1";
  auto first = test::run(cmd + " --plugin " + kPlugin + " --stop-at 1");
  INFO(first.out);
  REQUIRE(first.code == 0);
  auto without = test::run(cmd + " --resume");
  INFO(without.out);
  CHECK(without.code == 2);
  CHECK(without.out == "error: " + (dir / "run/config.json") + " records --plugin " + kPlugin +
                           ": the run was trained with it; pass it again to resume (or name it in $LMKIT_PLUGINS)\n");
  auto with = test::run(cmd + " --resume --plugin " + kPlugin);
  INFO(with.out);
  CHECK(with.code == 0);
}

TEST_CASE("plugin boundary: --plugin takes one FILE, repeatable, however its path is spelt", "[apps][plugin]") {
  test::TempDir dir;
  const std::string preset = test::model_preset("bert-tiny");
  // The word after --plugin FILE is the app's own: lmkit-info describes the preset, not the machine.
  auto described = test::run("lmkit-info --plugin " + kPlugin + " " + preset);
  INFO(described.out);
  REQUIRE(described.code == 0);
  CHECK_THAT(described.out, Catch::Contains("bert"));
  CHECK_THAT(described.out, !Catch::Contains("LibTorch"));
  // Two words after one --plugin: the second is refused, not silently dropped.
  auto two = test::run("lmkit-evaluate --plugin " + kPlugin + " " + dir / "second.so" + " --checkpoint " + (dir / "none") +
                       " --data " + test::sample("valid.txt") + " --metric perplexity");
  INFO(two.out);
  CHECK(two.code == 2);
  CHECK_THAT(two.out, Catch::Contains("error: ") && Catch::Contains("second.so"));
  // One plugin by two spellings (a relative path through a folder and back, a symbolic link) loads once.
  const fs::path plugin(kPlugin);
  fs::create_symlink(plugin, dir / "link.so");
  const std::string other = (plugin.parent_path() / ".." / plugin.parent_path().filename() / plugin.filename()).string();
  auto twice = test::run_shell("LMKIT_HOSTILE=null-model " + test::bin_dir() + "/lmkit-info --plugin " + kPlugin +
                               " --plugin " + other + " --plugin " + (dir / "link.so") + " 2>&1");
  INFO(twice.out);
  CHECK(twice.code == 0);
  CHECK_THAT(twice.out, !Catch::Contains("registered twice"));
}
