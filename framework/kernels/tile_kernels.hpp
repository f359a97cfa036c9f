// The small dense kernels of the fused attention (framework/kernels/attention.cpp): a register-tiled
// product of tiles and a 16 x 16 transpose. Without AVX-512 the product is a plain loop that
// GCC vectorises, and the transpose is not defined (callers keep a loop for that case).
#pragma once

#include <algorithm>
#include <cstdint>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace tri::tile_kernels {

// C[MR x 16 NV] (+)= A[MR x K] B[K x 16 NV]. A is read through strides (a_m between rows, a_k
// between columns: A^T is free), B and C are row-major. Each C element is one fused multiply-add
// chain over k in order, whichever path runs, so the paths give the same bits.
template <int MR, int NV>
inline void gemm_block(int64_t K, const float* a, int64_t a_m, int64_t a_k, const float* b,
                       int64_t ldb, float* c, int64_t ldc, bool accumulate) {
#ifdef __AVX512F__
  // The accumulators and one row of B stay in zmm registers: per k, NV loads and MR broadcasts
  // feed MR * NV multiply-adds.
  __m512 acc[MR][NV];
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v)
      acc[m][v] = accumulate ? _mm512_loadu_ps(c + m * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const float *bk = b + k * ldb, *ak = a + k * a_k;
    __m512 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(bk + 16 * v);
    for (int m = 0; m < MR; ++m) {
      const __m512 am = _mm512_set1_ps(ak[m * a_m]);
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_fmadd_ps(am, bv[v], acc[m][v]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + m * ldc + 16 * v, acc[m][v]);
#else
  constexpr int N = NV * 16;
  float acc[MR][N];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < N; ++n) acc[m][n] = accumulate ? c[m * ldc + n] : 0.f;
  for (int64_t k = 0; k < K; ++k) {
    const float* bk = b + k * ldb;
    for (int m = 0; m < MR; ++m) {
      const float am = a[m * a_m + k * a_k];
#pragma omp simd
      for (int n = 0; n < N; ++n) acc[m][n] += am * bk[n];
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < N; ++n) c[m * ldc + n] = acc[m][n];
#endif
}

// Rows of a register block: MR * NV accumulators plus NV rows of B within 32 zmm registers
// (16 vector registers without AVX-512: fewer rows there).
template <int NV>
constexpr int block_rows() {
#ifdef __AVX512F__
  return NV == 4 ? 6 : NV == 3 ? 8 : NV == 2 ? 12 : 16;
#else
  return NV >= 3 ? 4 : 8;
#endif
}

// The last M % MR rows, as one block of that many rows.
template <int NV, int R>
inline void gemm_rest(int64_t rows, int64_t K, const float* a, int64_t a_m, int64_t a_k,
                      const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if constexpr (R > 0) {
    if (rows == R) return gemm_block<R, NV>(K, a, a_m, a_k, b, ldb, c, ldc, accumulate);
    gemm_rest<NV, R - 1>(rows, K, a, a_m, a_k, b, ldb, c, ldc, accumulate);
  }
}

template <int NV>
inline void gemm_columns(int64_t M, int64_t K, const float* a, int64_t a_m, int64_t a_k,
                         const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int MR = block_rows<NV>();
  int64_t m = 0;
  for (; m + MR <= M; m += MR)
    gemm_block<MR, NV>(K, a + m * a_m, a_m, a_k, b, ldb, c + m * ldc, ldc, accumulate);
  gemm_rest<NV, MR - 1>(M - m, K, a + m * a_m, a_m, a_k, b, ldb, c + m * ldc, ldc, accumulate);
}

// C[M x N] (+)= A[M x K] B[K x N] for the small products of a tile; N a multiple of 16.
inline void tile_gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_m, int64_t a_k,
                      const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t n = 0; n < N; n += 64) {
    switch (std::min<int64_t>(4, (N - n) / 16)) {
      case 4: gemm_columns<4>(M, K, a, a_m, a_k, b + n, ldb, c + n, ldc, accumulate); break;
      case 3: gemm_columns<3>(M, K, a, a_m, a_k, b + n, ldb, c + n, ldc, accumulate); break;
      case 2: gemm_columns<2>(M, K, a, a_m, a_k, b + n, ldb, c + n, ldc, accumulate); break;
      default: gemm_columns<1>(M, K, a, a_m, a_k, b + n, ldb, c + n, ldc, accumulate); break;
    }
  }
}

#ifdef __AVX512F__
// GCC 12 warns about the undefined pass-through inside its own unpack and shuffle intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// dst[c * ld_dst + r] = src[r * ld_src + c] for a 16 x 16 block: three rounds of shuffles.
inline void transpose16(const float* src, int64_t ld_src, float* dst, int64_t ld_dst) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld_src);
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)  // r[i + j], 128-bit lane L: column 4L + j of rows i .. i + 3
    for (int h = 0; h < 2; ++h) {
      const __m512d lo = _mm512_castps_pd(t[i + h]), hi = _mm512_castps_pd(t[i + h + 2]);
      r[i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
      r[i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
    }
  for (int j = 0; j < 4; ++j) {  // gather the four lanes of each column
    t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
  }
  for (int j = 0; j < 4; ++j) {
    _mm512_storeu_ps(dst + j * ld_dst, _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88));
    _mm512_storeu_ps(dst + (8 + j) * ld_dst, _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd));
    _mm512_storeu_ps(dst + (4 + j) * ld_dst, _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88));
    _mm512_storeu_ps(dst + (12 + j) * ld_dst, _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd));
  }
}
#pragma GCC diagnostic pop
#endif

}  // namespace tri::tile_kernels
