// Progress of long work: a redrawn bar on a terminal, plain periodic log lines
// otherwise (CI logs, files), and a JSONL metrics writer.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmkit {

/// Steps done/total, rate, ETA and custom fields (loss, lr, tokens/s).
///
///   ProgressBar bar(total_steps, "train");
///   bar.update(step, {{"loss", fmt(loss)}});
///   bar.finish();
class ProgressBar {
 public:
  using Fields = std::vector<std::pair<std::string, std::string>>;

  /// `interactive`: redraw in place; by default, whether stderr is a terminal.
  ProgressBar(int64_t total, std::string label, std::ostream* out = nullptr, int interactive = -1);
  ~ProgressBar();

  /// Records that `done` units are complete. Draws at most ~10 times a second on
  /// a terminal; otherwise prints a line every `log_every_s` seconds and at the end.
  void update(int64_t done, const Fields& fields = {});
  /// Draws the final state and ends the line.
  void finish();
  /// Writes `line` (a `warning: ...`) on a line of its own: on a terminal the bar is cleared
  /// first and drawn again at the next update.
  void message(const std::string& line);

  double log_every_s = 30.0;
  /// Units done before this bar started (a resumed run's steps): the rate and ETA count only
  /// the units done since (`eta 0:14` after a resume once counted the steps before it).
  int64_t started_at = 0;
  /// A bar inside other work (dev evaluation during training): nothing for work that
  /// ends within a second, and on a terminal the line is erased when it finishes.
  bool transient = false;

  /// "1:02:03" / "4:05": a duration for humans.
  static std::string format_duration(double seconds);
  /// The line as it would be drawn now (for tests and logs).
  std::string render(int64_t done, const Fields& fields, double elapsed_s) const;

 private:
  void draw(bool final_line);

  int64_t total_;
  std::string label_;
  std::ostream* out_;
  bool interactive_;
  bool finished_ = false;
  int64_t done_ = 0;
  Fields fields_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
};

/// Formats a number with `digits` significant digits, for progress fields.
std::string fmt(double value, int digits = 4);

/// Appends one JSON object per line to a file and flushes it, so a killed run
/// leaves every completed line readable.
class MetricsWriter {
 public:
  /// Opens `path` for appending (a resumed run continues the same file).
  explicit MetricsWriter(const std::string& path, bool append = true);
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace lmkit
