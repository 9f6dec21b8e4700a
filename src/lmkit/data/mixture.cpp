#include "lmkit/data/mixture.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "lmkit/core/error.h"

namespace fs = std::filesystem;

namespace lmkit::data {

namespace {

// Splits `text` at every `separator`.
std::vector<std::string> split_at(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

bool source_name_ok(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// NAME=WEIGHT:PATH or NAME:PATH; `entry` for the error.
MixtureEntry parse_entry(const std::string& entry) {
  const size_t colon = entry.find(':');
  check_input(colon != std::string::npos, "--train/--valid mixture: '" + entry + "' is not NAME=WEIGHT:PATH");
  const std::string head = entry.substr(0, colon);
  MixtureEntry e;
  e.path = entry.substr(colon + 1);
  const size_t equals = head.find('=');
  e.name = head.substr(0, equals);
  check_input(source_name_ok(e.name), "--train/--valid mixture: '" + entry + "': a source's NAME is letters, digits, '_', '-' or '.'");
  if (equals != std::string::npos) {
    const std::string weight = head.substr(equals + 1);
    size_t used = 0;
    // A decimal number as written (0.7, 3, 1e-2): stod alone also takes hexadecimal (0x10) and
    // leading spaces.
    const bool decimal = !weight.empty() && weight.find_first_not_of("0123456789.eE+-") == std::string::npos;
    try {
      if (decimal) e.weight = std::stod(weight, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check_input(decimal && used == weight.size() && used > 0 && std::isfinite(e.weight) && e.weight > 0,
                "--train/--valid mixture: source '" + e.name + "' has weight '" + weight + "'; a weight is a positive number");
  }
  check_input(!e.path.empty(), "--train/--valid mixture: source '" + e.name + "' names no PATH");
  return e;
}

}  // namespace

std::vector<MixtureEntry> parse_mixture(const std::string& spec) {
  std::error_code ec;
  if (spec.empty() || fs::exists(spec, ec)) return {};
  // One path, not a mixture: no NAME[=WEIGHT]: in front (a missing file is for the caller to name).
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) return {};
  const std::string head = spec.substr(0, colon);
  if (!source_name_ok(head.substr(0, head.find('=')))) return {};
  std::vector<MixtureEntry> entries;
  std::set<std::string> names;
  for (const auto& part : split_at(spec, ',')) {
    MixtureEntry e = parse_entry(part);
    check_input(names.insert(e.name).second, "--train/--valid mixture: source '" + e.name + "' is named twice");
    entries.push_back(std::move(e));
  }
  return entries;
}

MixtureDataset::MixtureDataset(std::vector<MixtureSource> sources, uint64_t seed, int64_t period)
    : sources_(std::move(sources)), seed_(seed) {
  check_input(!sources_.empty(), "a mixture needs at least one source");
  check_input(period >= 1, "a mixture's period must be at least one sample");
  double total = 0;
  for (const auto& s : sources_) {
    check_input(s.dataset != nullptr && s.dataset->size(0) > 0, "mixture source '" + s.name + "' has no examples");
    total += s.weight;
  }
  // Largest deficit first (Megatron-LM's blended datasets): each prefix of the period holds
  // every source's share to within one sample.
  per_period_.assign(sources_.size(), 0);
  plan_.reserve(static_cast<size_t>(period));
  rank_.reserve(static_cast<size_t>(period));
  for (int64_t i = 0; i < period; ++i) {
    size_t best = 0;
    double best_deficit = -1e300;
    for (size_t s = 0; s < sources_.size(); ++s) {
      const double deficit = sources_[s].weight / total * static_cast<double>(i + 1) - static_cast<double>(per_period_[s]);
      if (deficit > best_deficit) {
        best = s;
        best_deficit = deficit;
      }
    }
    plan_.push_back(static_cast<int32_t>(best));
    rank_.push_back(per_period_[best]++);
  }
  epoch_starts_.assign(sources_.size(), std::vector<int64_t>{0});
}

std::pair<int64_t, int64_t> MixtureDataset::locate(size_t s, int64_t k) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t>& starts = epoch_starts_[s];
  // Sources whose size varies by epoch (next-sentence pairs) are counted epoch by epoch.
  while (starts.back() <= k) {
    const int64_t epoch = static_cast<int64_t>(starts.size()) - 1;
    starts.push_back(starts.back() + sources_[s].dataset->size(epoch));
  }
  const auto next = std::upper_bound(starts.begin(), starts.end(), k);  // the first epoch starting after k
  const int64_t epoch = static_cast<int64_t>(next - starts.begin()) - 1;
  return {epoch, k - starts[static_cast<size_t>(epoch)]};
}

std::shared_ptr<const std::vector<int64_t>> MixtureDataset::order(size_t s, int64_t epoch) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = orders_.find(s);
  if (it != orders_.end() && it->second.first == epoch) return it->second.second;
  std::vector<int64_t> order(static_cast<size_t>(sources_[s].dataset->size(epoch)));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(derive_seed(derive_seed(derive_seed(seed_, 0x4d495854), s), static_cast<uint64_t>(epoch)));
  shuffle(order, rng);
  auto shared = std::make_shared<const std::vector<int64_t>>(std::move(order));
  orders_[s] = {epoch, shared};
  return shared;
}

Example MixtureDataset::get(int64_t index, int64_t epoch) const {
  const size_t s = static_cast<size_t>(plan_.at(static_cast<size_t>(index)));
  const int64_t k = epoch * per_period_[s] + rank_[static_cast<size_t>(index)];  // the source's k-th sample
  const auto [source_epoch, i] = locate(s, k);
  return sources_[s].dataset->get((*order(s, source_epoch))[static_cast<size_t>(i)], source_epoch);
}

std::vector<SourceDraws> MixtureDataset::draws(int64_t samples) const {
  const int64_t period = static_cast<int64_t>(plan_.size());
  const int64_t periods = samples / period, rest = samples % period;
  std::vector<SourceDraws> out;
  for (size_t s = 0; s < sources_.size(); ++s) {
    SourceDraws d;
    d.name = sources_[s].name;
    d.samples = periods * per_period_[s] + std::count(plan_.begin(), plan_.begin() + rest, static_cast<int32_t>(s));
    if (d.samples > 0) {
      const auto [epoch, i] = locate(s, d.samples - 1);  // the last sample drawn: i + 1 of its epoch
      d.epochs = static_cast<double>(epoch) + static_cast<double>(i + 1) / static_cast<double>(sources_[s].dataset->size(epoch));
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace lmkit::data
