// Optimizers (AdamW, SGD with momentum), gradient-norm clipping and learning-rate schedules,
// each with the semantics of its PyTorch counterpart (torch.optim.AdamW / SGD with
// foreach=False, torch.nn.utils.clip_grad_norm_), in float32 like PyTorch: per-element math
// is float, scalars (bias corrections, step sizes) are computed in double as Python does and
// then cast to float.
//
// Parameter groups: a Parameter with decay == false gets weight decay 0, like a PyTorch param
// group with weight_decay=0. A parameter whose grad is undefined is skipped (PyTorch skips
// p.grad is None): no update, no state, its own step count does not advance.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/core/module.hpp"
#include "framework/core/tensor.hpp"

namespace tri {

// State of one parameter, as in PyTorch's optimizer.state[p]: the number of updates this
// parameter received and its slot tensors (AdamW: "exp_avg", "exp_avg_sq"; SGD with momentum:
// "momentum_buffer"), created on the parameter's first update.
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> slots;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a grad. Writes parameters in place and bumps their
  // version counters.
  virtual void step() = 0;
  virtual const char* name() const = 0;
  // One line with every hyperparameter, for the printed config.
  virtual std::string describe() const = 0;
  // Every hyperparameter by name, lr the current one (for checkpoints).
  virtual std::map<std::string, double> hyperparameters() const = 0;

  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);  // lr >= 0
  const std::vector<Parameter>& parameters() const { return params_; }

  // Checkpoint state. step_count() counts calls to step(); state() holds one entry per
  // parameter name that has been updated at least once.
  int64_t step_count() const { return steps_; }
  void set_step_count(int64_t steps);
  const std::map<std::string, ParamState>& state() const { return state_; }
  // A slot tensor of a parameter, undefined before the parameter's first update.
  Tensor slot(const std::string& param_name, const std::string& slot_name) const;
  // Restores one parameter's state exactly (the tensors are copied). Throws naming the
  // parameter when the name is unknown, the slot names differ from slot_names() or a slot's
  // shape differs from the parameter's.
  void restore_state(const std::string& param_name, const ParamState& s);
  const std::vector<std::string>& slot_names() const { return slot_names_; }

 protected:
  Optimizer(std::vector<Parameter> params, double lr, std::vector<std::string> slot_names);
  std::vector<Parameter> params_;
  std::map<std::string, ParamState> state_;
  double lr_;
  int64_t steps_ = 0;

 private:
  std::vector<std::string> slot_names_;
};

// PyTorch's default learning rate. The rate is no option of its own: a run's is its config's
// --lr, which the optimizer starts at and the schedule sets each step (set_lr).
constexpr double kDefaultLr = 1e-3;

// Defaults are PyTorch's.
struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// AdamW (Loshchilov & Hutter), per parameter p with grad g and its own step count t:
//   p  *= 1 - lr*wd                      (decoupled weight decay, first; wd = 0 if !decay)
//   m   = b1*m + (1-b1)*g
//   v   = b2*v + (1-b2)*g*g
//   p  -= (lr / (1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
class AdamW : public Optimizer {
 public:
  explicit AdamW(std::vector<Parameter> params, double lr = kDefaultLr, const AdamWOptions& opt = {});
  void step() override;
  const char* name() const override { return "adamw"; }
  std::string describe() const override;
  std::map<std::string, double> hyperparameters() const override;
  const AdamWOptions& options() const { return opt_; }
  Tensor exp_avg(const std::string& param_name) const { return slot(param_name, "exp_avg"); }
  Tensor exp_avg_sq(const std::string& param_name) const { return slot(param_name, "exp_avg_sq"); }

 private:
  AdamWOptions opt_;
};

struct SGDOptions {
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0, as in PyTorch
};

// SGD with momentum, per parameter p with grad g (wd = 0 if !decay):
//   g   = g + wd*p                       (coupled weight decay)
//   buf = g on the parameter's first update, else momentum*buf + (1-dampening)*g
//   g   = nesterov ? g + momentum*buf : buf      (only when momentum != 0)
//   p  -= lr*g
class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<Parameter> params, double lr = kDefaultLr, const SGDOptions& opt = {});
  void step() override;
  const char* name() const override { return "sgd"; }
  std::string describe() const override;
  std::map<std::string, double> hyperparameters() const override;
  const SGDOptions& options() const { return opt_; }
  Tensor momentum_buffer(const std::string& param_name) const {
    return slot(param_name, "momentum_buffer");
  }

 private:
  SGDOptions opt_;
};

// Scales all grads so their joint L2 norm is at most max_norm (torch clip_grad_norm_):
//   total = sqrt(sum of every grad element squared)   (accumulated in double)
//   coef  = max_norm / (total + 1e-6);  grads *= coef only if coef < 1.
// Returns total, the norm before clipping. max_norm <= 0 disables clipping (the norm is still
// returned). Parameters without a grad are ignored.
double clip_grad_norm(const std::vector<Parameter>& params, double max_norm);

// Learning rate as a function of the update index (0 for the first update).
//   warm-up (step < warmup):  base_lr * (step+1) / warmup
//   after warm-up, the schedule's own rate (schedule_spec(kind).after_warmup):
//   constant:                 base_lr
//   cosine:                   min_lr + 0.5*(base_lr - min_lr)*(1 + cos(pi*progress)),
//                             progress = (step - warmup) / max(1, total - warmup), clamped to [0, 1]
//   wsd (warm-up, stable, decay): base_lr until the decay starts at
//                             start = max(warmup, total - round(decay_fraction * total)), then
//                             linearly to min_lr: min_lr + (base_lr - min_lr) * (total - step) / (total - start)
// so cosine and wsd reach min_lr at step == total and stay there. wsd keeps the full rate through
// a plateau's escape, which cosine has already cut.
class LrSchedule;

// One schedule: the --schedule value, a line for --help, and its rate after the warm-up.
struct ScheduleSpec {
  std::string name;
  std::string summary;
  double (*after_warmup)(const LrSchedule& s, int64_t step) = nullptr;
  bool ends_at_min_lr = false;  // decays to min_lr (its describe() states min_lr)
  bool has_decay_start = false;  // holds base_lr until decay_start (its describe() states it)
};
// The entry of `name`; an Error naming the registered schedules when there is none.
const ScheduleSpec& schedule_spec(const std::string& name);
std::vector<std::string> schedule_names();
// "<lead> constant (its summary), cosine (...), ...", for --help.
std::string schedules_help(const std::string& lead);

class LrSchedule {
 public:
  // kind: a registered schedule (schedule_names()). Requires base_lr >= 0, 0 <= min_lr <= base_lr,
  // 0 <= warmup_steps <= total_steps, 0 <= decay_fraction <= 1; min_lr is used by cosine and
  // wsd, decay_fraction by wsd. base_lr is the run's --lr: the schedule scales it, the optimizer
  // takes each step's value from lr_at (Optimizer::set_lr).
  LrSchedule(const std::string& kind, double base_lr, int64_t warmup_steps, int64_t total_steps,
             double min_lr = 0.0, double decay_fraction = 0.2);
  double lr_at(int64_t step) const;
  std::string describe() const;  // one line, for the printed config

  const std::string& kind() const { return spec_->name; }
  double base_lr() const { return base_lr_; }
  double min_lr() const { return min_lr_; }
  int64_t warmup_steps() const { return warmup_; }
  int64_t total_steps() const { return total_; }
  int64_t decay_start() const { return decay_start_; }  // wsd: the first step of the decay

 private:
  const ScheduleSpec* spec_;  // registry entries never move
  double base_lr_, min_lr_;
  int64_t warmup_, total_, decay_start_;
};

}  // namespace tri
