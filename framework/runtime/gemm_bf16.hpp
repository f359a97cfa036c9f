// The GEMM of `--precision bf16`: C = op(A) op(B) + beta C with A and B rounded to bfloat16
// (round to nearest even) and the products summed in float32 into a float32 C. The usual
// mixed-precision split: only a GEMM's inputs lose precision; what it writes, and every other
// op, stays float32. Runs on AMX tiles (gemm_amx.hpp), or on oneDNN's AVX512_BF16 matmul where
// the CPU has no AMX; on CPUs without native bf16 it is refused, never emulated.
#pragma once
#include <cstdint>
#include <string>

namespace tri {

// "" when this CPU does bf16 natively (AVX512_BF16 or AMX_BF16), else what is missing. The
// environment variable TRILEMMA_CPU_NO_BF16=1 makes it report the features missing (tests of
// the refusal on a machine that has them).
std::string bf16_unavailable_reason();
// "avx512_bf16 amx_bf16", the bf16 features this CPU has ("" for none).
std::string bf16_features();
// The kernel gemm_bf16 runs here: "AMX tiles" or "oneDNN's matmul".
std::string bf16_kernel();

// float -> bfloat16 bits, rounding to nearest even (NaN stays NaN); and back.
inline uint16_t bf16_bits(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
}

// Row-major, as sgemm (runtime.hpp); alpha must be 1 (every caller's).
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The kernel gemm_bf16 runs where AMX is missing (oneDNN's matmul); callable anywhere bf16 is
// native, so tests check it on AMX machines too.
void gemm_bf16_onednn(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace tri
