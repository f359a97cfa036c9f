// The selective scan: the fused kernel against the naive port of selective_scan_ref (output and
// every gradient, over the argument combinations), finite differences, the recurrent step,
// causality and thread-count determinism. The dense time-invariant SSM: HiPPO-LegS, the
// bilinear discretisation, the scan against a double-precision loop, its gradients and step.
#include <doctest/doctest.h>
#include <omp.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/kernels/scan_lanes.hpp"
#include "framework/kernels/selective_scan.hpp"
#include "framework/kernels/ssm_dense.hpp"
#include "gradcheck.hpp"

using namespace tri;
using namespace trilemma_test;
using gradcheck::param;

namespace {

struct ScanCase {
  int64_t B = 2, T = 37, E = 24, N = 16;
  bool var_B = true, var_C = true, has_D = true, has_z = true, has_bias = true, softplus = true;
  std::string name() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " E=" + std::to_string(E) +
           " N=" + std::to_string(N) + (var_B ? " B:sel" : " B:lti") + (var_C ? " C:sel" : " C:lti") +
           (has_D ? " D" : "") + (has_z ? " z" : "") + (has_bias ? " bias" : "") +
           (softplus ? " softplus" : "");
  }
};

// The eight arguments; absent optional ones are undefined tensors.
struct ScanInputs {
  Tensor u, delta, A, Bm, Cm, D, z, bias;
  std::vector<Tensor> list() const { return {u, delta, A, Bm, Cm, D, z, bias}; }
};

// Inputs with dt = (softplus of) delta + bias in about [0.01, 0.2], as in a trained Mamba.
ScanInputs make_inputs(const ScanCase& c, uint64_t seed) {
  ScanInputs in;
  auto s = [&](uint64_t k) { return seed_mix(seed, k); };
  in.u = param(Shape{c.B, c.T, c.E}, s(1), -1.f, 1.f);
  if (c.softplus) {  // softplus^-1 of [0.01, 0.2] is about [-4.6, -1.5]
    in.delta = c.has_bias ? param(Shape{c.B, c.T, c.E}, s(2), -0.6f, 0.6f)
                          : param(Shape{c.B, c.T, c.E}, s(2), -4.5f, -1.5f);
    if (c.has_bias) in.bias = param(Shape{c.E}, s(3), -3.8f, -2.2f);
  } else {
    in.delta = param(Shape{c.B, c.T, c.E}, s(2), 0.01f, 0.1f);
    if (c.has_bias) in.bias = param(Shape{c.E}, s(3), 0.f, 0.1f);
  }
  in.A = param(Shape{c.E, c.N}, s(4), -4.f, -0.25f);
  in.Bm = c.var_B ? param(Shape{c.B, c.T, c.N}, s(5)) : param(Shape{c.E, c.N}, s(5));
  in.Cm = c.var_C ? param(Shape{c.B, c.T, c.N}, s(6)) : param(Shape{c.E, c.N}, s(6));
  if (c.has_D) in.D = param(Shape{c.E}, s(7));
  if (c.has_z) in.z = param(Shape{c.B, c.T, c.E}, s(8), -2.f, 2.f);
  return in;
}

Tensor run_scan(bool fused, const ScanInputs& in, bool softplus) {
  return fused ? selective_scan(in.u, in.delta, in.A, in.Bm, in.Cm, in.D, in.z, in.bias, softplus)
               : selective_scan_naive(in.u, in.delta, in.A, in.Bm, in.Cm, in.D, in.z, in.bias, softplus);
}

// The output and the gradients of sum(out * w) for every defined input (copies); w is the
// given weight, else uniform from seed.
struct Result {
  std::vector<float> out;
  std::vector<std::vector<float>> grads;
};

Result forward_backward(const std::function<Tensor()>& f, const std::vector<Tensor>& inputs,
                        uint64_t seed, const Tensor& weight = Tensor()) {
  for (const Tensor& t : inputs)
    if (t.defined()) t.impl()->grad.reset();
  Tensor out = f();
  Tensor w = weight.defined() ? weight : gradcheck::uniform(out.shape(), seed);
  backward(sum(mul(out, w)));
  Result r{out.tolist(), {}};
  for (const Tensor& t : inputs) {
    if (!t.defined()) r.grads.emplace_back();
    else if (!t.grad().defined()) r.grads.emplace_back(size_t(t.numel()), 0.f);
    else r.grads.push_back(t.grad().tolist());
  }
  return r;
}

const char* kInputNames[] = {"u", "delta", "A", "B", "C", "D", "z", "delta_bias"};

void check_fused_against_naive(const ScanCase& c, double tol) {
  CAPTURE(c.name());
  const ScanInputs in = make_inputs(c, 42);
  const Result fused = forward_backward([&] { return run_scan(true, in, c.softplus); }, in.list(), 7);
  const Result naive = forward_backward([&] { return run_scan(false, in, c.softplus); }, in.list(), 7);
  CHECK(max_rel_err(fused.out, naive.out) < tol);
  for (size_t k = 0; k < naive.grads.size(); ++k) {
    if (naive.grads[k].empty()) continue;
    CAPTURE(kInputNames[k]);
    const double err = max_rel_err(fused.grads[k], naive.grads[k]);
    CHECK(err < tol);
  }
}

}  // namespace

TEST_CASE("fused selective scan matches the naive port of selective_scan_ref: output and all gradients") {
  for (int64_t N : {16, 4})
    for (int mode = 0; mode < 3; ++mode)  // B and C selective, both time-invariant, mixed
      for (int opts = 0; opts < 16; ++opts) {
        ScanCase c;
        c.N = N;
        c.var_B = mode != 1;
        c.var_C = mode == 0;
        c.has_D = opts & 1, c.has_z = opts & 2, c.has_bias = opts & 4, c.softplus = opts & 8;
        check_fused_against_naive(c, 1e-5);
      }
}

TEST_CASE("fused selective scan across several saved chunks and channel groups") {
  // T = 150: three chunks of the backward's recomputation, the last one partial; E = 150:
  // ten blocks of channels (the last partial) in more than one backward group.
  for (bool sel : {true, false}) {
    ScanCase c;
    c.T = 150, c.E = 150, c.var_B = sel, c.var_C = sel;
    check_fused_against_naive(c, 2e-5);
  }
}

TEST_CASE("fused selective scan passes finite differences") {
  for (bool sel : {true, false}) {
    ScanCase c;
    c.B = 2, c.T = 70, c.E = 20, c.N = 4, c.var_B = sel, c.var_C = sel;
    CAPTURE(c.name());
    ScanInputs in = make_inputs(c, 5);
    const auto f = [&](const std::vector<Tensor>& x) {
      return selective_scan(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], c.softplus);
    };
    gradcheck::Options opt;
    opt.eps = 5e-3;  // dt is small: keep the nudge of delta well inside its scale
    const gradcheck::Result r = gradcheck::check(f, in.list(), opt);
    INFO(r.summary());
    CHECK(r.ok());
    for (const gradcheck::InputError& e : r.inputs) CHECK((e.checked && e.elements > 0));
  }
}

TEST_CASE("stepping the selective scan token by token gives the parallel scan's bits") {
  // The step does each channel's arithmetic in the scan's order (states 16 at a time, the output
  // one fused multiply-add per state in order): the same bits, at N 16 and at partial vectors.
  for (auto [sel, N] : {std::pair{true, 16}, std::pair{false, 16}, std::pair{true, 5}, std::pair{false, 17}}) {
    ScanCase c;
    c.T = 37, c.var_B = sel, c.var_C = sel, c.N = N;
    CAPTURE(c.name());
    const ScanInputs in = make_inputs(c, 11);
    NoGradGuard no_grad;
    const Tensor full = run_scan(true, in, c.softplus);
    Tensor h = Tensor::zeros(Shape{c.B, c.E, c.N});
    std::vector<Tensor> ys;
    for (int64_t t = 0; t < c.T; ++t) {
      auto at = [&](const Tensor& x) { return slice(x, 1, t, t + 1); };
      ys.push_back(selective_scan_step(at(in.u), at(in.delta), in.A, sel ? at(in.Bm) : in.Bm,
                                       sel ? at(in.Cm) : in.Cm, in.D, at(in.z), in.bias, c.softplus, h));
    }
    // Under the sanitizers, to rounding: 1e-5 covers 37 steps' state recurrences rounded apart.
    CHECK(bit_equal_unless_sanitized(concat(ys, 1), full, 1e-5));
  }
}

TEST_CASE("the selective scan is causal: outputs and gradients never look ahead") {
  ScanCase c;
  c.T = 100;
  ScanInputs in = make_inputs(c, 3);
  const int64_t t0 = 70;  // in the second chunk
  Tensor before;
  {
    NoGradGuard no_grad;
    before = run_scan(true, in, c.softplus);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t e = 0; e < c.E; ++e) in.u.data()[(b * c.T + t0) * c.E + e] += 0.5f;
    const Tensor after = run_scan(true, in, c.softplus);
    int64_t changed_early = 0, changed_late = 0;
    for (int64_t i = 0; i < after.numel(); ++i) {
      const bool differs = after.data()[i] != before.data()[i];
      ((i / c.E) % c.T < t0 ? changed_early : changed_late) += differs;
    }
    CHECK(changed_early == 0);
    CHECK(changed_late > 0);
  }
  // d out[:, t0] / d input[:, t] is zero for every t > t0.
  for (const Tensor& t : in.list())
    if (t.defined()) t.impl()->grad.reset();
  const Tensor out = run_scan(true, in, c.softplus);
  backward(sum(slice(out, 1, t0, t0 + 1)));
  for (const Tensor* x : {&in.u, &in.delta, &in.z, &in.Bm, &in.Cm}) {
    const int64_t width = x->size(2);
    double late = 0, at_t0 = 0;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t t = t0; t < c.T; ++t)
        for (int64_t j = 0; j < width; ++j) {
          const double g = std::fabs(x->grad().data()[(b * c.T + t) * width + j]);
          (t == t0 ? at_t0 : late) = std::max(t == t0 ? at_t0 : late, g);
        }
    CHECK(late == 0.0);
    CHECK(at_t0 > 0.0);
  }
}

TEST_CASE("fused selective scan gives identical bits on 1 and 2 threads") {
  ScanCase c;
  c.T = 150, c.E = 150;
  const ScanInputs in = make_inputs(c, 9);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Result one = forward_backward([&] { return run_scan(true, in, c.softplus); }, in.list(), 1);
  omp_set_num_threads(2);
  const Result two = forward_backward([&] { return run_scan(true, in, c.softplus); }, in.list(), 1);
  omp_set_num_threads(saved);
  CHECK(std::memcmp(one.out.data(), two.out.data(), one.out.size() * sizeof(float)) == 0);
  for (size_t k = 0; k < one.grads.size(); ++k) {
    CAPTURE(kInputNames[k]);
    CHECK(one.grads[k] == two.grads[k]);
  }
}

TEST_CASE("a gradient at the last step only decays through subnormals; the caller's float mode is kept") {
  // A needle scored once: the adjoint of every state decays from the last step back to the
  // first with no gradient joining it. Over 600 steps its fastest states fall below 2^-126 (the
  // backward flushes them to zero there: lanes.hpp, FlushSubnormals).
  ScanCase c;
  c.B = 1, c.T = 600, c.E = 16;
  const ScanInputs in = make_inputs(c, 11);
  double fastest = 0;  // the most negative sum over t of dt_t A (the log of a state's decay)
  for (int64_t e = 0; e < c.E; ++e) {
    double dt_sum = 0;
    for (int64_t t = 0; t < c.T; ++t) {
      const double x = in.delta.data()[t * c.E + e] + in.bias.data()[e];
      dt_sum += std::log1p(std::exp(x));
    }
    for (int64_t n = 0; n < c.N; ++n) fastest = std::min(fastest, dt_sum * in.A.data()[e * c.N + n]);
  }
  REQUIRE(fastest < -126 * std::log(2.0));
  Tensor last = Tensor::zeros(Shape{c.B, c.T, c.E});
  for (int64_t e = 0; e < c.E; ++e) last.data()[(c.T - 1) * c.E + e] = 1.f + 0.1f * float(e);
  auto grads = [&](bool fused) {
    return forward_backward([&] { return run_scan(fused, in, c.softplus); }, in.list(), 0, last).grads;
  };
#if defined(__SSE__)
  const unsigned mode_before = _mm_getcsr();
#endif
  const auto fused = grads(true);
#if defined(__SSE__)
  CHECK(_mm_getcsr() == mode_before);
#endif
  const auto naive = grads(false);
  for (size_t k = 0; k < naive.size(); ++k) {
    if (naive[k].empty()) continue;
    CAPTURE(std::string(kInputNames[k]));
    // 2e-5 at T 150 above; the sums over time grow as sqrt(T): 4x the steps, 2.5x the bound.
    CHECK(max_rel_err(fused[k], naive[k]) < 5e-5);
  }
}

TEST_CASE("the fused scan's gradients add into existing ones, and one tensor given twice gets both") {
  ScanCase c;
  c.T = 70;  // two saved chunks
  const ScanInputs in = make_inputs(c, 5);
  const Result once = forward_backward([&] { return run_scan(true, in, c.softplus); }, in.list(), 3);
  // A second backward without clearing: every gradient doubles (x + x is exact).
  Tensor out = run_scan(true, in, c.softplus);
  backward(sum(mul(out, gradcheck::uniform(out.shape(), 3))));
  const std::vector<Tensor> list = in.list();
  for (size_t k = 0; k < list.size(); ++k) {
    if (!list[k].defined()) continue;
    CAPTURE(kInputNames[k]);
    std::vector<float> twice = once.grads[k];
    for (float& g : twice) g += g;
    CHECK(list[k].grad().tolist() == twice);
  }
  // z given as u itself: u's gradient is du + dz, as with a copy of u for z.
  ScanInputs alias = in, copy = in;
  alias.z = in.u;
  copy.z = in.u.clone().requires_grad_();
  const Result a = forward_backward([&] { return run_scan(true, alias, c.softplus); }, alias.list(), 4);
  const Result b = forward_backward([&] { return run_scan(true, copy, c.softplus); }, copy.list(), 4);
  std::vector<float> sum_uz = b.grads[0];
  for (size_t i = 0; i < sum_uz.size(); ++i) sum_uz[i] += b.grads[6][i];
  CHECK(a.out == b.out);
  CHECK(max_rel_err(a.grads[0], sum_uz) < 1e-6);  // du + dz against dz added into du: rounding only
}

TEST_CASE("the scan's decays four at a time have the bits of one at a time, within 2.2e-7 of 2^x") {
  using namespace tri::scan_lanes;
  // Arguments dt * A2 from 0 down past the clamp at -127 (and up past +127), in 64 lanes.
  int checked = 0;
  for (float dt : {1e-4f, 3e-3f, 0.05f, 0.7f, 5.f, 20.f}) {
    for (int start = 0; start < 4096; start += 64) {
      Lanes A2[4], side_by_side[4];
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < kLanes; ++l) {
          const int i = start + k * kLanes + l;
          A2[k][l] = i % 97 == 0 ? 3.f * float(i) : -0.07f * float(i) * float(1 + i % 5);
        }
      decays_of<4>(bcast(dt), A2, side_by_side);
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < kLanes; ++l) {
          const float one = decay_of(dt, A2[k][l]), got = side_by_side[k][l];
          CAPTURE(dt);
          CAPTURE(A2[k][l]);
          CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(one));
          // Against 2^x in double, x clamped to 127 above; from x = -126.5 down, where 2^x
          // rounds to -127 in the exponent, the decay is exactly 0 (a fully decayed state);
          // just above, a subnormal result is exact to its absolute rounding, 2^-150.
          const double x = std::min(double(dt * A2[k][l]), 127.0);
          if (x < -126.5) {
            CHECK(got == 0.f);
          } else {
            const double want = std::exp2(x);
            CHECK(std::fabs(double(got) - want) <= 2.2e-7 * want + 0x1p-150);
          }
          ++checked;
        }
    }
  }
  CHECK(checked == 6 * 4096);
  // Past the floats: -inf decays fully (0), +inf clamps to 2^127, NaN stays NaN, in the vector
  // clamps (AVX-512's max and min) as in the scalar ones.
  Lanes odd[4], side_by_side[4];
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < kLanes; ++l) odd[k][l] = l % 3 == 0 ? -INFINITY : l % 3 == 1 ? INFINITY : NAN;
  decays_of<4>(bcast(1.f), odd, side_by_side);
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < kLanes; ++l) {
      const float got = side_by_side[k][l];
      CHECK(std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(decay_of(1.f, odd[k][l])));
      if (l % 3 == 0) CHECK(got == 0.f);
      if (l % 3 == 1) CHECK((got > 0x1.fffffep126f && std::isfinite(got)));
      if (l % 3 == 2) CHECK(std::isnan(got));
    }
}

TEST_CASE("selective scan rejects mismatched shapes with a message naming them") {
  ScanCase c;
  const ScanInputs in = make_inputs(c, 1);
  const Tensor bad = Tensor::zeros(Shape{c.B, c.T, c.N + 1});
  CHECK_THROWS_WITH_AS(selective_scan(in.u, in.delta, in.A, bad, in.Cm, in.D, in.z, in.bias, true),
                       doctest::Contains("[2, 37, 17]"), Error);
  CHECK_THROWS_AS(selective_scan(in.u, in.delta, Tensor::zeros(Shape{c.E + 1, c.N}), in.Bm, in.Cm,
                                 in.D, in.z, in.bias, true),
                  Error);
}

// ---- dense time-invariant SSM -----------------------------------------------------------

TEST_CASE("hippo_legs follows the LegS formula") {
  const int64_t N = 12;
  const Tensor A = hippo_legs(N);
  REQUIRE(A.shape() == Shape{N, N});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < N; ++k) {
      const double want = n > k ? -std::sqrt(double((2 * n + 1) * (2 * k + 1))) : n == k ? -double(n + 1) : 0.0;
      CHECK(A.data()[n * N + k] == doctest::Approx(want).epsilon(1e-7));
    }
}

TEST_CASE("bilinear discretisation solves (I - dt/2 A) Ad = I + dt/2 A and (I - dt/2 A) Bd = dt I") {
  const int64_t N = 16;
  const Tensor A = hippo_legs(N);
  const Tensor dt = Tensor::from(Shape{3}, {1e-3f, 0.02f, 0.1f});
  Tensor Ad, Bd;
  bilinear_discretise(A, dt, Ad, Bd);
  REQUIRE(Ad.shape() == Shape{3, N, N});
  REQUIRE(Bd.shape() == Shape{3, N, N});
  for (int64_t e = 0; e < 3; ++e) {
    const double h = 0.5 * dt.data()[e];
    double worst = 0;
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < N; ++c) {
        double lhs_a = 0, lhs_b = 0;  // row r of (I - h A) times column c of Ad, Bd
        for (int64_t k = 0; k < N; ++k) {
          const double m = (r == k ? 1.0 : 0.0) - h * A.data()[r * N + k];
          lhs_a += m * Ad.data()[(e * N + k) * N + c];
          lhs_b += m * Bd.data()[(e * N + k) * N + c];
        }
        const double id = r == c ? 1.0 : 0.0;
        worst = std::max(worst, std::fabs(lhs_a - (id + h * A.data()[r * N + c])));
        worst = std::max(worst, std::fabs(lhs_b - id * dt.data()[e]));
      }
    CAPTURE(e);
    CHECK(worst < 1e-6);
  }
}

TEST_CASE("bilinear discretisation of a diagonal A is the scalar closed form") {
  const int64_t N = 5;
  Tensor A = Tensor::zeros(Shape{N, N});
  for (int64_t n = 0; n < N; ++n) A.data()[n * N + n] = -0.5f - 3.f * float(n);
  const Tensor dt = Tensor::from(Shape{2}, {0.01f, 0.3f});
  Tensor Ad, Bd;
  bilinear_discretise(A, dt, Ad, Bd);
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < N; ++c) {
        const double a = A.data()[r * N + r], d = dt.data()[e];
        const double want_a = r == c ? (1 + d * a / 2) / (1 - d * a / 2) : 0.0;
        const double want_b = r == c ? d / (1 - d * a / 2) : 0.0;
        CHECK(Ad.data()[(e * N + r) * N + c] == doctest::Approx(want_a).epsilon(1e-6));
        CHECK(Bd.data()[(e * N + r) * N + c] == doctest::Approx(want_b).epsilon(1e-6));
      }
}

namespace {
struct DenseInputs {
  int64_t B = 2, T = 45, E = 6, N = 8;
  Tensor u, Ad, Bbar, C;
};

DenseInputs make_dense(uint64_t seed) {
  DenseInputs d;
  Tensor dt = gradcheck::uniform(Shape{d.E}, seed_mix(seed, 1), 0.01f, 0.2f);
  Tensor Bd;
  bilinear_discretise(hippo_legs(d.N), dt, d.Ad, Bd);
  d.u = param(Shape{d.B, d.T, d.E}, seed_mix(seed, 2));
  d.Bbar = param(Shape{d.E, d.N}, seed_mix(seed, 3), -0.2f, 0.2f);
  d.C = param(Shape{d.E, d.N}, seed_mix(seed, 4));
  return d;
}
}  // namespace

TEST_CASE("dense_lti_scan matches a double-precision recurrence") {
  const DenseInputs d = make_dense(1);
  NoGradGuard no_grad;
  const Tensor y = dense_lti_scan(d.u, d.Ad, d.Bbar, d.C);
  std::vector<float> want(size_t(y.numel()));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t e = 0; e < d.E; ++e) {
      std::vector<double> h(size_t(d.N), 0.0), hn(size_t(d.N));
      for (int64_t t = 0; t < d.T; ++t) {
        const double u = d.u.data()[(b * d.T + t) * d.E + e];
        double out = 0;
        for (int64_t n = 0; n < d.N; ++n) {
          double s = double(d.Bbar.data()[e * d.N + n]) * u;
          for (int64_t k = 0; k < d.N; ++k) s += double(d.Ad.data()[(e * d.N + n) * d.N + k]) * h[size_t(k)];
          hn[size_t(n)] = s;
          out += double(d.C.data()[e * d.N + n]) * s;
        }
        h = hn;
        want[size_t((b * d.T + t) * d.E + e)] = float(out);
      }
    }
  CHECK(max_rel_err(y.tolist(), want) < 1e-5);
}

TEST_CASE("dense_lti_scan passes finite differences") {
  DenseInputs d = make_dense(2);
  const Tensor Ad = d.Ad;
  const auto f = [&](const std::vector<Tensor>& x) { return dense_lti_scan(x[0], Ad, x[1], x[2]); };
  const gradcheck::Result r = gradcheck::check(f, {d.u, d.Bbar, d.C});
  INFO(r.summary());
  CHECK(r.ok());
}

TEST_CASE("stepping dense_lti_scan token by token equals the scan") {
  const DenseInputs d = make_dense(3);
  NoGradGuard no_grad;
  const Tensor full = dense_lti_scan(d.u, d.Ad, d.Bbar, d.C);
  Tensor h = Tensor::zeros(Shape{d.B, d.E, d.N});
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < d.T; ++t) ys.push_back(dense_lti_step(slice(d.u, 1, t, t + 1), d.Ad, d.Bbar, d.C, h));
  CHECK(max_rel_err(concat(ys, 1).tolist(), full.tolist()) < 1e-6);
}
