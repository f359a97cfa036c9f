// Learning-rate schedules (the formulas are in optim.hpp) and their registry: a schedule is one
// entry below, its rate after the warm-up, plus its line in registry().
#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "framework/config/registry.hpp"
#include "framework/optim/optim.hpp"

namespace tri {

namespace {

// Shortest form of a double ("0.001", "1e-05"), as %g prints it.
std::string str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

ScheduleSpec constant_schedule() {
  return {"constant", "the peak rate --lr", [](const LrSchedule& s, int64_t) { return s.base_lr(); }};
}

ScheduleSpec cosine_schedule() {
  ScheduleSpec spec{"cosine", "to min-lr at the last step", [](const LrSchedule& s, int64_t step) {
    const int64_t warmup = s.warmup_steps(), total = s.total_steps();
    double progress = double(step - warmup) / double(std::max<int64_t>(1, total - warmup));
    progress = std::clamp(progress, 0.0, 1.0);
    return s.min_lr() + 0.5 * (s.base_lr() - s.min_lr()) * (1.0 + std::cos(std::numbers::pi * progress));
  }};
  spec.ends_at_min_lr = true;
  return spec;
}

ScheduleSpec wsd_schedule() {
  ScheduleSpec spec{"wsd", "constant, then linearly to min-lr over the last --decay-fraction of the steps",
                    [](const LrSchedule& s, int64_t step) {
                      if (step < s.decay_start()) return s.base_lr();
                      if (step >= s.total_steps()) return s.min_lr();
                      return s.min_lr() + (s.base_lr() - s.min_lr()) * double(s.total_steps() - step) /
                                              double(s.total_steps() - s.decay_start());
                    }};
  spec.ends_at_min_lr = spec.has_decay_start = true;
  return spec;
}

Registry<ScheduleSpec>& registry() {
  static Registry<ScheduleSpec> r("--schedule", {constant_schedule(), cosine_schedule(), wsd_schedule()});
  return r;
}

}  // namespace

const ScheduleSpec& schedule_spec(const std::string& name) { return registry().find(name); }
std::vector<std::string> schedule_names() { return registry().names(); }
std::string schedules_help(const std::string& lead) { return registry().help(lead); }

LrSchedule::LrSchedule(const std::string& kind, double base_lr, int64_t warmup_steps,
                       int64_t total_steps, double min_lr, double decay_fraction)
    : spec_(&schedule_spec(kind)), base_lr_(base_lr), min_lr_(min_lr), warmup_(warmup_steps), total_(total_steps) {
  if (!(decay_fraction >= 0 && decay_fraction <= 1))
    throw Error("lr schedule: decay_fraction = " + str(decay_fraction) + " is invalid (allowed: 0..1)");
  if (!std::isfinite(base_lr) || base_lr < 0)
    throw Error("lr schedule: base_lr = " + str(base_lr) + " is invalid (allowed: finite, >= 0)");
  if (!(min_lr >= 0 && min_lr <= base_lr))
    throw Error("lr schedule: min_lr = " + str(min_lr) + " is invalid (allowed: 0 <= min_lr <= base_lr = " +
                str(base_lr) + ")");
  if (total_steps < 0)
    throw Error("lr schedule: total_steps = " + std::to_string(total_steps) +
                " is invalid (allowed: >= 0)");
  if (warmup_steps < 0 || warmup_steps > total_steps)
    throw Error("lr schedule: warmup_steps = " + std::to_string(warmup_steps) +
                " is invalid (allowed: 0 <= warmup_steps <= total_steps = " +
                std::to_string(total_steps) + ")");
  decay_start_ = std::max(warmup_, total_ - int64_t(std::llround(decay_fraction * double(total_))));
}

double LrSchedule::lr_at(int64_t step) const {
  if (step < 0)
    throw Error("lr schedule: step = " + std::to_string(step) + " is invalid (allowed: >= 0)");
  if (step < warmup_) return base_lr_ * double(step + 1) / double(warmup_);
  return spec_->after_warmup(*this, step);
}

std::string LrSchedule::describe() const {
  std::string s = spec_->name + "(base_lr=" + str(base_lr_) + ", warmup_steps=" +
                  std::to_string(warmup_) + ", total_steps=" + std::to_string(total_);
  if (spec_->ends_at_min_lr) s += ", min_lr=" + str(min_lr_);
  if (spec_->has_decay_start) s += ", decay_start=" + std::to_string(decay_start_);
  return s + ")";
}

}  // namespace tri
