// framework/simd/vec_math.hpp against double-precision libm over dense grids: the maximum error in
// units in the last place (ulp) of the float result. The bounds are the measured maxima
// rounded up with a margin for hosts without FMA contraction (another rounding per step).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>

#include "framework/simd/vec_math.hpp"

using namespace tri;

namespace {

// The spacing of floats at |r| (the smallest denormal below the normal range).
double ulp_at(double r) {
  r = std::fabs(r);
  if (r < 0x1p-126) return 0x1p-149;
  int e;
  std::frexp(r, &e);
  return std::ldexp(1.0, e - 24);
}

// Max error in ulp of f against ref over `points` floats evenly spaced in bit pattern between
// lo and hi (same sign), so every binade is sampled alike.
double max_ulp(const std::function<float(float)>& f, const std::function<double(double)>& ref,
               float lo, float hi, int64_t points = 1 << 21) {
  const int64_t b0 = std::bit_cast<uint32_t>(lo), b1 = std::bit_cast<uint32_t>(hi);
  const int64_t n = b1 > b0 ? b1 - b0 : b0 - b1, step = std::max<int64_t>(1, n / points);
  double worst = 0;
  for (int64_t i = 0; i <= n; i += step) {
    const float x = std::bit_cast<float>(uint32_t(b1 > b0 ? b0 + i : b0 - i));
    const double r = ref(double(x)), y = f(x);
    worst = std::max(worst, std::fabs(y - r) / ulp_at(r));
  }
  return worst;
}

}  // namespace

TEST_CASE("erf_approx: within 2 ulp of erf everywhere, odd, NaN stays NaN") {
  auto f = [](float x) { return erf_approx(x); };
  auto ref = [](double x) { return std::erf(x); };
  const double pos = max_ulp(f, ref, 1e-30f, 10.f), neg = max_ulp(f, ref, -1e-30f, -10.f);
  std::printf("erf_approx: %.3f / %.3f ulp (x > 0 / x < 0)\n", pos, neg);
  CHECK(pos < 2.0);  // measured 1.20
  CHECK(neg < 2.0);
  CHECK(erf_approx(0.f) == 0.f);
  CHECK(erf_approx(INFINITY) == 1.f);
  CHECK(erf_approx(-INFINITY) == -1.f);
  CHECK(std::isnan(erf_approx(NAN)));
}

TEST_CASE("expm1_approx: within 2 ulp of expm1, also near 0 where exp(x) - 1 cancels") {
  auto f = [](float x) { return expm1_approx(x); };
  auto ref = [](double x) { return std::expm1(x); };
  const double neg = max_ulp(f, ref, -1e-30f, -88.f), pos = max_ulp(f, ref, 1e-30f, 88.f);
  std::printf("expm1_approx: %.3f / %.3f ulp (x < 0 / x > 0)\n", neg, pos);
  CHECK(neg < 2.0);  // measured 1.18
  CHECK(pos < 2.0);
  CHECK(expm1_approx(-200.f) == -1.f);
  CHECK(std::isnan(expm1_approx(NAN)));
}

TEST_CASE("tanh_approx: within 3 ulp of tanh") {
  auto f = [](float x) { return tanh_approx(x); };
  auto ref = [](double x) { return std::tanh(x); };
  const double pos = max_ulp(f, ref, 1e-30f, 20.f), neg = max_ulp(f, ref, -1e-30f, -20.f);
  std::printf("tanh_approx: %.3f / %.3f ulp\n", pos, neg);
  CHECK(pos < 3.0);
  CHECK(neg < 3.0);
  CHECK(tanh_approx(100.f) == 1.f);
  CHECK(std::isnan(tanh_approx(NAN)));
}

TEST_CASE("exp_full: within 2 ulp of exp over the whole range, inf and 0 at the ends") {
  auto f = [](float x) { return exp_full(x); };
  auto ref = [](double x) { return std::exp(x); };
  const double hi = max_ulp(f, ref, 1e-30f, 88.7f), lo = max_ulp(f, ref, -1e-30f, -103.f);
  std::printf("exp_full: %.3f / %.3f ulp (x > 0 / x < 0, denormals included)\n", hi, lo);
  CHECK(hi < 2.0);
  CHECK(lo < 2.0);
  CHECK(exp_full(89.f) == INFINITY);
  CHECK(exp_full(-104.f) == 0.f);
  CHECK(std::isnan(exp_full(NAN)));
}
