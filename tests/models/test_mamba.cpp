// The Mamba mixer (models/mamba.hpp) on its own, in every SSM mode: step-by-step decoding
// equals the parallel forward, causality (outputs and gradients), initialisation as mamba_ssm's,
// parameter names, shapes and decay flags, and the configuration errors.
// (Parity with PyTorch is test_parity_mamba.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/core/init.hpp"
#include "framework/ops/ops.hpp"
#include "models/mamba.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

struct Mode {
  std::string name;
  bool selective;
  const char* a_init;
};
const Mode kModes[] = {{"selective", true, "s4d-real"},
                       {"lti s4d-real", false, "s4d-real"},
                       {"hippo-legs", false, "hippo-legs"},
                       {"s4d-lin", false, "s4d-lin"}};

ModelConfig mamba_cfg(const Mode& mode, int64_t d_model = 32) {
  ModelConfig cfg = ModelConfig::of("mamba");
  cfg.d_model = d_model;
  cfg.options<MambaOptions>().ssm_selective = mode.selective;
  cfg.options<MambaOptions>().a_init = mode.a_init;
  return cfg;
}

// Moves every parameter a little off its init (where A_log, D, B repeat across channels).
void nudge(Module& m, Rng& rng, float scale) {
  for (Parameter& p : m.parameters())
    for (int64_t i = 0; i < p.tensor.numel(); ++i) p.tensor.data()[i] += scale * float(rng.normal());
}

float softplus_f(float v) { return v > 20.f ? v : std::log1p(std::exp(v)); }

}  // namespace

TEST_CASE("Mamba: decoding step by step equals the parallel forward, in every mode") {
  const int64_t batch = 2, T = 64;
  for (const Mode& mode : kModes) {
    CAPTURE(mode.name);
    const ModelConfig cfg = mamba_cfg(mode);
    Rng rng(7);
    MambaMixer m(cfg, rng);
    nudge(m, rng, 0.05f);
    const Tensor x = init_normal(Shape{batch, T, cfg.d_model}, rng, 0.f, 1.f);
    Tensor full;
    {
      NoGradGuard no_grad;
      full = m.forward(x);
    }
    auto st = m.new_state(batch);
    const int64_t bytes0 = st->bytes();
    CHECK(bytes0 == batch * m.state_bytes(1));
    double err = 0;
    for (int64_t t = 0; t < T; ++t) {
      const Tensor y = m.step(slice(x, 1, t, t + 1), *st);
      REQUIRE(y.shape() == Shape{batch, 1, cfg.d_model});
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < cfg.d_model; ++j)
          err = std::max(err, double(std::fabs(y.data()[b * cfg.d_model + j] -
                                               full.data()[(b * T + t) * cfg.d_model + j])));
    }
    err /= max_abs(full);
    MESSAGE(mode.name << ": max |step - forward| / max |forward| = " << err);
    CHECK(err <= 1e-5);
    CHECK(st->bytes() == bytes0);  // the state does not grow with T
    CHECK(m.state_bytes(T) == m.state_bytes(100000));
    CHECK(tape_size() == 0);  // steps record nothing
  }
}

TEST_CASE("Mamba: a decoding state computes A = -exp(A_log) once, and again when A_log changes") {
  const ModelConfig cfg = mamba_cfg(kModes[0]);
  Rng rng(11);
  MambaMixer m(cfg, rng);
  Tensor A_log;
  for (Parameter& p : m.parameters())
    if (p.name == "A_log") A_log = p.tensor;
  REQUIRE(A_log.defined());
  const Tensor x = init_normal(Shape{1, 3, cfg.d_model}, rng, 0.f, 1.f);
  auto state = m.new_state(1);
  auto& st = dynamic_cast<MambaState&>(*state);
  auto expected = [&] {
    NoGradGuard no_grad;
    return mul_scalar(exp(A_log), -1.f);
  };
  m.step(slice(x, 1, 0, 1), st);
  const auto* first = st.A.impl();
  CHECK(bit_equal(st.A, expected()));
  m.step(slice(x, 1, 1, 2), st);
  CHECK(st.A.impl() == first);  // reused, not recomputed
  for (int64_t i = 0; i < A_log.numel(); ++i) A_log.data()[i] += 0.25f;  // an in-place update
  A_log.bump_version();
  m.step(slice(x, 1, 2, 3), st);
  CHECK(bit_equal(st.A, expected()));  // follows the new parameters
}

TEST_CASE("Mamba: causal, in outputs and in gradients") {
  const int64_t T = 16, t0 = 9;
  for (const Mode& mode : kModes) {
    CAPTURE(mode.name);
    const ModelConfig cfg = mamba_cfg(mode);
    const int64_t Dm = cfg.d_model;
    Rng rng(11);
    MambaMixer m(cfg, rng);
    nudge(m, rng, 0.05f);
    Tensor x = init_normal(Shape{1, T, Dm}, rng, 0.f, 1.f);
    Tensor x2 = x.clone();  // the same past, another future
    for (int64_t i = (t0 + 1) * Dm; i < T * Dm; ++i) x2.data()[i] = float(rng.normal());
    Tensor y, y2;
    {
      NoGradGuard no_grad;
      y = m.forward(x);
      y2 = m.forward(x2);
    }
    int64_t same_past = 0, differ_future = 0;
    for (int64_t i = 0; i < T * Dm; ++i) {
      if (i < (t0 + 1) * Dm) same_past += y.data()[i] == y2.data()[i];
      else differ_future += y.data()[i] != y2.data()[i];
    }
    CHECK(same_past == (t0 + 1) * Dm);
    CHECK(differ_future > 0);

    x.requires_grad_();
    m.zero_grad();
    backward(sum(slice(m.forward(x), 1, t0, t0 + 1)));
    const Tensor gx = x.grad();
    REQUIRE(gx.defined());
    double past = 0, future = 0;
    for (int64_t i = 0; i < T * Dm; ++i)
      (i < (t0 + 1) * Dm ? past : future) += std::fabs(gx.data()[i]);
    CHECK(future == 0.0);
    CHECK(past > 0.0);
  }
}

TEST_CASE("Mamba: initialisation as mamba_ssm's") {
  ModelConfig cfg = mamba_cfg(kModes[0], 256);  // E = 512 channels: enough draws for the ranges
  Rng rng(3);
  MambaMixer m(cfg, rng);
  const int64_t E = m.d_inner, N = m.d_state, R = m.dt_rank;
  CHECK(E == 512);
  CHECK(N == 16);
  CHECK(R == 16);  // ceil(256 / 16)
  CHECK(m.d_conv == 4);

  // softplus(dt_proj.bias) is log-uniform in [1e-3, 1e-1]: inside, and reaching both ends.
  float lo = 1, hi = 0;
  for (float b : m.dt_proj_b.tolist()) {
    lo = std::min(lo, softplus_f(b));
    hi = std::max(hi, softplus_f(b));
  }
  CHECK(lo >= 1e-3f * (1 - 1e-5f));
  CHECK(hi <= 1e-1f * (1 + 1e-5f));
  CHECK(lo < 1.5e-3f);
  CHECK(hi > 7e-2f);
  // A = -exp(A_log) = -(n+1) in every channel; D = 1.
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < N; ++n)
      REQUIRE(std::exp(double(m.A_log.data()[e * N + n])) == doctest::Approx(n + 1).epsilon(1e-6));
  for (float d : m.D.tolist()) REQUIRE(d == 1.f);
  // Uniform inits fill their PyTorch bounds: dt_proj.weight +-R^-1/2, linears +-fan_in^-1/2.
  auto fills = [](const Tensor& w, double bound) {
    const double a = max_abs(w);
    return a <= bound && a > 0.95 * bound;
  };
  CHECK(fills(m.dt_proj_w, 1 / std::sqrt(double(R))));
  CHECK(fills(m.in_proj_w, 1 / std::sqrt(double(cfg.d_model))));
  CHECK(fills(m.x_proj_w, 1 / std::sqrt(double(E))));
  CHECK(fills(m.out_proj_w, 1 / std::sqrt(double(E))));
  CHECK(fills(m.conv_w, 1 / std::sqrt(double(m.d_conv))));
  CHECK(fills(m.conv_b, 1 / std::sqrt(double(m.d_conv))));

  // The time-invariant S4D-Real: the same dt range through dt_bias, B = 1, C ~ N(0, 1/N).
  cfg.options<MambaOptions>().ssm_selective = false;
  MambaMixer lti(cfg, rng);
  lo = 1, hi = 0;
  for (float b : lti.dt_bias.tolist()) {
    lo = std::min(lo, softplus_f(b));
    hi = std::max(hi, softplus_f(b));
  }
  CHECK(lo >= 1e-3f * (1 - 1e-5f));
  CHECK(hi <= 1e-1f * (1 + 1e-5f));
  for (float b : lti.B.tolist()) REQUIRE(b == 1.f);
  double s = 0, s2 = 0;
  for (float c : lti.C.tolist()) s += c, s2 += double(c) * c;
  const double cnt = double(E * N), mean = s / cnt, var = s2 / cnt - mean * mean;
  CHECK(std::fabs(mean) < 0.01);  // the std of the mean is 0.25 / sqrt(8192) = 0.003
  CHECK(var * N == doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("Mamba: the dense time-invariant modes' fixed A and discretisation") {
  const int64_t N = 16;
  // HiPPO-LegS (book §9.2) with HiPPO's B_n = sqrt(2n+1); dt log-spaced in [1e-3, 1e-1].
  Rng rng(5);
  MambaMixer hippo(mamba_cfg(kModes[2]), rng);
  const int64_t E = hippo.d_inner;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < N; ++k) {
      const double want = n > k ? -std::sqrt(double((2 * n + 1) * (2 * k + 1))) : n == k ? -(n + 1.0) : 0.0;
      REQUIRE(hippo.A_dense.data()[n * N + k] == doctest::Approx(want).epsilon(1e-6));
    }
  for (int64_t n = 0; n < N; ++n) CHECK(hippo.B.data()[n] == doctest::Approx(std::sqrt(2.0 * n + 1)));
  const float* dt = hippo.dt_fixed.data();
  CHECK(dt[0] == doctest::Approx(1e-3).epsilon(1e-6));
  CHECK(dt[E - 1] == doctest::Approx(1e-1).epsilon(1e-6));
  for (int64_t e = 1; e + 1 < E; ++e)  // log-spaced: a constant ratio
    REQUIRE(dt[e] / dt[e - 1] == doctest::Approx(dt[e + 1] / dt[e]).epsilon(1e-5));

  // S4D-Lin: each 2x2 block of the discretised A is the bilinear transform of one complex mode
  // lambda_m = -1/2 + i pi m, i.e. (1 + dt lambda/2) / (1 - dt lambda/2), written as [[a, -b], [b, a]];
  // everything off the blocks is zero (a complex diagonal SSM is a real block-diagonal one).
  MambaMixer lin(mamba_cfg(kModes[3]), rng);
  for (int64_t e : {int64_t(0), E / 2, E - 1}) {
    const double h = double(lin.dt_fixed.data()[e]);
    const float* Ad = lin.Ad.data() + e * N * N;
    for (int64_t m = 0; m < N / 2; ++m) {
      const std::complex<double> lambda(-0.5, std::numbers::pi * double(m));
      const std::complex<double> z = (1.0 + h * lambda / 2.0) / (1.0 - h * lambda / 2.0);
      const int64_t p = 2 * m, q = p + 1;
      CHECK(Ad[p * N + p] == doctest::Approx(z.real()).epsilon(1e-5));
      CHECK(Ad[q * N + q] == doctest::Approx(z.real()).epsilon(1e-5));
      CHECK(Ad[q * N + p] == doctest::Approx(z.imag()).epsilon(1e-4).scale(1e-2));
      CHECK(Ad[p * N + q] == doctest::Approx(-z.imag()).epsilon(1e-4).scale(1e-2));
    }
    double off = 0;
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < N; ++c)
        if (r / 2 != c / 2) off = std::max(off, double(std::fabs(Ad[r * N + c])));
    CHECK(off < 1e-6);
  }
  for (int64_t n = 0; n < N; ++n) CHECK(lin.B.data()[n] == (n % 2 == 0 ? 1.f : 0.f));
}

TEST_CASE("Mamba: parameter names, shapes and decay flags in each mode") {
  const int64_t Dm = 32, E = 64, N = 16, R = 2, K = 4;
  struct P {
    Shape shape;
    bool decay;
  };
  const std::map<std::string, P> common = {{"in_proj.weight", {{2 * E, Dm}, true}},
                                           {"conv1d.weight", {{E, 1, K}, true}},
                                           {"conv1d.bias", {{E}, false}},
                                           {"D", {{E}, false}},
                                           {"out_proj.weight", {{Dm, E}, true}}};
  const std::map<std::string, std::map<std::string, P>> extra = {
      {"selective",
       {{"x_proj.weight", {{R + 2 * N, E}, true}}, {"dt_proj.weight", {{E, R}, true}},
        {"dt_proj.bias", {{E}, false}}, {"A_log", {{E, N}, false}}}},
      {"lti s4d-real",
       {{"dt_bias", {{E}, false}}, {"B", {{E, N}, false}}, {"C", {{E, N}, true}},
        {"A_log", {{E, N}, false}}}},
      {"hippo-legs", {{"B", {{E, N}, false}}, {"C", {{E, N}, true}}}},
      {"s4d-lin", {{"B", {{E, N}, false}}, {"C", {{E, N}, true}}}}};
  for (const Mode& mode : kModes) {
    CAPTURE(mode.name);
    Rng rng(1);
    MambaMixer m(mamba_cfg(mode, Dm), rng);
    std::map<std::string, P> want = common;
    for (const auto& [name, p] : extra.at(mode.name)) want.insert({name, p});
    const std::vector<Parameter> params = m.parameters();
    CHECK(params.size() == want.size());
    for (const Parameter& p : params) {
      CAPTURE(p.name);
      REQUIRE(want.count(p.name) == 1);
      CHECK(p.tensor.shape() == want.at(p.name).shape);
      CHECK(p.decay == want.at(p.name).decay);
    }
    // mamba_ssm's order: in_proj, conv1d, (the SSM's inputs), D, out_proj.
    CHECK(params.front().name == "in_proj.weight");
    CHECK(params.back().name == "out_proj.weight");
  }
}

TEST_CASE("Mamba: configuration errors name the bad value and what is allowed") {
  auto message = [](const ModelConfig& cfg) {
    Rng rng(0);
    try {
      MambaMixer m(cfg, rng);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto contains = [](const std::string& s, const char* part) { return s.find(part) != std::string::npos; };
  ModelConfig cfg = mamba_cfg(kModes[0]);
  MambaOptions& o = cfg.options<MambaOptions>();
  o.a_init = "hippo-legs";  // with ssm_selective still on
  std::string msg = message(cfg);
  CHECK(contains(msg, "--a-init"));
  CHECK(contains(msg, "hippo-legs"));
  CHECK(contains(msg, "--ssm-selective"));
  o.a_init = "s4d-lin";
  msg = message(cfg);
  CHECK(contains(msg, "s4d-lin"));
  CHECK(contains(msg, "--ssm-selective"));
  o.a_init = "legt";
  msg = message(cfg);
  CHECK(contains(msg, "legt"));
  CHECK(contains(msg, "s4d-real"));
  cfg = mamba_cfg(kModes[3]);
  cfg.options<MambaOptions>().d_state = 15;
  msg = message(cfg);
  CHECK(contains(msg, "--d-state"));
  CHECK(contains(msg, "15"));
  cfg = mamba_cfg(kModes[0]);
  cfg.options<MambaOptions>().d_conv = 0;
  CHECK(contains(message(cfg), "--d-conv 0 is out of range (allowed: 1..64)"));
  cfg = mamba_cfg(kModes[0]);
  cfg.options<MambaOptions>().dt_rank = -1;
  CHECK(contains(message(cfg), "--dt-rank -1 is out of range (allowed: 1..65536, or 0 for ceil(d-model/16))"));
  CHECK(message(mamba_cfg(kModes[2])).empty());  // hippo-legs without selection is fine
  CHECK(contains(message(ModelConfig::of("attention")), "not of the kind asked for"));  // another family's options

  Rng rng(0);
  MambaMixer m(mamba_cfg(kModes[0]), rng);
  CHECK_THROWS_AS(m.forward(Tensor::zeros(Shape{2, 5, 16})), Error);
  auto st = m.new_state(2);
  CHECK_THROWS_AS(m.step(Tensor::zeros(Shape{2, 2, 32}), *st), Error);
}
