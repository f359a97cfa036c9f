// The bf16 GEMM on AMX tiles: C = op(A) op(B) + beta C, the inputs rounded to bfloat16 (round
// to nearest even) while they are packed into tiles, the products summed in float32 by
// TDPBF16PS. The same arithmetic as oneDNN's AMX matmul (gemm_bf16.cpp), without its per-call
// copies: A is rounded straight into the tile layout, 32 rows at a time, while they are in
// cache. Each element of C is summed by one thread along k in order, so the bits do not depend
// on the thread count. The reference is the double loop over rounded inputs in test_sgemm.
#pragma once
#include <cstdint>

namespace tri {

// True when this CPU has AMX_BF16 and the kernel let this process use the tile registers.
// TRILEMMA_CPU_NO_AMX=1 (read once) makes it false: --precision bf16 then runs the kernel of a
// CPU without AMX (oneDNN's), for side-by-side timings and that machine's bits.
bool amx_usable();

// What a linear layer adds to its product while C is stored (either may be null): a bias per
// column, and a residual laid out as C (C's leading dimension).
struct GemmAdd {
  const float* bias = nullptr;
  const float* residual = nullptr;
};

// Row-major, as sgemm (runtime.hpp); alpha 1. C = residual + (bias + (op(A) op(B) + beta C)).
void gemm_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc, GemmAdd add = {});

}  // namespace tri
