// The delta rule (framework/kernels/delta_rule.hpp): the fused kernel against its naive reference
// (forward and every gradient, with and without the decay), finite differences, the gated form
// at g = 0 against the plain one, what the rule stores (a written value read back exactly, where
// linear attention adds the other keys' values), the recurrent step against the parallel
// forward, causality, determinism and shape errors.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/kernels/delta_rule.hpp"
#include "framework/kernels/linear_attention.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"
#include "tests/compare.hpp"

using namespace tri;
using namespace trilemma_test;
using gradcheck::param;

namespace {

// Unit rows over the last axis, as the models' L2-normalised keys (the update is then a
// contraction for beta in (0, 1]).
Tensor unit_rows(Tensor x) {
  const int64_t D = x.size(-1);
  for (int64_t r = 0; r < x.numel() / D; ++r) {
    float* p = x.data() + r * D;
    double s = 0;
    for (int64_t j = 0; j < D; ++j) s += double(p[j]) * p[j];
    const float inv = float(1 / std::sqrt(s));
    for (int64_t j = 0; j < D; ++j) p[j] *= inv;
  }
  return x;
}

// One problem's leaves: q, k (unit rows), v [B, T, H, *], beta in (0.1, 0.9), g in (-0.5, -0.05)
// (alpha = exp(g) in (0.6, 0.95)) or none.
struct Problem {
  int64_t B, T, H, Dk, Dv;
  bool gated;
  Tensor q, k, v, beta, g;
  Problem(int64_t B_, int64_t T_, int64_t H_, int64_t Dk_, int64_t Dv_, bool gated_, uint64_t seed)
      : B(B_), T(T_), H(H_), Dk(Dk_), Dv(Dv_), gated(gated_) {
    q = param({B, T, H, Dk}, seed + 1);
    k = unit_rows(gradcheck::uniform({B, T, H, Dk}, seed + 2)).requires_grad_();
    v = param({B, T, H, Dv}, seed + 3);
    beta = param({B, T, H}, seed + 4, 0.1f, 0.9f);
    if (gated) g = param({B, T, H}, seed + 5, -0.5f, -0.05f);
  }
  std::vector<Tensor> leaves() const {
    return gated ? std::vector<Tensor>{q, k, v, beta, g} : std::vector<Tensor>{q, k, v, beta};
  }
};

using Kernel = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float);

// The fused kernel; and with a head's state in memory where it would be in registers.
Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& g, float scale) {
  return delta_rule(q, k, v, b, g, scale);
}
Tensor fused_in_memory(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& g,
                       float scale) {
  return delta_rule(q, k, v, b, g, scale, false);
}

struct Result {
  Tensor out;
  std::vector<Tensor> grads;
};

// The output and the gradients of sum(out * w) w.r.t. every leaf.
Result forward_backward(const Problem& p, Kernel kernel, const Tensor& w, float scale = 0.5f) {
  for (const Tensor& t : p.leaves()) t.impl()->grad.reset();
  Result r;
  r.out = kernel(p.q, p.k, p.v, p.beta, p.g, scale);
  backward(sum(mul(r.out, w)));
  for (const Tensor& t : p.leaves()) r.grads.push_back(t.grad().clone());
  return r;
}

const char* kLeafNames[] = {"q", "k", "v", "beta", "g"};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(float) * size_t(a.numel())) == 0;
}

}  // namespace

TEST_CASE("delta_rule: fused matches the naive reference, forward and every gradient") {
  // Dv = 20 pads the state's rows; T = 150 spans three of the backward's checkpointed chunks.
  struct Size {
    int64_t B, T, H, Dk, Dv;
  };
  for (const Size& s : {Size{2, 37, 3, 12, 20}, Size{1, 1, 2, 5, 3}, Size{1, 150, 2, 16, 16}})
    for (bool gated : {false, true}) {
      CAPTURE(s.T);
      CAPTURE(gated);
      Problem p(s.B, s.T, s.H, s.Dk, s.Dv, gated, 10 * s.T + gated);
      Tensor w = gradcheck::uniform({s.B, s.T, s.H, s.Dv}, 7);
      Result f = forward_backward(p, fused, w), n = forward_backward(p, delta_rule_naive, w);
      CHECK(scaled_err(f.out, n.out) < 1e-5);
      double worst = 0;
      for (size_t i = 0; i < f.grads.size(); ++i) {
        INFO("gradient of " << kLeafNames[i]);
        CHECK(scaled_err(f.grads[i], n.grads[i]) < 1e-5);
        worst = std::max(worst, scaled_err(f.grads[i], n.grads[i]));
      }
      std::printf("delta_rule fused vs naive, T %3lld %-5s: output %.1e, gradients %.1e\n", (long long)s.T,
                  gated ? "gated" : "plain", scaled_err(f.out, n.out), worst);
    }
}

// The chunked form with the chunk's arguments bound: chunks of 16 (several per sequence at these T).
Tensor delta_rule_chunked16(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, const Tensor& g,
                            float scale) {
  return delta_rule_chunked(q, k, v, beta, g, scale, 16);
}

TEST_CASE("delta_rule: the chunked form equals the fused recurrence to float32 rounding, with its gradients") {
  // T 37 and 150 end in a partial chunk (padded); chunks of 16 and the default 64. Tolerance: RMS
  // error 2e-6 of the reference's RMS, a few float32 roundings (6e-8) amplified by the
  // triangular inverse's products, while a wrong term is off by 1e-2 or more.
  struct Case {
    int64_t B, T, H, Dk, Dv;
    Kernel chunked;
  };
  for (const Case& s : {Case{2, 37, 3, 12, 20, delta_rule_chunked16}, Case{1, 150, 2, 16, 16, delta_rule_chunked16},
                        Case{2, 150, 1, 32, 32, [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                                                   const Tensor& g, float sc) { return delta_rule_chunked(q, k, v, b, g, sc); }}})
    for (bool gated : {false, true}) {
      CAPTURE(s.T);
      CAPTURE(gated);
      Problem p(s.B, s.T, s.H, s.Dk, s.Dv, gated, 60 + s.T + gated);
      Tensor w = gradcheck::uniform({s.B, s.T, s.H, s.Dv}, 61);
      Result f = forward_backward(p, fused, w), c = forward_backward(p, s.chunked, w);
      double worst = 0;
      CHECK(rms_err(c.out, f.out) < 5e-6);
      for (size_t i = 0; i < f.grads.size(); ++i) {
        INFO("gradient of " << kLeafNames[i]);
        CHECK(rms_err(c.grads[i], f.grads[i]) < 5e-6);
        worst = std::max(worst, rms_err(c.grads[i], f.grads[i]));
      }
      std::printf("delta_rule chunked vs fused, T %3lld %-5s: output %.1e, gradients %.1e (RMS, relative)\n",
                  (long long)s.T, gated ? "gated" : "plain", rms_err(c.out, f.out), worst);
    }
}

TEST_CASE("delta_rule: the chunked form stays finite under a strong decay") {
  // g = -30 per step: exp(G_t - G_i) above the diagonal would be exp(30 * 63), far past float32.
  NoGradGuard no_grad;
  Problem p(1, 64, 2, 8, 8, true, 71);
  p.g = Tensor::full({1, 64, 2}, -30.f);
  const Tensor f = delta_rule(p.q, p.k, p.v, p.beta, p.g), c = delta_rule_chunked(p.q, p.k, p.v, p.beta, p.g);
  for (int64_t i = 0; i < c.numel(); ++i) REQUIRE(std::isfinite(c.data()[i]));
  CHECK(rms_err(c, f) < 5e-6);
}

TEST_CASE("delta_rule: a 16 x 16 state in registers gives the bits of the general loop") {
  // Dv 16 and 11 (padded to one vector); T 150 crosses two checkpoints, 37 ends inside the first.
  for (auto [T, Dv] : {std::pair<int64_t, int64_t>{150, 16}, {37, 11}})
    for (bool gated : {false, true}) {
      CAPTURE(Dv);
      CAPTURE(gated);
      const Problem p(2, T, 3, 16, Dv, gated, 61);
      const Tensor w = gradcheck::uniform({2, T, 3, Dv}, 62);
      const Result a = forward_backward(p, fused, w), b = forward_backward(p, fused_in_memory, w);
      CHECK(same_bits(a.out, b.out));
      for (size_t i = 0; i < a.grads.size(); ++i) {
        INFO("gradient of " << kLeafNames[i]);
        CHECK(same_bits(a.grads[i], b.grads[i]));
      }
    }
}

TEST_CASE("delta_rule: gradients match finite differences") {
  for (bool gated : {false, true}) {
    CAPTURE(gated);
    const Shape sk{2, 7, 2, 3}, sv{2, 7, 2, 4}, sb{2, 7, 2};
    std::vector<Tensor> in = {param(sk, 1), param(sk, 2, -0.6f, 0.6f), param(sv, 3), param(sb, 4, 0.1f, 0.9f)};
    if (gated) in.push_back(param(sb, 5, -0.5f, -0.05f));
    auto f = [gated](const std::vector<Tensor>& x) {
      return delta_rule(x[0], x[1], x[2], x[3], gated ? x[4] : Tensor(), 0.7f);
    };
    gradcheck::Result r = gradcheck::check(f, in);
    INFO(r.summary());
    CHECK(r.ok());
  }
}

TEST_CASE("delta_rule: the gated rule at g = 0 (alpha = 1) is the plain rule, bit for bit") {
  Problem plain(2, 70, 3, 12, 20, false, 21);
  Problem gated = plain;
  gated.gated = true;
  gated.g = Tensor::zeros({2, 70, 3}).requires_grad_();
  Tensor w = gradcheck::uniform({2, 70, 3, 20}, 22);
  const Result a = forward_backward(plain, fused, w), b = forward_backward(gated, fused, w);
  CHECK(same_bits(a.out, b.out));
  for (size_t i = 0; i < a.grads.size(); ++i) {
    INFO("gradient of " << kLeafNames[i]);
    CHECK(same_bits(a.grads[i], b.grads[i]));
  }
  // The step, too.
  NoGradGuard no_grad;
  Tensor q = gradcheck::uniform({2, 1, 3, 12}, 23), k = unit_rows(gradcheck::uniform({2, 1, 3, 12}, 24));
  Tensor v = gradcheck::uniform({2, 1, 3, 20}, 25), beta = gradcheck::uniform({2, 1, 3}, 26, 0.1f, 0.9f);
  Tensor M1 = gradcheck::uniform({2, 3, 12, 20}, 27), M2 = M1.clone();
  CHECK(same_bits(delta_rule_step(q, k, v, beta, Tensor(), M1), delta_rule_step(q, k, v, beta, Tensor::zeros({2, 1, 3}), M2)));
  CHECK(same_bits(M1, M2));
}

TEST_CASE("delta_rule: beta = 1 and a unit key store v exactly; a second key replaces, linear attention adds") {
  NoGradGuard no_grad;
  const Tensor v = Tensor::from({1, 2, 1, 4}, {0.3f, -1.7f, 2.5f, 0.9f, -0.4f, 1.1f, 0.6f, -2.2f});
  const Tensor ones = Tensor::full({1, 2, 1}, 1.f);
  // k1 and k2 are unit keys with k1 . k2 = 1/2: not orthogonal.
  const Tensor k = Tensor::from({1, 2, 1, 4}, {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, -0.5f});
  // Write (k1, v1) and read it back at q = k1: exactly v1.
  const Tensor k1 = Tensor::from({1, 1, 1, 4}, {0.5f, 0.5f, 0.5f, 0.5f});
  const Tensor v1 = Tensor::from({1, 1, 1, 4}, {0.3f, -1.7f, 2.5f, 0.9f});
  CHECK(same_bits(delta_rule(k1, k1, v1, Tensor::full({1, 1, 1}, 1.f)), v1));
  // Then write (k2, v2) and read at q = k2: v2, to float32 rounding; linear attention (identity
  // features) returns (1/2 v1 + v2) / (3/2): v2 plus cross-talk from v1.
  const Tensor delta = delta_rule(k, k, v, ones);
  const Tensor linear = linear_attention(k, k, v);
  double delta_err = 0, crosstalk = 0;
  for (int i = 0; i < 4; ++i) {
    const float v1 = v.data()[i], v2 = v.data()[4 + i];
    delta_err = std::max(delta_err, double(std::fabs(delta.data()[4 + i] - v2)));
    crosstalk = std::max(crosstalk, double(std::fabs(linear.data()[4 + i] - v2)));
    CHECK(linear.data()[4 + i] == doctest::Approx((0.5 * v1 + v2) / 1.5).epsilon(1e-5));
  }
  std::printf("delta_rule read back at the second key: %.1e from v2; linear attention %.2f\n", delta_err, crosstalk);
  CHECK(delta_err < 1e-6);
  CHECK(crosstalk > 0.5);
}

TEST_CASE("delta_rule: stepping token by token equals the parallel forward, bit for bit") {
  // Dv = 20 steps through a padded copy of the state, Dv = 32 in place.
  const int64_t B = 2, T = 70, H = 3;
  for (auto [Dk, Dv] : {std::pair<int64_t, int64_t>{12, 20}, {16, 32}})
    for (bool gated : {false, true}) {
      CAPTURE(Dv);
      CAPTURE(gated);
      NoGradGuard no_grad;
      const Problem p(B, T, H, Dk, Dv, gated, 31);
      const Tensor full = delta_rule(p.q, p.k, p.v, p.beta, p.g, 0.25f);
      Tensor M = Tensor::zeros({B, H, Dk, Dv});
      // Token t of every batch row, as [B, 1, H, D] (or [B, 1, H] for beta and g).
      auto token = [&](const Tensor& x, int64_t t) {
        if (!x.defined()) return Tensor();
        const int64_t D = x.dim() == 4 ? x.size(3) : 1;
        std::vector<Tensor> rows;
        for (int64_t b = 0; b < B; ++b) rows.push_back(x.narrow0(b, 1).view({T, H, D}).narrow0(t, 1));
        return x.dim() == 4 ? concat(rows, 0).view({B, 1, H, D}) : concat(rows, 0).view({B, 1, H});
      };
      std::vector<Tensor> outs;
      for (int64_t t = 0; t < T; ++t)
        outs.push_back(delta_rule_step(token(p.q, t), token(p.k, t), token(p.v, t), token(p.beta, t), token(p.g, t), M,
                                       0.25f));
      CHECK(same_bits(concat(outs, 1), full));
    }
}

TEST_CASE("delta_rule: output t has exactly zero gradient w.r.t. inputs after t") {
  const int64_t B = 2, T = 90, H = 2, Dk = 8, Dv = 12, t0 = 70;
  for (bool gated : {false, true}) {
    CAPTURE(gated);
    Problem p(B, T, H, Dk, Dv, gated, 41);
    Tensor w = gradcheck::uniform({B, T, H, Dv}, 42);
    for (int64_t i = 0; i < w.numel(); ++i)
      if ((i / (H * Dv)) % T != t0) w.data()[i] = 0.f;  // only output t0 reaches the loss
    const Result r = forward_backward(p, fused, w);
    for (size_t i = 0; i < r.grads.size(); ++i) {
      INFO("gradient of " << kLeafNames[i]);
      const Tensor& g = r.grads[i];
      const int64_t D = g.dim() == 4 ? g.size(3) : 1;
      double after = 0, at_or_before = 0;
      for (int64_t j = 0; j < g.numel(); ++j) ((j / (H * D)) % T > t0 ? after : at_or_before) += std::fabs(g.data()[j]);
      CHECK(after == 0);
      CHECK(at_or_before > 0);
    }
  }
}

TEST_CASE("delta_rule: results repeat bit for bit, at any thread count") {
  Problem p(2, 80, 3, 12, 20, true, 51);
  Tensor w = gradcheck::uniform({2, 80, 3, 20}, 52);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Result one = forward_backward(p, fused, w);
  omp_set_num_threads(std::max(2, threads));
  const Result two = forward_backward(p, fused, w), again = forward_backward(p, fused, w);
  omp_set_num_threads(threads);
  for (const Result* r : {&two, &again}) {
    CHECK(same_bits(r->out, one.out));
    for (size_t i = 0; i < one.grads.size(); ++i) CHECK(same_bits(r->grads[i], one.grads[i]));
  }
}

TEST_CASE("delta_rule: bad shapes are errors naming the argument") {
  Tensor q = Tensor::zeros({2, 5, 3, 4}), v = Tensor::zeros({2, 5, 3, 6}), beta = Tensor::zeros({2, 5, 3});
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { delta_rule(q, Tensor::zeros({2, 5, 3, 5}), v, beta); }).find("k [2, 5, 3, 5]") != std::string::npos);
  CHECK(message([&] { delta_rule(q, q, Tensor::zeros({2, 4, 3, 6}), beta); }).find("v [2, 4, 3, 6]") != std::string::npos);
  CHECK(message([&] { delta_rule(q, q, v, Tensor::zeros({2, 5})); }).find("beta [2, 5]") != std::string::npos);
  CHECK(message([&] { delta_rule(q, q, v, beta, Tensor::zeros({2, 5, 4})); }).find("g [2, 5, 4]") != std::string::npos);
  CHECK(message([&] { delta_rule_naive(q.view({10, 3, 4}), q, v, beta); }).find("[B, T, H, Dk]") != std::string::npos);
  Tensor M = Tensor::zeros({2, 3, 4, 6});
  CHECK(message([&] { delta_rule_step(q, q, v, beta, Tensor(), M); }).find("T = 5") != std::string::npos);
  Tensor q1 = Tensor::zeros({2, 1, 3, 4}), v1 = Tensor::zeros({2, 1, 3, 6}), b1 = Tensor::zeros({2, 1, 3});
  Tensor bad = Tensor::zeros({2, 3, 6, 4});
  CHECK(message([&] { delta_rule_step(q1, q1, v1, b1, Tensor(), bad); }).find("state [2, 3, 6, 4]") != std::string::npos);
}
