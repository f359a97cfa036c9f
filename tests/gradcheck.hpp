// Finite-difference gradient checker for any function of tensors (one op, or a whole block).
//
// The function's output is projected to a scalar L = sum(out * w) with fixed random weights
// w, so every output element carries gradient. The analytic gradient dL/dinput comes from the
// framework's backward; the numerical one from central differences of L,
//   fd = (L(x + eps) - L(x - eps)) / (x+eps - x-eps),
// with L summed in double from the float32 forward (run under NoGradGuard), and the step taken
// as the float32 difference actually applied. An element passes when
//   |fd - an| <= atol + rtol * |fd|.
//
// Noise: the forward is float32, so each output carries a rounding error of about 6e-8 of its
// size (plus a few ulps inside the op). Outputs the nudge does not reach are bit-identical in
// both evaluations and cancel exactly, so the noise in fd is about
//   sqrt(#outputs reached) * 1e-7 * |out * w| / (2 * eps),
// i.e. ~1e-5 for eps = 1e-2 on unit-scale outputs. The truncation error of central
// differences is |f'''| * eps^2 / 6, ~2e-5 for eps = 1e-2 on smooth unit-scale functions and
// zero for functions linear or quadratic in the nudged element (matmul, add, mul, ...).
// The defaults (atol 1e-3, rtol 1e-2) leave two orders of magnitude above both, while any
// real bug (a wrong term, a missed accumulation, a wrong index) gives errors of order 1e-1.
//
// Inputs that do not require grad are left unchecked; the gradients of those that do are
// overwritten. Inputs are nudged in place, so they may be tensors f also reaches by other
// routes: to check a whole block, pass its parameters (and its input) and let f run the block.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/core/rng.hpp"

namespace tri::gradcheck {

struct Options {
  double eps = 1e-2;   // central-difference step
  double atol = 1e-3;  // pass when |fd - an| <= atol + rtol * |fd|
  double rtol = 1e-2;
  int64_t max_checked = 200;  // elements checked per input: a seeded random subset above it
  uint64_t seed = 1;          // projection weights and the subset
};

struct InputError {
  bool checked = false;  // false when the input does not require grad
  int64_t elements = 0, failed = 0;
  double max_abs = 0, max_rel = 0;  // rel: |fd - an| / max(|fd|, |an|, atol)
  std::string first_failure;        // "element 12: fd 0.5 analytic 0.25"
};

struct Result {
  std::vector<InputError> inputs;  // one per input, in order
  // |L(recorded forward) - L(forward under NoGradGuard)| at the same point: recording must
  // not change what f computes, or the differences would check another function.
  double forward_diff = 0;
  bool forward_matches = true;
  bool ok() const {
    for (const InputError& e : inputs)
      if (e.failed) return false;
    return forward_matches;
  }
  double max_abs() const {
    double m = 0;
    for (const InputError& e : inputs) m = std::max(m, e.max_abs);
    return m;
  }
  double max_rel() const {
    double m = 0;
    for (const InputError& e : inputs) m = std::max(m, e.max_rel);
    return m;
  }
  // One line per input: "input 0: 200 checked, 0 failed, max abs 1e-06, max rel 1e-05".
  std::string summary() const {
    std::string s;
    char line[160];
    if (!forward_matches) {
      std::snprintf(line, sizeof line, "recorded and unrecorded forwards differ: |dL| = %.3g\n",
                    forward_diff);
      s += line;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const InputError& e = inputs[i];
      if (!e.checked) continue;
      std::snprintf(line, sizeof line,
                    "input %zu: %lld checked, %lld failed, max abs %.3g, max rel %.3g", i,
                    (long long)e.elements, (long long)e.failed, e.max_abs, e.max_rel);
      s += line;
      if (e.failed) s += ", first failure: " + e.first_failure;
      s += '\n';
    }
    return s;
  }
};

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A tensor of uniform values in [lo, hi), from a seed.
inline Tensor uniform(const Shape& s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(s);
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = lo + float(rng.uniform()) * (hi - lo);
  return t;
}

// The same, marked as requiring grad (a gradcheck input).
inline Tensor param(const Shape& s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = uniform(s, seed, lo, hi);
  t.requires_grad_(true);
  return t;
}

// Moves every value closer than `margin` to `kink` out to kink +- margin, keeping its side, so
// finite differences never straddle a point where the function is not differentiable.
inline void nudge_away(Tensor& t, float kink, float margin) {
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::fabs(p[i] - kink) < margin) p[i] = kink + (p[i] >= kink ? margin : -margin);
}

namespace detail {
// L = sum(out * w) in double.
inline double project(const Tensor& out, const Tensor& w) {
  const float *o = out.data(), *pw = w.data();
  double l = 0;
  for (int64_t i = 0; i < out.numel(); ++i) l += double(o[i]) * pw[i];
  return l;
}

// The elements of an input to check: all of them, or max_checked distinct ones at random.
inline std::vector<int64_t> pick(int64_t n, int64_t max_checked, uint64_t seed) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = i;
  if (n <= max_checked) return idx;
  Rng rng(seed);
  for (int64_t i = 0; i < max_checked; ++i)  // partial Fisher-Yates
    std::swap(idx[size_t(i)], idx[size_t(i + int64_t(rng.below(uint64_t(n - i))))]);
  idx.resize(size_t(max_checked));
  std::sort(idx.begin(), idx.end());
  return idx;
}
}  // namespace detail

// Checks d L / d input for every input that requires grad (see the top of this file). Starts
// from an empty tape: anything recorded before is dropped.
inline Result check(const Fn& f, const std::vector<Tensor>& inputs, const Options& opt = {}) {
  clear_tape();
  // Analytic gradients: one recorded forward, L = sum(out * w), backward.
  for (const Tensor& x : inputs)
    if (x.requires_grad()) x.impl()->grad.reset();
  Tensor out = f(inputs);
  Tensor w = uniform(out.shape(), seed_mix(opt.seed, 0));
  const double l_recorded = detail::project(out, w);
  backward(sum(mul(out, w)));

  Result r;
  r.inputs.resize(inputs.size());
  NoGradGuard no_grad;
  r.forward_diff = std::fabs(detail::project(f(inputs), w) - l_recorded);
  r.forward_matches = r.forward_diff <= 1e-6 * std::max(1.0, std::fabs(l_recorded));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    InputError& e = r.inputs[k];
    if (!x.requires_grad()) continue;
    e.checked = true;
    const Tensor g = x.grad();  // undefined: backward never reached x, its gradient is zero
    float* px = x.data();
    for (int64_t i : detail::pick(x.numel(), opt.max_checked, seed_mix(opt.seed, k + 1))) {
      const float v = px[i];
      const float up = float(v + opt.eps), down = float(v - opt.eps);
      px[i] = up;
      const double l_up = detail::project(f(inputs), w);
      px[i] = down;
      const double l_down = detail::project(f(inputs), w);
      px[i] = v;
      const double fd = (l_up - l_down) / (double(up) - double(down));
      const double an = g.defined() ? double(g.data()[i]) : 0.0;
      const double abs_err = std::fabs(fd - an);
      const double rel_err = abs_err / std::max({std::fabs(fd), std::fabs(an), opt.atol});
      e.elements++;
      e.max_abs = std::max(e.max_abs, abs_err);
      e.max_rel = std::max(e.max_rel, rel_err);
      if (!(abs_err <= opt.atol + opt.rtol * std::fabs(fd))) {  // also catches NaN
        if (!e.failed) {
          char what[96];
          std::snprintf(what, sizeof what, "element %lld: fd %.6g analytic %.6g", (long long)i,
                        fd, an);
          e.first_failure = what;
        }
        e.failed++;
      }
    }
  }
  return r;
}

}  // namespace tri::gradcheck
