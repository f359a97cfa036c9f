// The small dense kernels of the fused attention (framework/kernels/attention.cpp): a register-tiled
// product of tiles and a 16 x 16 transpose. Without AVX-512 the product is a plain loop that
// GCC vectorises, and the transpose is not defined (callers keep a loop for that case).
#pragma once

#include <algorithm>
#include <cmath>
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
#ifndef __clang__  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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

// out[i] = sum over d < D of a[i][d] b[i][d] for n rows (a's lda apart, b's ldb apart), in the
// order and rounding GCC 12 gives the plain loop `dot += a[d] * b[d]` at -O3 with AVX-512 (the
// bits of the results made with it): over the first D / 8 * 8 columns, products rounded, then
// added in order (its 16- and 8-wide vector bodies); over the rest, fused multiply-adds (its
// scalar tail). That loop is one serial chain of adds per row; here 16 rows are the lanes of one
// vector: their products over 16 columns are transposed, then added column by column.
inline void row_dots(int64_t n, int64_t D, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float* out) {
#ifdef __AVX512F__
  const int64_t rounded = D / 8 * 8;
  for (int64_t i0 = 0; i0 < n; i0 += 16) {
    const int64_t rows = std::min<int64_t>(16, n - i0);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t d0 = 0; d0 < rounded; d0 += 16) {
      const int64_t cols = std::min<int64_t>(16, rounded - d0);
      const __mmask16 valid = __mmask16((1u << cols) - 1);
      alignas(64) float products[16][16], columns[16][16];
      for (int64_t r = rows; r < 16; ++r) _mm512_store_ps(products[r], _mm512_setzero_ps());
      for (int64_t r = 0; r < rows; ++r) {
        const __m512 x = _mm512_maskz_loadu_ps(valid, a + (i0 + r) * lda + d0),
                     y = _mm512_maskz_loadu_ps(valid, b + (i0 + r) * ldb + d0);
        // Rounded before the add: GCC may fuse a plain _mm512_mul_ps with a later add.
        _mm512_store_ps(products[r], _mm512_maskz_mul_round_ps(valid, x, y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      transpose16(&products[0][0], 16, &columns[0][0], 16);
      for (int64_t u = 0; u < cols; ++u) sum = _mm512_add_ps(sum, _mm512_load_ps(columns[u]));
    }
    alignas(64) float sums[16];
    _mm512_store_ps(sums, sum);
    for (int64_t r = 0; r < rows; ++r) {
      float dot = sums[r];
      for (int64_t d = rounded; d < D; ++d) dot = std::fma(a[(i0 + r) * lda + d], b[(i0 + r) * ldb + d], dot);
      out[i0 + r] = dot;
    }
  }
#else
  for (int64_t i = 0; i < n; ++i) {
    float dot = 0.f;
    for (int64_t d = 0; d < D; ++d) dot += a[i * lda + d] * b[i * ldb + d];
    out[i] = dot;
  }
#endif
}

}  // namespace tri::tile_kernels
