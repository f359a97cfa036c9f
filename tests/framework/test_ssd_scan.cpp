// The SSD scan (framework/kernels/ssd_scan.hpp): the fused kernel against its naive reference
// (forward and every gradient, one group and several, with and without D), finite differences,
// the scan against Mamba's selective scan where the two coincide (one head per channel), the
// recurrent step against the parallel forward, causality, determinism and shape errors; the
// backward in chunks against the recurrent backward.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/kernels/selective_scan.hpp"
#include "framework/kernels/ssd_scan.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"
#include "tests/compare.hpp"

using namespace tri;
using namespace trilemma_test;
using gradcheck::param;

namespace {

// One problem's leaves: x [B, T, H, P], dt in (0.01, 0.5), A in (-2, -0.2), B and C [B, T, G, N],
// D [H] or none.
struct Problem {
  int64_t B, T, H, P, G, N;
  bool with_D;
  Tensor x, dt, A, Bm, Cm, D;
  Problem(int64_t B_, int64_t T_, int64_t H_, int64_t P_, int64_t G_, int64_t N_, bool with_D_, uint64_t seed)
      : B(B_), T(T_), H(H_), P(P_), G(G_), N(N_), with_D(with_D_) {
    x = param({B, T, H, P}, seed + 1);
    dt = param({B, T, H}, seed + 2, 0.01f, 0.5f);
    A = param({H}, seed + 3, -2.f, -0.2f);
    Bm = param({B, T, G, N}, seed + 4);
    Cm = param({B, T, G, N}, seed + 5);
    if (with_D) D = param({H}, seed + 6, 0.5f, 1.5f);
  }
  std::vector<Tensor> leaves() const {
    return with_D ? std::vector<Tensor>{x, dt, A, Bm, Cm, D} : std::vector<Tensor>{x, dt, A, Bm, Cm};
  }
};

using Kernel = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&);

struct Result {
  Tensor out;
  std::vector<Tensor> grads;
};

// The output and the gradients of sum(out * w) w.r.t. every leaf.
Result forward_backward(const Problem& p, Kernel kernel, const Tensor& w) {
  for (const Tensor& t : p.leaves()) t.impl()->grad.reset();
  Result r;
  r.out = kernel(p.x, p.dt, p.A, p.Bm, p.Cm, p.D);
  backward(sum(mul(r.out, w)));
  for (const Tensor& t : p.leaves()) r.grads.push_back(t.grad().clone());
  return r;
}

const char* kLeafNames[] = {"x", "dt", "A", "B", "C", "D"};

// Checks every gradient of `got` against `want` (relative RMS error under tol); returns the worst.
double check_grads(const Result& got, const Result& want, double tol) {
  double worst = 0;
  for (size_t i = 0; i < want.grads.size(); ++i) {
    INFO("gradient of " << kLeafNames[i]);
    CHECK(rms_err(got.grads[i], want.grads[i]) < tol);
    worst = std::max(worst, rms_err(got.grads[i], want.grads[i]));
  }
  return worst;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(float) * size_t(a.numel())) == 0;
}

}  // namespace

TEST_CASE("ssd_scan: fused matches the naive reference, forward and every gradient") {
  // N = 20 pads the state's rows; T = 80 spans three of the backward's checkpointed chunks; G = 2
  // shares B and C between two heads each. N = 16, 32 and 64 run the forward's register tiles
  // (at N 64 one tile of 4 rows, then 2 rows alone).
  struct Size {
    int64_t B, T, H, P, G, N;
  };
  for (const Size& s : {Size{2, 37, 4, 6, 2, 20}, Size{1, 1, 2, 3, 1, 5}, Size{1, 80, 2, 8, 1, 16}, Size{2, 33, 3, 4, 3, 32},
                         Size{2, 40, 2, 6, 1, 64}})
    for (bool with_D : {true, false}) {
      CAPTURE(s.T);
      CAPTURE(s.G);
      CAPTURE(with_D);
      Problem p(s.B, s.T, s.H, s.P, s.G, s.N, with_D, 10 * s.T + with_D);
      Tensor w = gradcheck::uniform({s.B, s.T, s.H, s.P}, 7);
      Result f = forward_backward(p, ssd_scan, w), n = forward_backward(p, ssd_scan_naive, w);
      CHECK(scaled_err(f.out, n.out) < 1e-5);
      double worst = 0;
      for (size_t i = 0; i < f.grads.size(); ++i) {
        INFO("gradient of " << kLeafNames[i]);
        CHECK(scaled_err(f.grads[i], n.grads[i]) < 1e-5);
        worst = std::max(worst, scaled_err(f.grads[i], n.grads[i]));
      }
      std::printf("ssd_scan fused vs naive, T %3lld G %lld %-6s: output %.1e, gradients %.1e\n", (long long)s.T,
                  (long long)s.G, with_D ? "D" : "no D", scaled_err(f.out, n.out), worst);
    }
}

// The chunked form with chunks of 16 (several per sequence at these T).
Tensor ssd_scan_chunked16(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                          const Tensor& D) {
  return ssd_scan_chunked(x, dt, A, Bm, Cm, D, 16);
}
Tensor ssd_scan_chunked64(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                          const Tensor& D) {
  return ssd_scan_chunked(x, dt, A, Bm, Cm, D);
}

TEST_CASE("ssd_scan: the chunked form equals the fused recurrence to float32 rounding, with its gradients") {
  // T 37 and 150 end in a partial chunk (padded); G 2 shares B and C between heads. Tolerance: RMS
  // error 1e-5 of the reference's RMS: A's gradient sums 10^5 terms per head in another order
  // (measured up to 2e-6), while a wrong term is off by 1e-2 or more.
  struct Case {
    int64_t B, T, H, P, G, N;
    Kernel chunked;
  };
  for (const Case& s : {Case{2, 37, 4, 6, 2, 20, ssd_scan_chunked16}, Case{1, 150, 2, 8, 1, 16, ssd_scan_chunked16},
                        Case{2, 150, 2, 16, 1, 32, ssd_scan_chunked64}})
    for (bool with_D : {true, false}) {
      CAPTURE(s.T);
      CAPTURE(with_D);
      Problem p(s.B, s.T, s.H, s.P, s.G, s.N, with_D, 50 + s.T + with_D);
      Tensor w = gradcheck::uniform({s.B, s.T, s.H, s.P}, 51);
      Result f = forward_backward(p, ssd_scan, w), c = forward_backward(p, s.chunked, w);
      CHECK(rms_err(c.out, f.out) < 1e-5);
      const double worst = check_grads(c, f, 1e-5);
      std::printf("ssd_scan chunked vs fused, T %3lld G %lld %-6s: output %.1e, gradients %.1e (RMS, relative)\n",
                  (long long)s.T, (long long)s.G, with_D ? "D" : "no D", rms_err(c.out, f.out), worst);
    }
}

TEST_CASE("ssd_scan: the backward in chunks equals the recurrent backward to float32 rounding") {
  // The fused kernel's backward runs in chunks of 32 steps (ssd_scan_chunks.cpp) when P and N fill
  // whole vectors; RecurrentSsdBackward forces the recurrence. T 80 and 33 end in a partial chunk,
  // T 31 and 1 are one; G 2 with 4 heads shares B and C (a group's heads run together); P 48.
  // Tolerance as the chunked form's above: RMS error 1e-5 of the
  // reference's RMS (the sums run in another order; a wrong term is off by 1e-2 or more).
  struct Size {
    int64_t B, T, H, P, G, N;
  };
  for (const Size& s : {Size{2, 80, 2, 16, 1, 16}, Size{1, 31, 4, 32, 2, 32}, Size{2, 33, 2, 16, 2, 64},
                        Size{1, 1, 2, 16, 1, 16}, Size{2, 64, 3, 48, 1, 32}})
    for (bool with_D : {true, false}) {
      CAPTURE(s.T);
      CAPTURE(s.P);
      CAPTURE(with_D);
      Problem p(s.B, s.T, s.H, s.P, s.G, s.N, with_D, 70 + s.T + with_D);
      Tensor w = gradcheck::uniform({s.B, s.T, s.H, s.P}, 71);
      Result chunks = forward_backward(p, ssd_scan, w), steps;
      {
        RecurrentSsdBackward recurrent;
        steps = forward_backward(p, ssd_scan, w);
      }
      CHECK(same_bits(chunks.out, steps.out));  // the forward is the recurrence either way
      const double worst = check_grads(chunks, steps, 1e-5);
      std::printf("ssd_scan backward in chunks vs recurrent, T %3lld P %lld %-6s: gradients %.1e (RMS, relative)\n",
                  (long long)s.T, (long long)s.P, with_D ? "D" : "no D", worst);
    }
  // A strong decay (dt A = -40 a step): the chunk's products of decays underflow to 0, not NaN.
  Problem p(1, 70, 2, 16, 1, 16, true, 75);
  p.dt = param({1, 70, 2}, 76, 19.f, 21.f);
  p.A = Tensor::full({2}, -2.f);
  p.A.requires_grad_();
  Tensor w = gradcheck::uniform({1, 70, 2, 16}, 77);
  Result chunks = forward_backward(p, ssd_scan, w), steps;
  {
    RecurrentSsdBackward recurrent;
    steps = forward_backward(p, ssd_scan, w);
  }
  for (const Tensor& g : chunks.grads) CHECK(g.all_finite());
  check_grads(chunks, steps, 1e-5);
}

TEST_CASE("ssd_scan: the chunked form stays finite under a strong decay") {
  // dt A = -40 per step: exp(L_t - L_i) above the diagonal would be exp(40 * 63), past float32.
  NoGradGuard no_grad;
  Problem p(1, 64, 2, 4, 1, 8, true, 61);
  p.dt = Tensor::full({1, 64, 2}, 20.f);
  p.A = Tensor::full({2}, -2.f);
  const Tensor f = ssd_scan(p.x, p.dt, p.A, p.Bm, p.Cm, p.D), c = ssd_scan_chunked(p.x, p.dt, p.A, p.Bm, p.Cm, p.D);
  for (int64_t i = 0; i < c.numel(); ++i) REQUIRE(std::isfinite(c.data()[i]));
  CHECK(rms_err(c, f) < 1e-5);
}

TEST_CASE("ssd_scan: gradients match finite differences") {
  for (Kernel kernel : {Kernel(ssd_scan), Kernel(ssd_scan_naive)})
    for (int64_t G : {1, 2}) {
      CAPTURE(G);
      const Shape sx{2, 7, 2, 3}, sdt{2, 7, 2}, sbc{2, 7, G, 4};
      std::vector<Tensor> in = {param(sx, 1), param(sdt, 2, 0.05f, 0.6f), param({2}, 3, -1.5f, -0.3f),
                                param(sbc, 4), param(sbc, 5), param({2}, 6, 0.5f, 1.5f)};
      auto f = [kernel](const std::vector<Tensor>& a) { return kernel(a[0], a[1], a[2], a[3], a[4], a[5]); };
      gradcheck::Result r = gradcheck::check(f, in);
      INFO(r.summary());
      CHECK(r.ok());
    }
  // P and N of 16 and T 35 (two chunks, the second partial): the backward in chunks.
  const Shape sx{1, 35, 1, 16}, sdt{1, 35, 1}, sbc{1, 35, 1, 16};
  std::vector<Tensor> in = {param(sx, 11), param(sdt, 12, 0.05f, 0.6f), param({1}, 13, -1.5f, -0.3f),
                            param(sbc, 14), param(sbc, 15), param({1}, 16, 0.5f, 1.5f)};
  gradcheck::Result r = gradcheck::check(
      [](const std::vector<Tensor>& a) { return ssd_scan(a[0], a[1], a[2], a[3], a[4], a[5]); }, in);
  INFO(r.summary());
  CHECK(r.ok());
}

TEST_CASE("ssd_scan: one head per channel with N-wide B, C is Mamba's selective scan with A constant over N") {
  // P = 1: each head is one channel e with A_e n = A_h for every n, and all heads share B, C (G = 1).
  const int64_t B = 2, T = 45, E = 5, N = 7;
  Problem p(B, T, E, 1, 1, N, true, 61);
  Tensor A_full = Tensor::empty({E, N});
  for (int64_t e = 0; e < E; ++e)
    for (int64_t n = 0; n < N; ++n) A_full.data()[e * N + n] = p.A.data()[e];
  NoGradGuard no_grad;
  const Tensor ssd = ssd_scan(p.x, p.dt, p.A, p.Bm, p.Cm, p.D);
  const Tensor sel = selective_scan(reshape(p.x, {B, T, E}), p.dt, A_full, reshape(p.Bm, {B, T, N}),
                                    reshape(p.Cm, {B, T, N}), p.D, Tensor(), Tensor(), false);
  const double err = scaled_err(reshape(ssd, {B, T, E}), sel);
  std::printf("ssd_scan vs selective_scan, one channel per head: %.1e\n", err);
  CHECK(err < 1e-5);
}

TEST_CASE("ssd_scan: stepping token by token equals the parallel forward, bit for bit") {
  // N = 20 steps through a padded copy of the state, N 16, 32 and 64 in place; the forward runs
  // row by row at N 20 and in register tiles of 16 / N rows otherwise (their sums folded
  // together), then the rows left one at a time.
  const int64_t B = 2, T = 70, H = 4;
  struct Size {
    int64_t G, N, P;
  };
  for (const Size& z : {Size{2, 20, 6}, Size{1, 32, 6}, Size{1, 32, 9}, Size{2, 64, 6}, Size{1, 16, 18}})
    for (bool with_D : {true, false}) {
      const int64_t G = z.G, N = z.N, P = z.P;
      CAPTURE(N);
      CAPTURE(P);
      CAPTURE(with_D);
      NoGradGuard no_grad;
      const Problem p(B, T, H, P, G, N, with_D, 31);
      const Tensor full = ssd_scan(p.x, p.dt, p.A, p.Bm, p.Cm, p.D);
      Tensor S = Tensor::zeros({B, H, P, N});
      // Token t of every batch row, as [B, 1, ...].
      auto token = [&](const Tensor& x, int64_t t) {
        std::vector<Tensor> rows;
        Shape one = x.shape();
        one.d[0] = 1;
        one.d[1] = 1;
        for (int64_t b = 0; b < B; ++b) rows.push_back(reshape(slice(x.narrow0(b, 1), 1, t, t + 1), one));
        return concat(rows, 0);
      };
      std::vector<Tensor> outs;
      for (int64_t t = 0; t < T; ++t)
        outs.push_back(ssd_scan_step(token(p.x, t), token(p.dt, t), p.A, token(p.Bm, t), token(p.Cm, t), p.D, S));
      CHECK(same_bits(concat(outs, 1), full));
    }
}

TEST_CASE("ssd_scan: output t has exactly zero gradient w.r.t. inputs after t") {
  const int64_t B = 2, T = 90, H = 2, P = 4, t0 = 70;
  Problem p(B, T, H, P, 1, 8, true, 41);
  Tensor w = gradcheck::uniform({B, T, H, P}, 42);
  for (int64_t i = 0; i < w.numel(); ++i)
    if ((i / (H * P)) % T != t0) w.data()[i] = 0.f;  // only output t0 reaches the loss
  const Result r = forward_backward(p, ssd_scan, w);
  for (size_t i : {0, 1, 3, 4}) {  // the leaves with a time axis
    INFO("gradient of " << kLeafNames[i]);
    const Tensor& g = r.grads[i];
    const int64_t per_t = g.numel() / (B * T);
    double after = 0, at_or_before = 0;
    for (int64_t j = 0; j < g.numel(); ++j) ((j / per_t) % T > t0 ? after : at_or_before) += std::fabs(g.data()[j]);
    CHECK(after == 0);
    CHECK(at_or_before > 0);
  }
}

TEST_CASE("ssd_scan: results repeat bit for bit, at any thread count") {
  // B G = 2 (batch 1): at 1 thread a thread takes a group's heads in turn and adds each into dB
  // and dC; at 2 threads the heads run apart into their own buffers. B G = 4 (batch 2): in turn
  // at both.
  // P 16 with N 16: the backward in chunks, alike.
  for (const int64_t P : {6, 16})
  for (const int64_t batch : {2, 1}) {
    CAPTURE(batch);
    CAPTURE(P);
    Problem p(batch, 80, 4, P, 2, P == 6 ? 20 : 16, true, 51);
    Tensor w = gradcheck::uniform({batch, 80, 4, P}, 52);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Result one = forward_backward(p, ssd_scan, w);
    omp_set_num_threads(std::max(2, threads));
    const Result two = forward_backward(p, ssd_scan, w), again = forward_backward(p, ssd_scan, w);
    omp_set_num_threads(threads);
    for (const Result* r : {&two, &again}) {
      CHECK(same_bits(r->out, one.out));
      for (size_t i = 0; i < one.grads.size(); ++i) CHECK(same_bits(r->grads[i], one.grads[i]));
    }
  }
}

TEST_CASE("ssd_scan: bad shapes are errors naming the argument") {
  Tensor x = Tensor::zeros({2, 5, 4, 3}), dt = Tensor::zeros({2, 5, 4}), A = Tensor::zeros({4});
  Tensor bc = Tensor::zeros({2, 5, 2, 6});
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { ssd_scan(x, Tensor::zeros({2, 5, 3}), A, bc, bc); }).find("dt [2, 5, 3]") != std::string::npos);
  CHECK(message([&] { ssd_scan(x, dt, Tensor::zeros({3}), bc, bc); }).find("A [3]") != std::string::npos);
  CHECK(message([&] { ssd_scan(x, dt, A, Tensor::zeros({2, 5, 3, 6}), bc); }).find("B [2, 5, 3, 6]") != std::string::npos);
  CHECK(message([&] { ssd_scan(x, dt, A, bc, Tensor::zeros({2, 5, 2, 5})); }).find("C [2, 5, 2, 5]") != std::string::npos);
  CHECK(message([&] { ssd_scan(x, dt, A, bc, bc, Tensor::zeros({2})); }).find("D [2]") != std::string::npos);
  CHECK(message([&] { ssd_scan_naive(reshape(x, {10, 4, 3}), dt, A, bc, bc); }).find("[B, T, H, P]") != std::string::npos);
  Tensor S = Tensor::zeros({2, 4, 3, 6});
  CHECK(message([&] { ssd_scan_step(x, dt, A, bc, bc, Tensor(), S); }).find("T = 5") != std::string::npos);
  Tensor x1 = Tensor::zeros({2, 1, 4, 3}), dt1 = Tensor::zeros({2, 1, 4}), bc1 = Tensor::zeros({2, 1, 2, 6});
  Tensor bad = Tensor::zeros({2, 4, 6, 3});
  CHECK(message([&] { ssd_scan_step(x1, dt1, A, bc1, bc1, Tensor(), bad); }).find("state [2, 4, 6, 3]") !=
        std::string::npos);
}
