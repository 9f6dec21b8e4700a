#include "lmkit/core/progress.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "lmkit/core/error.h"

namespace lmkit {

std::string fmt(double value, int digits) {
  if (std::isnan(value)) return "nan";  // not the sign bit's "-nan"
  std::ostringstream s;
  s << std::setprecision(digits) << value;
  return s.str();
}

ProgressBar::ProgressBar(int64_t total, std::string label, std::ostream* out, int interactive)
    : total_(total), label_(std::move(label)), out_(out ? out : &std::cerr) {
  interactive_ = interactive >= 0 ? interactive != 0 : (out == nullptr && ::isatty(STDERR_FILENO));
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::~ProgressBar() {
  if (drawn_ && !finished_ && interactive_) *out_ << (transient ? "\r\033[K" : "\n") << std::flush;  // leave the cursor on a fresh line
}

std::string ProgressBar::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream o;
  if (s >= 3600) o << s / 3600 << ":" << std::setw(2) << std::setfill('0') << (s / 60) % 60;
  else o << s / 60;
  o << ":" << std::setw(2) << std::setfill('0') << s % 60;
  return o.str();
}

std::string ProgressBar::render(int64_t done, const Fields& fields, double elapsed_s) const {
  std::ostringstream line;
  line << label_ << " ";
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    if (interactive_) {
      const int width = 24, filled = static_cast<int>(frac * width);
      line << "[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] ";
    }
    line << done << "/" << total_ << " (" << static_cast<int>(frac * 100) << "%)";
  } else {
    line << done;
  }
  // The rate of the units done since this bar started: a resumed run's earlier steps took no time here.
  const double rate = elapsed_s > 0 ? static_cast<double>(std::max<int64_t>(0, done - started_at)) / elapsed_s : 0.0;
  line << " " << fmt(rate, 3) << "/s";
  if (total_ > 0 && rate > 0) line << " eta " << format_duration((total_ - done) / rate);
  line << " elapsed " << format_duration(elapsed_s);
  for (const auto& f : fields) line << " " << f.first << "=" << f.second;
  return line.str();
}

void ProgressBar::update(int64_t done, const Fields& fields) {
  done_ = done;
  if (!fields.empty()) fields_ = fields;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  if (transient && !drawn_ && std::chrono::duration<double>(now - start_).count() < 1.0) return;
  if ((interactive_ && since >= 0.1) || (!interactive_ && since >= log_every_s)) draw(false);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!transient) return draw(true);
  if (!drawn_) return;
  if (interactive_) *out_ << "\r\033[K" << std::flush;  // the work around it draws on this line again
  else draw(true);
}

void ProgressBar::message(const std::string& line) {
  if (interactive_ && drawn_ && !finished_) *out_ << "\r\033[K";
  *out_ << line << "\n" << std::flush;
  if (interactive_) last_draw_ = std::chrono::steady_clock::time_point{};  // the bar again at the next update
}

void ProgressBar::draw(bool final_line) {
  last_draw_ = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(last_draw_ - start_).count();
  const std::string line = render(done_, fields_, elapsed);
  if (interactive_) {
    *out_ << "\r\033[K" << line;
    if (final_line) *out_ << "\n";
  } else {
    *out_ << line << "\n";
  }
  out_->flush();
  drawn_ = true;
}

MetricsWriter::MetricsWriter(const std::string& path, bool append)
    : path_(path), out_(path, append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw RuntimeError(path + ": cannot open metrics file for writing (" + std::strerror(errno) + ")");
}

void MetricsWriter::write(const nlohmann::json& record) {
  out_ << record.dump() << "\n";
  out_.flush();
  if (!out_) throw RuntimeError(path_ + ": write failed (" + std::strerror(errno) + ")");
}

}  // namespace lmkit
