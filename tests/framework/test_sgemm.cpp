// sgemm on every backend of the build, every transpose combination, against a double-precision loop: across
// the size where the oneDNN path copies B^T first (runtime.cpp, kTransposeMinK = 512), with
// sizes that are not multiples of the 16 x 16 transpose blocks and leading dimensions larger
// than the matrices.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/runtime/gemm_amx.hpp"
#include "framework/runtime/gemm_bf16.hpp"
#include "framework/runtime/gemm_mkl.hpp"
#include "framework/runtime/runtime.hpp"

using namespace tri;

namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k, pad;  // pad: extra columns in every leading dimension
};

// The GEMM under test, called as sgemm is (alpha 1).
using Gemm = std::function<void(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                const float* b, int64_t ldb, float beta, float* c, int64_t ldc)>;

// Largest |C - C_exact| / (k u sum |a b|), u = 2^-24: at most about 1 for any summation order
// (the classic gamma_k bound on a float dot product of length k), far above 1 for a wrong entry.
// C_exact is the double product of the inputs as `input` rounds them (bf16: to bfloat16).
double error_in_bounds(const Gemm& gemm, const Case& c, float beta, double (*input)(float) = [](float x) {
  return double(x);
}) {
  const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;  // stored shapes
  const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
  Rng rng(uint64_t(c.m * 131 + c.n * 17 + c.k));
  std::vector<float> a(size_t(ar * lda)), b(size_t(br * ldb)), out(size_t(c.m * ldc));
  for (float& x : a) x = float(2 * rng.uniform() - 1);
  for (float& x : b) x = float(2 * rng.uniform() - 1);
  for (float& x : out) x = float(2 * rng.uniform() - 1);
  const std::vector<float> c0 = out;
  gemm(c.ta, c.tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
  auto at = [&](int64_t i, int64_t p) { return input(c.ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)]); };
  auto bt = [&](int64_t p, int64_t j) { return input(c.tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)]); };
  double worst = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double exact = beta * double(c0[size_t(i * ldc + j)]), scale = std::fabs(exact);
      for (int64_t p = 0; p < c.k; ++p) {
        exact += at(i, p) * bt(p, j);
        scale += std::fabs(at(i, p) * bt(p, j));
      }
      const double bound = double(c.k + 1) * std::ldexp(1.0, -24) * scale;
      worst = std::max(worst, std::fabs(double(out[size_t(i * ldc + j)]) - exact) / bound);
    }
  // The padding between rows of C is never written.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldc; ++j)
      if (out[size_t(i * ldc + j)] != c0[size_t(i * ldc + j)]) return 1e30;
  return worst;
}

}  // namespace

TEST_CASE("sgemm: both backends, every transpose, across the B^T copy threshold") {
  std::vector<GemmBackend> backends = {GemmBackend::dnnl, GemmBackend::openblas};
  if (mkl::built_in()) backends.push_back(GemmBackend::mkl);
  for (const GemmBackend be : backends)
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const int64_t k : {int64_t(100), int64_t(511), int64_t(512), int64_t(777)})
          for (const int64_t pad : {int64_t(0), int64_t(3)})
            for (const float beta : {0.f, 1.f}) {
              const Case c{ta, tb, 37, 21, k, pad};
              CAPTURE(int(be));
              CAPTURE(ta);
              CAPTURE(tb);
              CAPTURE(k);
              CAPTURE(pad);
              CAPTURE(beta);
              const Gemm gemm = [be](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
                sgemm_on(be, ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
              };
              CHECK(error_in_bounds(gemm, c, beta) <= 1.0);
            }
}

TEST_CASE("sgemm under --precision bf16: float32 sums of the bf16-rounded inputs, every transpose, beta 0 and 1") {
  const std::string missing = bf16_unavailable_reason();
  if (!missing.empty()) {  // nothing to run it on: test_gemm_bf16 checks the refusal this CPU gets
    MESSAGE("this CPU lacks " << missing << ": the bf16 GEMM was not run here");
    return;
  }
  const Gemm routed = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    set_gemm_precision(Precision::bf16);
    sgemm(ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
    set_gemm_precision(Precision::fp32);
  };
  // Both kernels, whichever sgemm routes to here: AMX tiles, and oneDNN's (the one without AMX).
  std::vector<std::pair<std::string, Gemm>> kernels = {{"sgemm", routed}, {"onednn", gemm_bf16_onednn}};
  if (amx_usable())
    kernels.push_back({"amx", [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
                         gemm_amx(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
                       }});
  const Case cases[] = {{false, false, 37, 29, 53, 0}, {false, true, 64, 48, 130, 3},  {true, false, 33, 70, 64, 5},
                        {true, true, 17, 19, 600, 2},   {false, true, 256, 386, 64, 0}, {true, false, 386, 64, 512, 1}};
  for (const auto& [name, gemm] : kernels)
    for (const Case& c : cases)
      for (float beta : {0.f, 1.f}) {
        CAPTURE(name);
        CAPTURE(c.ta);
        CAPTURE(c.tb);
        CAPTURE(c.k);
        CAPTURE(beta);
        // bf16 products are exact in float32, so only the float32 sums round: within the bound, 2
        // for the order of the kernels' blocks and pairs.
        CHECK(error_in_bounds(gemm, c, beta, [](float x) { return double(bf16_value(bf16_bits(x))); }) <= 2.0);
      }
}

TEST_CASE("bf16 GEMM inside a parallel region: each thread's call is its own, at a size that splits") {
  if (!bf16_unavailable_reason().empty()) {
    MESSAGE("this CPU lacks bf16: not run here");
    return;
  }
  // One GEMM per thread, as per-head loops call it, with A transposed (its packing is shared out
  // too): one too small to split (it must not share itself over the caller's threads, or each
  // thread computes part of its own C), one that would split were it alone.
  const Case cases[] = {{true, false, 96, 48, 128, 1}, {true, false, 256, 96, 512, 1}};
  const Gemm routed = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* out, int64_t ldc) {
    sgemm(ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, out, ldc);
  };
  set_gemm_precision(Precision::bf16);
  double worst[4] = {};
#pragma omp parallel for num_threads(2) schedule(static)
  for (int i = 0; i < 4; ++i)
    worst[i] = error_in_bounds(routed, cases[i % 2], 0.f, [](float x) { return double(bf16_value(bf16_bits(x))); });
  set_gemm_precision(Precision::fp32);
  for (double w : worst) CHECK(w <= 2.0);  // the bound of the test above
}

TEST_CASE("sgemm_add: a linear layer's bias and residual, bit for bit as filling C, summing at beta 1, adding") {
  std::vector<Precision> precisions = {Precision::fp32};
  if (bf16_unavailable_reason().empty()) precisions.push_back(Precision::bf16);
  struct Shape3 {
    bool tb;
    int64_t m, n, k;
  };
  // Edges in both directions (37 x 29), full blocks, and a width that is not a multiple of 32.
  const Shape3 shapes[] = {{true, 37, 29, 53}, {false, 64, 48, 130}, {true, 256, 386, 64}, {true, 300, 128, 128}};
  for (const Precision p : precisions)
    for (const Shape3& s : shapes)
      for (const int with : {0, 1, 2, 3}) {  // bit 0: bias, bit 1: residual
        CAPTURE(precision_name(p));
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(s.k);
        CAPTURE(with);
        Rng rng(uint64_t(s.m * 7 + s.n * 3 + s.k + with));
        auto filled = [&](int64_t count) {
          std::vector<float> v(static_cast<size_t>(count));
          for (float& x : v) x = float(2 * rng.uniform() - 1);
          return v;
        };
        const std::vector<float> a = filled(s.m * s.k), b = filled(s.k * s.n), bias = filled(s.n),
                                 residual = filled(s.m * s.n);
        const float* bias_p = (with & 1) ? bias.data() : nullptr;
        const float* residual_p = (with & 2) ? residual.data() : nullptr;
        const int64_t ldb = s.tb ? s.k : s.n;
        set_gemm_precision(p);
        std::vector<float> expected(size_t(s.m * s.n), 0.f), got(size_t(s.m * s.n), 7.f);
        if (bias_p)
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) expected[size_t(i * s.n + j)] = bias[size_t(j)];
        sgemm(false, s.tb, s.m, s.n, s.k, 1.f, a.data(), s.k, b.data(), ldb, bias_p ? 1.f : 0.f, expected.data(), s.n);
        if (residual_p)
          for (size_t i = 0; i < expected.size(); ++i) expected[i] = residual[i] + expected[i];
        sgemm_add(s.tb, s.m, s.n, s.k, a.data(), s.k, b.data(), ldb, bias_p, residual_p, got.data());
        set_gemm_precision(Precision::fp32);
        CHECK(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
        if (p == Precision::bf16 && amx_usable()) {  // the kernel's own epilogue, called directly
          std::vector<float> direct(size_t(s.m * s.n), 7.f);
          gemm_amx(false, s.tb, s.m, s.n, s.k, a.data(), s.k, b.data(), ldb, 0.f, direct.data(), s.n,
                   GemmAdd{bias_p, residual_p});
          CHECK(std::memcmp(direct.data(), expected.data(), direct.size() * sizeof(float)) == 0);
        }
      }
}
