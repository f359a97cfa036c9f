// --precision bf16's GEMM: bfloat16 rounding against its definition, inputs that bf16 rounds
// (the GEMM against a double loop over rounded inputs is test_sgemm's), and the refusal on a CPU
// without native bf16 (forced with TRILEMMA_CPU_NO_BF16=1). On such a CPU the GEMM cannot run:
// the refusal is checked instead.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "framework/base/error.hpp"
#include "framework/core/rng.hpp"
#include "framework/runtime/gemm_bf16.hpp"
#include "framework/runtime/runtime.hpp"

using namespace tri;

namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

TEST_CASE("bf16 rounding: to nearest, ties to even, NaN and infinity kept") {
  Rng rng(7);
  for (int i = 0; i < 100000; ++i) {
    const float x = float((2 * rng.uniform() - 1) * std::ldexp(1.0, int(rng.uniform() * 60) - 30));
    const float r = bf16_value(bf16_bits(x));
    // The nearest of the two bf16 neighbours (x with its low 16 bits cleared, and one ulp up).
    const float lo = float_of(bits_of(x) & 0xffff0000u), hi = float_of((bits_of(x) & 0xffff0000u) + 0x10000u);
    const double dl = std::fabs(double(x) - double(lo)), dh = std::fabs(double(x) - double(hi));
    CHECK(double(std::fabs(x - r)) == std::min(dl, dh));
    if (dl == dh) CHECK((bits_of(r) >> 16) % 2 == 0);  // a tie goes to the even one
  }
  // Exact ties, made from representable bf16 values and half an ulp.
  for (uint32_t hi16 : {0x3f80u, 0x3f81u, 0xbf82u, 0x4049u}) {
    const float tie = float_of((hi16 << 16) | 0x8000u);
    CHECK((bf16_bits(tie) % 2) == 0);
    CHECK((bf16_bits(tie) == hi16 || bf16_bits(tie) == hi16 + 1));  // one of its two neighbours
  }
  CHECK(std::isnan(bf16_value(bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(bf16_value(bf16_bits(float_of(0x7f800001u)))));  // a NaN whose high half is infinity's
  CHECK(bf16_value(bf16_bits(std::numeric_limits<float>::infinity())) == std::numeric_limits<float>::infinity());
  CHECK(bf16_value(bf16_bits(-0.f)) == 0.f);
  CHECK(std::signbit(bf16_value(bf16_bits(-0.f))));
}

TEST_CASE("bf16 GEMM: its inputs are rounded (float32 sums: test_sgemm)") {
  const std::string missing = bf16_unavailable_reason();
  if (!missing.empty()) {
    // Nothing to run the GEMM on: the refusal is what this CPU gets.
    CHECK_THROWS_WITH_AS(set_gemm_precision(Precision::bf16), doctest::Contains("lacks"), Error);
    MESSAGE("this CPU lacks " << missing << ": the bf16 GEMM was not run here");
    return;
  }
  // The inputs are rounded: 1 + 2^-12 is 1 in bf16, so k such products sum to k exactly, where
  // float32 inputs give k (1 + 2^-12), also exact: a GEMM that skipped the rounding fails here.
  const int64_t k = 300;
  std::vector<float> a(size_t(4 * k), 1.f + std::ldexp(1.f, -12)), b(size_t(k * 3), 1.f), out(12, -1.f);
  set_gemm_precision(Precision::bf16);
  sgemm(false, false, 4, 3, k, 1.f, a.data(), k, b.data(), 3, 0.f, out.data(), 3);
  set_gemm_precision(Precision::fp32);
  for (float x : out) CHECK(x == float(k));
  sgemm(false, false, 4, 3, k, 1.f, a.data(), k, b.data(), 3, 0.f, out.data(), 3);
  for (float x : out) CHECK(double(x) == double(k) * (1 + std::ldexp(1.0, -12)));
  CHECK(gemm_precision() == Precision::fp32);
}

TEST_CASE("bf16 is refused, naming the missing features, when the CPU lacks it (forced off)") {
  setenv("TRILEMMA_CPU_NO_BF16", "1", 1);
  CHECK(bf16_unavailable_reason().find("avx512_bf16 and amx_bf16") != std::string::npos);
  CHECK_THROWS_WITH_AS(set_gemm_precision(Precision::bf16),
                       doctest::Contains("--precision bf16 needs a CPU with native bf16, and this one lacks avx512_bf16 "
                                         "and amx_bf16"),
                       Error);
  CHECK(gemm_precision() == Precision::fp32);
  unsetenv("TRILEMMA_CPU_NO_BF16");
  CHECK_THROWS_WITH_AS(precision_of("fp16"), "--precision 'fp16' is unknown (allowed: fp32, bf16)", Error);
}
