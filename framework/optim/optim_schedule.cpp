// Learning-rate schedules (the formulas are in optim.hpp).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "framework/optim/optim.hpp"

namespace tri {

namespace {

// Shortest form of a double ("0.001", "1e-05"), as %g prints it.
std::string str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

LrSchedule::LrSchedule(const std::string& kind, double base_lr, int64_t warmup_steps,
                       int64_t total_steps, double min_lr, double decay_fraction)
    : kind_(kind), base_lr_(base_lr), min_lr_(min_lr), warmup_(warmup_steps), total_(total_steps) {
  if (kind != "constant" && kind != "cosine" && kind != "wsd")
    throw Error("lr schedule: kind '" + kind + "' is unknown (allowed: constant, cosine, wsd)");
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
  if (kind_ == "constant") return base_lr_;
  if (kind_ == "wsd") {
    if (step < decay_start_) return base_lr_;
    if (step >= total_) return min_lr_;
    return min_lr_ + (base_lr_ - min_lr_) * double(total_ - step) / double(total_ - decay_start_);
  }
  double progress = double(step - warmup_) / double(std::max<int64_t>(1, total_ - warmup_));
  progress = std::clamp(progress, 0.0, 1.0);
  return min_lr_ + 0.5 * (base_lr_ - min_lr_) * (1.0 + std::cos(std::numbers::pi * progress));
}

std::string LrSchedule::describe() const {
  std::string s = kind_ + "(base_lr=" + str(base_lr_) + ", warmup_steps=" +
                  std::to_string(warmup_) + ", total_steps=" + std::to_string(total_);
  if (kind_ != "constant") s += ", min_lr=" + str(min_lr_);
  if (kind_ == "wsd") s += ", decay_start=" + std::to_string(decay_start_);
  return s + ")";
}

}  // namespace tri
