#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "lmkit/core/app.h"
#include "lmkit/core/config.h"
#include "lmkit/core/error.h"
#include "lmkit/core/progress.h"
#include "test_util.h"

TEST_CASE("progress: durations and rendered fields", "[core][progress]") {
  using lmkit::ProgressBar;
  CHECK(ProgressBar::format_duration(5) == "0:05");
  CHECK(ProgressBar::format_duration(125) == "2:05");
  CHECK(ProgressBar::format_duration(3725) == "1:02:05");
  std::ostringstream out;
  ProgressBar bar(100, "train", &out, /*interactive=*/0);
  std::string line = bar.render(25, {{"loss", "3.2"}}, 10.0);
  CHECK_THAT(line, Catch::Contains("25/100 (25%)"));
  CHECK_THAT(line, Catch::Contains("2.5/s"));
  CHECK_THAT(line, Catch::Contains("eta 0:30"));  // 75 left at 2.5/s
  CHECK_THAT(line, Catch::Contains("loss=3.2"));
  // Resumed at 20 of 100: the 5 steps done in these 10 s set the rate, not the 20 done before.
  bar.started_at = 20;
  line = bar.render(25, {}, 10.0);
  CHECK_THAT(line, Catch::Contains("0.5/s"));
  CHECK_THAT(line, Catch::Contains("eta 2:30"));  // 75 left at 0.5/s
}

TEST_CASE("progress: plain lines off a terminal - redrawn in place on one", "[core][progress]") {
  std::ostringstream plain;
  {
    lmkit::ProgressBar bar(10, "eval", &plain, 0);
    for (int i = 1; i <= 10; ++i) bar.update(i, {{"loss", lmkit::fmt(1.0 / i)}});
    bar.finish();
  }
  CHECK(plain.str().find('\r') == std::string::npos);
  CHECK_THAT(plain.str(), Catch::Contains("10/10 (100%)"));
  CHECK_THAT(plain.str(), Catch::Contains("loss=0.1"));
  std::ostringstream tty;
  lmkit::ProgressBar bar(10, "eval", &tty, 1);
  bar.update(10);
  bar.finish();
  CHECK_THAT(tty.str(), Catch::Contains("\r"));
  CHECK_THAT(tty.str(), Catch::Contains("[########################]"));
}

TEST_CASE("progress: a warning takes a line of its own, and the bar comes back under it", "[core][progress]") {
  std::ostringstream plain;
  lmkit::ProgressBar off(10, "train", &plain, 0);
  off.update(1);
  off.message("warning: step 2: skipped");
  CHECK(plain.str() == "warning: step 2: skipped\n");
  std::ostringstream tty;
  lmkit::ProgressBar bar(10, "train", &tty, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  bar.update(3);
  bar.message("warning: step 4: skipped");
  bar.update(4);  // at once, not 0.1 s later: the warning left the line empty
  const std::string s = tty.str();
  const size_t warning = s.find("\r\033[Kwarning: step 4: skipped\n");
  REQUIRE(warning != std::string::npos);
  CHECK(s.find("3/10") < warning);
  CHECK(s.find("4/10", warning) != std::string::npos);
}

TEST_CASE("progress: a transient bar (generation inside training) is silent for quick work and shows slow work",
          "[core][progress]") {
  std::ostringstream quick;
  {
    lmkit::ProgressBar bar(4, "generate", &quick, 0);
    bar.transient = true;
    for (int i = 1; i <= 4; ++i) bar.update(i);
    bar.finish();
  }
  CHECK(quick.str().empty());
  // Slow work: a line every log_every_s off a terminal, and the final one.
  std::ostringstream slow;
  lmkit::ProgressBar bar(2, "generate", &slow, 0);
  bar.transient = true;
  bar.log_every_s = 0.01;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  bar.update(1);
  bar.finish();
  CHECK_THAT(slow.str(), Catch::Contains("generate 1/2 (50%)"));
  CHECK_THAT(slow.str(), Catch::EndsWith("\n"));
  // On a terminal it erases its line when done, for the training bar to draw there again.
  std::ostringstream tty;
  lmkit::ProgressBar live(2, "generate", &tty, 1);
  live.transient = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  live.update(1);
  live.finish();
  CHECK_THAT(tty.str(), Catch::Contains("generate [") && Catch::EndsWith("\r\033[K"));
}

TEST_CASE("metrics: one flushed JSON object per line - appended", "[core][progress]") {
  lmkit::test::TempDir dir;
  {
    lmkit::MetricsWriter w(dir / "metrics.jsonl", false);
    w.write({{"step", 1}, {"split", "train"}, {"loss", 2.5}});
    // Readable before the writer is closed: every line is flushed.
    std::ifstream in(dir / "metrics.jsonl");
    std::string line;
    REQUIRE(std::getline(in, line));
    CHECK(lmkit::Json::parse(line)["loss"] == 2.5);
  }
  lmkit::MetricsWriter(dir / "metrics.jsonl").write({{"step", 2}});
  std::ifstream in(dir / "metrics.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += !lmkit::Json::parse(line).empty();
  CHECK(n == 2);
}

namespace {
// run_app on `args` (after the program's name), what it wrote to stderr in `err`.
int run_args(CLI::App& app, const std::function<void()>& body, std::vector<std::string> args, std::string& err) {
  std::vector<char*> argv{const_cast<char*>("prog")};
  for (auto& a : args) argv.push_back(a.data());
  std::stringstream captured;
  auto* old = std::cerr.rdbuf(captured.rdbuf());
  const int code = lmkit::run_app(app, static_cast<int>(argv.size()), argv.data(), body);
  std::cerr.rdbuf(old);
  err = captured.str();
  return code;
}

int run(const std::function<void()>& body, std::vector<std::string> args, std::string& err) {
  CLI::App app("test");
  lmkit::RuntimeOptions rt;
  lmkit::add_runtime_flags(app, rt);
  return run_args(app, body, std::move(args), err);
}
}  // namespace

TEST_CASE("app: failures become one error line and the right exit code", "[core][app]") {
  std::string err;
  CHECK(run([] {}, {}, err) == 0);
  CHECK(err.empty());
  CHECK(run([] { throw lmkit::InputError("data.txt: empty corpus"); }, {}, err) == 2);
  CHECK(err == "error: data.txt: empty corpus\n");
  CHECK(run([] { throw lmkit::RuntimeError("disk full\nmore detail"); }, {}, err) == 1);
  CHECK(err == "error: disk full\n");
  CHECK(run([] { throw std::out_of_range("vector"); }, {}, err) == 1);
  CHECK_THAT(err, Catch::StartsWith("error: "));
  CHECK(run([] {}, {"--threads", "abc"}, err) == 2);
  CHECK_THAT(err, Catch::StartsWith("error: ") && Catch::Contains("--threads"));
  CHECK(run([] {}, {"--no-such-flag"}, err) == 2);
  CHECK_THAT(err, Catch::Contains("--no-such-flag"));
}

TEST_CASE("app: a follower rank on one node leaves its input errors to rank 0, not the others", "[core][app]") {
  std::string err;
  lmkit::set_follower_quiet(true);
  const int input = run([] { throw lmkit::InputError("data.txt: empty corpus"); }, {}, err);
  const std::string input_err = err;
  const int parse = run([] {}, {"--threads", "abc"}, err);
  const std::string parse_err = err;
  const int runtime = run([] { throw lmkit::RuntimeError("cuda:1: no such device"); }, {}, err);  // its own
  const std::string runtime_err = err;
  lmkit::set_follower_quiet(false);
  CHECK((input == 2 && input_err.empty()));
  CHECK((parse == 2 && parse_err.empty()));
  CHECK((runtime == 1 && runtime_err == "error: cuda:1: no such device\n"));
  // Stopped by rank 0's failure (dist::leader_only): its code, no line, quiet or not.
  CHECK(run([] { throw lmkit::FollowerStop(lmkit::ExitCode::kInput); }, {}, err) == 2);
  CHECK(err.empty());
  CHECK(run([] { throw lmkit::InputError("data.txt: empty corpus"); }, {}, err) == 2);
  CHECK(err == "error: data.txt: empty corpus\n");
}

TEST_CASE("app: an unknown option is named with the one meant, stray words in the order given", "[core][app]") {
  auto parse = [](std::vector<std::string> args) {
    CLI::App app("test");
    int64_t warmup = 0, batch = 1, epochs = 1, n = 0;
    app.add_option("--warmup", warmup);
    app.add_option("--batch-size", batch);
    app.add_option("--epochs", epochs);
    app.add_subcommand("sub")->add_option("--count", n);
    lmkit::add_config_flag(app);
    std::string err;
    const int code = run_args(app, [] {}, std::move(args), err);
    return std::make_pair(code, err);
  };
  // CLI11 said "The following arguments were not expected: 100 --warmup-steps".
  CHECK(parse({"--warmup-steps", "100"}) == std::make_pair(2, std::string("error: unknown option --warmup-steps (did you mean --warmup?) (see --help)\n")));
  CHECK(parse({"--per-device-train-batch-size=8"}).second == "error: unknown option --per-device-train-batch-size (did you mean --batch-size?) (see --help)\n");
  CHECK(parse({"--epoch", "2"}).second == "error: unknown option --epoch (did you mean --epochs?) (see --help)\n");
  CHECK(parse({"--zzz"}).second == "error: unknown option --zzz (see --help)\n");
  CHECK(parse({"sub", "--cout", "3"}).second == "error: unknown option --cout (did you mean --count?) (see --help)\n");
  // A --config key as its flag: the same hints.
  lmkit::test::TempDir dir;
  std::ofstream(dir / "run.json") << R"({"num-train-epochs": 2})";
  CHECK(parse({"--config", dir / "run.json"}).second ==
        "error: " + (dir / "run.json") + ": unknown key 'num-train-epochs' (did you mean 'epochs'?)\n");
  CHECK(parse({"--count", "3", "sub"}).second ==
        "error: unknown option --count (--count is an option of 'sub': give it after the subcommand) (see --help)\n");
  CHECK(parse({"sub", "--count", "3", "a", "b"}).second == "error: arguments no option takes: a b (see --help)\n");
  CHECK(parse({"--epochs", "2", "-1"}).second == "error: an argument no option takes: -1 (see --help)\n");
}

TEST_CASE("app: numbers are taken as written: out of range or not finite is an input error", "[core][app]") {
  // CLI11 clamped 99999999999999999999 to 2^63-1 and took nan; both ran silently.
  auto parse = [](std::vector<std::string> args, std::string& err) {
    CLI::App app("test");
    int64_t steps = 1;
    uint64_t seed = 0;
    double lr = 1e-3;
    int64_t n = 0;
    app.add_option("--steps", steps)->check(CLI::PositiveNumber);  // its type name becomes INT:POSITIVE
    app.add_option("--seed", seed);
    app.add_option("--lr", lr);
    CLI::App* sub = app.add_subcommand("sub");
    sub->add_option("--n", n);
    bool ran = false;
    sub->callback([&] { ran = true; });
    const int code = run_args(app, [] {}, std::move(args), err);
    return std::make_pair(code, ran);
  };
  std::string err;
  CHECK(parse({"--steps", "9223372036854775807", "--seed", "18446744073709551615", "--lr", "1e-300"}, err).first == 0);
  CHECK(parse({"--steps", "99999999999999999999"}, err).first == 2);
  CHECK(err == "error: --steps 99999999999999999999: out of range for an integer option\n");
  CHECK(parse({"--seed", "18446744073709551616"}, err).first == 2);
  CHECK_THAT(err, Catch::Contains("--seed"));
  for (const char* bad : {"nan", "inf", "-inf", "1e400"}) {
    CHECK(parse({"--lr", bad}, err).first == 2);
    CHECK_THAT(err, Catch::StartsWith("error: --lr") && Catch::Contains("not a finite number"));
  }
  // In a subcommand, before its callback runs.
  const auto r = parse({"sub", "--n", "-99999999999999999999"}, err);
  CHECK(r.first == 2);
  CHECK_FALSE(r.second);
  CHECK_THAT(err, Catch::Contains("--n -99999999999999999999"));
}
