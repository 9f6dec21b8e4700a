#include "lmkit/train/schedule.h"

#include <algorithm>
#include <cmath>

#include "lmkit/core/error.h"
#include "lmkit/core/names.h"

namespace lmkit::train {

const NameTable<Schedule>& schedule_names() {
  static const NameTable<Schedule> table{"schedule", {{"constant", Schedule::kConstant},
                                                      {"linear", Schedule::kLinear},
                                                      {"cosine", Schedule::kCosine},
                                                      {"inverse-sqrt", Schedule::kInverseSqrt}}};
  return table;
}

Schedule parse_schedule(const std::string& name) { return schedule_names().parse(name); }

std::string schedule_name(Schedule schedule) { return schedule_names().name(schedule); }

double learning_rate(const ScheduleOptions& o, int64_t step) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double warmup = static_cast<double>(o.warmup);
  if (o.warmup > 0 && s <= warmup) return o.lr * s / warmup;
  const double total = static_cast<double>(std::max<int64_t>(o.total_steps, 1));
  const double progress = o.total_steps > o.warmup ? std::min(1.0, (s - warmup) / (total - warmup)) : 1.0;
  switch (o.schedule) {
    case Schedule::kConstant: return o.lr;
    case Schedule::kLinear: return o.lr * (1.0 - progress);
    case Schedule::kCosine:
      return o.lr * (o.min_lr_ratio + (1.0 - o.min_lr_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress)));
    case Schedule::kInverseSqrt: return o.lr * std::sqrt(std::max(warmup, 1.0) / s);
  }
  return o.lr;
}

}  // namespace lmkit::train
