// sgemm on every backend of the build, every transpose combination, against a double-precision loop: across
// the size where the oneDNN path copies B^T first (runtime.cpp, kTransposeMinK = 512), with
// sizes that are not multiples of the 16 x 16 transpose blocks and leading dimensions larger
// than the matrices.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/runtime/gemm_mkl.hpp"
#include "framework/runtime/runtime.hpp"

using namespace tri;

namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k, pad;  // pad: extra columns in every leading dimension
};

// Largest |C - C_exact| / (k u sum |a b|), u = 2^-24: at most about 1 for any summation order
// (the classic gamma_k bound on a float dot product of length k), far above 1 for a wrong entry.
double error_in_bounds(GemmBackend be, const Case& c, float beta) {
  const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;  // stored shapes
  const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
  Rng rng(uint64_t(c.m * 131 + c.n * 17 + c.k));
  std::vector<float> a(size_t(ar * lda)), b(size_t(br * ldb)), out(size_t(c.m * ldc));
  for (float& x : a) x = float(2 * rng.uniform() - 1);
  for (float& x : b) x = float(2 * rng.uniform() - 1);
  for (float& x : out) x = float(2 * rng.uniform() - 1);
  const std::vector<float> c0 = out;
  sgemm_on(be, c.ta, c.tb, c.m, c.n, c.k, 1.f, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
  auto at = [&](int64_t i, int64_t p) { return double(c.ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)]); };
  auto bt = [&](int64_t p, int64_t j) { return double(c.tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)]); };
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
              CHECK(error_in_bounds(be, c, beta) <= 1.0);
            }
}
