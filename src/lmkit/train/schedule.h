// Learning-rate schedules as pure functions of the step (1-based), so a resumed
// run needs nothing but the step to continue the schedule exactly.
#pragma once

#include <cstdint>
#include <string>

namespace lmkit::train {

enum class Schedule {
  kConstant,     ///< warmup, then lr
  kLinear,       ///< warmup, then linear decay to 0 at total_steps (BERT)
  kCosine,       ///< warmup, then cosine decay to min_lr_ratio·lr at total_steps (GPT)
  kInverseSqrt,  ///< warmup, then lr·sqrt(warmup/step) (Vaswani et al. 2017, §5.3)
};
/// constant, linear, cosine, inverse-sqrt (InputError otherwise).
Schedule parse_schedule(const std::string& name);
std::string schedule_name(Schedule schedule);

struct ScheduleOptions {
  Schedule schedule = Schedule::kLinear;
  double lr = 1e-4;           ///< the peak rate, reached at the end of warmup
  int64_t warmup = 0;         ///< linear warmup steps from 0
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;  ///< cosine floor
};

/// The learning rate at `step` (1-based). Vaswani's
/// d^-0.5·min(step^-0.5, step·warmup^-1.5) is kInverseSqrt with lr = d^-0.5·warmup^-0.5.
double learning_rate(const ScheduleOptions& options, int64_t step);

}  // namespace lmkit::train
