// Optimizers and gradient clipping (see optim.hpp for the formulas; schedules are in
// optim_schedule.cpp).
//
// The element loops repeat PyTorch's CPU kernels operation by operation and rounding by
// rounding, so AdamW and SGD agree with it to the last bit: add_(x, alpha) is
// fma(x, alpha, self), addcmul_(a, b, value) is fma(value*a, b, self), addcdiv_(a, b, value)
// is self + (value*a)/b, and scalars are cast to float before use. No a*b+c is left for the
// compiler to contract. (clip_grad_norm differs on purpose: it sums squares in double where
// torch sums in float.)
#include "framework/optim/optim.hpp"
#include "framework/config/options.hpp"
#include "framework/runtime/runtime.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tri {

namespace {

// Below this many elements in total a loop runs on one thread (thread start-up costs more).
constexpr double kInf = HUGE_VAL;

// Runs fn(block, job, begin, count) over the elements [0, sizes[job]) of every job, in fixed
// blocks, all in one parallel loop: one fork/join per call rather than one per parameter
// (which costs most when the cores are shared). Blocks are a multiple of any vector width,
// so each element takes the same code path, and each result is the same, at any thread count.
constexpr int64_t kBlock = 1024;

int64_t count_blocks(const std::vector<int64_t>& sizes) {
  int64_t n = 0;
  for (int64_t size : sizes) n += (size + kBlock - 1) / kBlock;
  return n;
}

template <class Fn>
void for_blocks(const std::vector<int64_t>& sizes, Fn&& fn) {
  struct Block { int64_t job, begin, count; };
  std::vector<Block> blocks;
  blocks.reserve(size_t(count_blocks(sizes)));
  int64_t total = 0;
  for (size_t j = 0; j < sizes.size(); j++) {
    for (int64_t b = 0; b < sizes[j]; b += kBlock)
      blocks.push_back({int64_t(j), b, std::min(kBlock, sizes[j] - b)});
    total += sizes[j];
  }
  const int64_t nblocks = int64_t(blocks.size());
#pragma omp parallel for schedule(static) if (total >= kParallelMin)
  for (int64_t b = 0; b < nblocks; b++) fn(b, blocks[b].job, blocks[b].begin, blocks[b].count);
}

void check_range(const char* who, const char* what, double v, double lo, double hi,
                 bool hi_open) {
  bool ok = std::isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi);
  if (!ok)
    throw Error(std::string(who) + ": " + what + " = " + number_text(v) + " is invalid (allowed: " +
                number_text(lo) + " <= " + what + (hi_open ? " < " : " <= ") + number_text(hi) + ")");
}

// Each parameter's grad (undefined where it has none), all checked before a step changes
// anything: a grad whose size differs from its parameter's is an error.
std::vector<Tensor> grads_of(const std::vector<Parameter>& params) {
  std::vector<Tensor> grads;
  for (const Parameter& p : params) {
    Tensor g = p.tensor.grad();
    if (g.defined() && g.numel() != p.tensor.numel())
      throw Error("optimizer: grad of parameter '" + p.name + "' has shape " + g.shape().str() +
                  ", the parameter has shape " + p.tensor.shape().str());
    grads.push_back(g);
  }
  return grads;
}

// One parameter's AdamW update: its buffers and its scalars (float, as PyTorch's kernels
// use them).
struct AdamWJob {
  float *p, *m, *v;
  const float* g;
  float decay_mul, b1, one_minus_b1, b2, one_minus_b2, bias_c2_sqrt, eps, neg_step_size;
};

// One AdamW update of n elements, in PyTorch's order of operations:
//   p *= decay_mul; m = m*b1 + (1-b1)*g; v = v*b2 + ((1-b2)*g)*g;
//   denom = sqrt(v)/bias_c2_sqrt + eps; p += (neg_step_size*m)/denom.
// The decay is its own pass (as in PyTorch; the block stays in L1 between the passes): inside
// one expression the compiler would fuse p*decay_mul + update into an fma and round
// differently. The AVX-512 body exists because std::sqrt (which may set errno) stops GCC from
// vectorising the plain loop; both paths round identically. The job comes by value (also in
// sgd_update) so the compiler knows writes through p cannot change it, and vectorises.
void adamw_update(const AdamWJob k, int64_t begin, int64_t n) {
  float* __restrict p = k.p + begin;
  float* __restrict m = k.m + begin;
  float* __restrict v = k.v + begin;
  const float* __restrict g = k.g + begin;
  if (k.decay_mul != 1.0f)
    for (int64_t i = 0; i < n; i++) p[i] *= k.decay_mul;
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 b1 = _mm512_set1_ps(k.b1), one_minus_b1 = _mm512_set1_ps(k.one_minus_b1);
  const __m512 b2 = _mm512_set1_ps(k.b2), one_minus_b2 = _mm512_set1_ps(k.one_minus_b2);
  const __m512 bias_c2_sqrt = _mm512_set1_ps(k.bias_c2_sqrt), eps = _mm512_set1_ps(k.eps);
  const __m512 neg_step_size = _mm512_set1_ps(k.neg_step_size);
  for (; i + 16 <= n; i += 16) {
    const __m512 gi = _mm512_loadu_ps(g + i);
    const __m512 mi = _mm512_fmadd_ps(gi, one_minus_b1, _mm512_mul_ps(_mm512_loadu_ps(m + i), b1));
    const __m512 vi = _mm512_fmadd_ps(_mm512_mul_ps(one_minus_b2, gi), gi,
                                      _mm512_mul_ps(_mm512_loadu_ps(v + i), b2));
    // The all-lanes masked sqrt: GCC 12 warns falsely about plain _mm512_sqrt_ps.
    const __m512 sqrt_v = _mm512_maskz_sqrt_ps(__mmask16(0xFFFF), vi);
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(sqrt_v, bias_c2_sqrt), eps);
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    const __m512 update = _mm512_div_ps(_mm512_mul_ps(neg_step_size, mi), denom);
    _mm512_storeu_ps(p + i, _mm512_add_ps(_mm512_loadu_ps(p + i), update));
  }
#endif
  for (; i < n; i++) {
    const float mi = std::fma(g[i], k.one_minus_b1, m[i] * k.b1);
    const float vi = std::fma(k.one_minus_b2 * g[i], g[i], v[i] * k.b2);
    const float denom = std::sqrt(vi) / k.bias_c2_sqrt + k.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] + (k.neg_step_size * mi) / denom;
  }
}

// One parameter's SGD update (see adamw_update).
struct SGDJob {
  float *p, *buf;  // buf: nullptr without momentum
  const float* g;
  float wd, momentum, one_minus_damp, neg_lr;
  bool first, nesterov;  // first: the parameter's first update with momentum
};

void sgd_update(const SGDJob k, int64_t begin, int64_t n) {
  float* __restrict p = k.p + begin;
  float* __restrict buf = k.buf ? k.buf + begin : nullptr;
  const float* __restrict g = k.g + begin;
  for (int64_t i = 0; i < n; i++) {
    float d = k.wd != 0 ? std::fma(p[i], k.wd, g[i]) : g[i];  // d_p = g.add(p, alpha=wd)
    if (buf) {
      buf[i] = k.first ? d : std::fma(d, k.one_minus_damp, buf[i] * k.momentum);
      d = k.nesterov ? std::fma(buf[i], k.momentum, d) : buf[i];
    }
    p[i] = std::fma(d, k.neg_lr, p[i]);  // param.add_(d_p, alpha=-lr)
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Optimizer: parameters, lr, per-parameter state

Optimizer::Optimizer(std::vector<Parameter> params, double lr,
                     std::vector<std::string> slot_names)
    : params_(std::move(params)), lr_(lr), slot_names_(std::move(slot_names)) {
  std::sort(slot_names_.begin(), slot_names_.end());  // the order restore_state compares in
  if (params_.empty()) throw Error("optimizer: got an empty parameter list (pass model.parameters())");
  std::set<std::string> seen;
  for (const Parameter& p : params_) {
    if (!p.tensor.defined()) throw Error("optimizer: parameter '" + p.name + "' has no tensor");
    if (!seen.insert(p.name).second)
      throw Error("optimizer: parameter name '" + p.name + "' appears twice (names must be unique)");
  }
  set_lr(lr);
}

void Optimizer::zero_grad() {
  for (Parameter& p : params_) p.tensor.zero_grad();
}

void Optimizer::set_lr(double lr) {
  check_range("optimizer", "lr", lr, 0.0, kInf, false);
  lr_ = lr;
}

void Optimizer::set_step_count(int64_t steps) {
  if (steps < 0) throw Error("optimizer: step count " + std::to_string(steps) + " is invalid (allowed: >= 0)");
  steps_ = steps;
}

Tensor Optimizer::slot(const std::string& param_name, const std::string& slot_name) const {
  auto it = state_.find(param_name);
  if (it == state_.end()) return Tensor();
  auto s = it->second.slots.find(slot_name);
  return s == it->second.slots.end() ? Tensor() : s->second;
}

void Optimizer::restore_state(const std::string& param_name, const ParamState& s) {
  auto p = std::find_if(params_.begin(), params_.end(),
                        [&](const Parameter& q) { return q.name == param_name; });
  if (p == params_.end())
    throw Error("optimizer: cannot restore state of unknown parameter '" + param_name + "'");
  std::string want, got;
  for (const auto& n : slot_names_) want += (want.empty() ? "" : ", ") + n;
  for (const auto& [n, t] : s.slots) got += (got.empty() ? "" : ", ") + n;
  if (got != want)  // both sorted (std::map iterates in order)
    throw Error("optimizer: state of parameter '" + param_name + "' has slots [" + got +
                "], expected [" + want + "]");
  if (s.step < 0)
    throw Error("optimizer: state of parameter '" + param_name + "' has step " +
                std::to_string(s.step) + " (allowed: >= 0)");
  ParamState copy;
  copy.step = s.step;
  for (const auto& [n, t] : s.slots) {
    if (!t.defined() || t.shape() != p->tensor.shape())
      throw Error("optimizer: state '" + n + "' of parameter '" + param_name + "' has shape " +
                  (t.defined() ? t.shape().str() : "(undefined)") + ", the parameter has shape " +
                  p->tensor.shape().str());
    copy.slots[n] = t.clone();
  }
  state_[param_name] = std::move(copy);
}

// ---------------------------------------------------------------------------------------------
// AdamW

AdamW::AdamW(std::vector<Parameter> params, double lr, const AdamWOptions& opt)
    : Optimizer(std::move(params), lr, {"exp_avg", "exp_avg_sq"}), opt_(opt) {
  check_range("adamw", "beta1", opt.beta1, 0.0, 1.0, true);
  check_range("adamw", "beta2", opt.beta2, 0.0, 1.0, true);
  check_range("adamw", "eps", opt.eps, 0.0, kInf, false);
  check_range("adamw", "weight_decay", opt.weight_decay, 0.0, kInf, false);
}

std::string AdamW::describe() const {
  return "adamw(lr=" + number_text(lr_) + ", beta1=" + number_text(opt_.beta1) + ", beta2=" + number_text(opt_.beta2) +
         ", eps=" + number_text(opt_.eps) + ", weight_decay=" + number_text(opt_.weight_decay) +
         " except on decay=false parameters)";
}

std::map<std::string, double> AdamW::hyperparameters() const {
  return {{"lr", lr_}, {"beta1", opt_.beta1}, {"beta2", opt_.beta2}, {"eps", opt_.eps},
          {"weight_decay", opt_.weight_decay}};
}

void AdamW::step() {
  std::vector<AdamWJob> jobs;
  std::vector<int64_t> sizes;
  const std::vector<Tensor> grads = grads_of(params_);
  for (size_t pi = 0; pi < params_.size(); pi++) {
    Parameter& prm = params_[pi];
    const Tensor& grad = grads[pi];
    if (!grad.defined()) continue;
    ParamState& st = state_[prm.name];
    if (st.slots.empty()) {
      st.slots["exp_avg"] = Tensor::zeros(prm.tensor.shape());
      st.slots["exp_avg_sq"] = Tensor::zeros(prm.tensor.shape());
    }
    st.step += 1;
    // Scalars as PyTorch computes them: Python doubles, cast to float inside each kernel.
    const double wd = prm.decay ? opt_.weight_decay : 0.0;
    const double bias_c1 = 1.0 - std::pow(opt_.beta1, double(st.step));
    const double bias_c2 = 1.0 - std::pow(opt_.beta2, double(st.step));
    AdamWJob job;
    job.p = prm.tensor.data();
    job.m = st.slots["exp_avg"].data();
    job.v = st.slots["exp_avg_sq"].data();
    job.g = grad.data();
    job.decay_mul = float(1.0 - lr_ * wd);
    job.b1 = float(opt_.beta1);
    job.one_minus_b1 = float(1.0 - opt_.beta1);
    job.b2 = float(opt_.beta2);
    job.one_minus_b2 = float(1.0 - opt_.beta2);
    job.bias_c2_sqrt = float(std::sqrt(bias_c2));
    job.eps = float(opt_.eps);
    job.neg_step_size = float(-(lr_ / bias_c1));
    jobs.push_back(job);
    sizes.push_back(prm.tensor.numel());
    prm.tensor.bump_version();
  }
  for_blocks(sizes, [&](int64_t, int64_t j, int64_t begin, int64_t n) {
    adamw_update(jobs[size_t(j)], begin, n);
  });
  steps_ += 1;
}

// ---------------------------------------------------------------------------------------------
// SGD

SGD::SGD(std::vector<Parameter> params, double lr, const SGDOptions& opt)
    : Optimizer(std::move(params), lr,
                opt.momentum != 0 ? std::vector<std::string>{"momentum_buffer"}
                                  : std::vector<std::string>{}),
      opt_(opt) {
  check_range("sgd", "momentum", opt.momentum, 0.0, kInf, false);
  check_range("sgd", "dampening", opt.dampening, -kInf, kInf, false);
  check_range("sgd", "weight_decay", opt.weight_decay, 0.0, kInf, false);
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
    throw Error("sgd: nesterov = true needs momentum > 0 and dampening = 0 (got momentum = " +
                number_text(opt.momentum) + ", dampening = " + number_text(opt.dampening) + ")");
}

std::string SGD::describe() const {
  return "sgd(lr=" + number_text(lr_) + ", momentum=" + number_text(opt_.momentum) + ", dampening=" +
         number_text(opt_.dampening) + ", nesterov=" + (opt_.nesterov ? "true" : "false") +
         ", weight_decay=" + number_text(opt_.weight_decay) + " except on decay=false parameters)";
}

std::map<std::string, double> SGD::hyperparameters() const {
  return {{"lr", lr_}, {"momentum", opt_.momentum}, {"dampening", opt_.dampening},
          {"weight_decay", opt_.weight_decay}, {"nesterov", opt_.nesterov ? 1.0 : 0.0}};
}

void SGD::step() {
  const bool use_momentum = opt_.momentum != 0;
  std::vector<SGDJob> jobs;
  std::vector<int64_t> sizes;
  const std::vector<Tensor> grads = grads_of(params_);
  for (size_t pi = 0; pi < params_.size(); pi++) {
    Parameter& prm = params_[pi];
    const Tensor& grad = grads[pi];
    if (!grad.defined()) continue;
    ParamState& st = state_[prm.name];
    const bool first = st.step == 0 && use_momentum;
    if (first) st.slots["momentum_buffer"] = Tensor::empty(prm.tensor.shape());
    st.step += 1;
    SGDJob job;
    job.p = prm.tensor.data();
    job.buf = use_momentum ? st.slots["momentum_buffer"].data() : nullptr;
    job.g = grad.data();
    job.wd = float(prm.decay ? opt_.weight_decay : 0.0);
    job.momentum = float(opt_.momentum);
    job.one_minus_damp = float(1.0 - opt_.dampening);
    job.neg_lr = float(-lr_);
    job.first = first;
    job.nesterov = opt_.nesterov;
    jobs.push_back(job);
    sizes.push_back(prm.tensor.numel());
    prm.tensor.bump_version();
  }
  for_blocks(sizes, [&](int64_t, int64_t j, int64_t begin, int64_t n) {
    sgd_update(jobs[size_t(j)], begin, n);
  });
  steps_ += 1;
}

// ---------------------------------------------------------------------------------------------
// Gradient clipping

double clip_grad_norm(const std::vector<Parameter>& params, double max_norm) {
  std::vector<float*> grads;
  std::vector<int64_t> sizes;
  for (const Parameter& prm : params) {
    Tensor g = prm.tensor.grad();
    if (!g.defined()) continue;
    grads.push_back(g.data());
    sizes.push_back(g.numel());
  }
  // One partial sum per block, added in block order: the same norm at any thread count.
  std::vector<double> partial(size_t(count_blocks(sizes)), 0.0);
  for_blocks(sizes, [&](int64_t b, int64_t j, int64_t begin, int64_t n) {
    const float* x = grads[size_t(j)] + begin;
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // independent sums, so the loop vectorises
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; l++) lanes[l] += double(x[i + l]) * x[i + l];
    for (; i < n; i++) lanes[0] += double(x[i]) * x[i];
    double s = 0;
    for (double lane : lanes) s += lane;
    partial[size_t(b)] = s;
  });
  double sum = 0;
  for (double s : partial) sum += s;
  const double total = std::sqrt(sum);

  const double coef = max_norm / (total + 1e-6);
  if (max_norm > 0 && coef < 1) {
    const float scale = float(coef);
    for_blocks(sizes, [&](int64_t, int64_t j, int64_t begin, int64_t n) {
      float* x = grads[size_t(j)] + begin;
      for (int64_t i = 0; i < n; i++) x[i] *= scale;
    });
  }
  return total;
}

}  // namespace tri
