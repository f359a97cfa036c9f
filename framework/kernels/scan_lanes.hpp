// The selective scan's lane helpers (internal to framework/kernels/selective_scan.cpp): a block of
// kLanes channels as one GCC vector (lanes.hpp), exp(dt A) as 2^(dt A log2 e), partial rows of
// a block, and prefetching the rows of the next steps.
#pragma once
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "framework/simd/lanes.hpp"

namespace tri::scan_lanes {

using namespace lanes;  // Lanes, LaneInts, kLanes, ld, st, bcast

// x < lo ? lo : x and x > hi ? hi : x, for every x (NaN included), V float or Lanes. On vectors
// GCC builds each as a compare and a masked move; AVX-512's max(lo, x), which is lo > x ? lo : x,
// and min(hi, x) give the same result in one instruction (the zero-masked forms with every lane
// kept: the plain ones pass GCC 12 an undefined vector that it warns about).
template <class V>
inline V at_least(V x, V lo) { return x < lo ? lo : x; }
template <class V>
inline V at_most(V x, V hi) { return x > hi ? hi : x; }
#ifdef __AVX512F__
inline Lanes at_least(Lanes x, Lanes lo) {
  return Lanes(_mm512_maskz_max_ps(__mmask16(0xffff), __m512(lo), __m512(x)));
}
inline Lanes at_most(Lanes x, Lanes hi) {
  return Lanes(_mm512_maskz_min_ps(__mmask16(0xffff), __m512(hi), __m512(x)));
}
#endif

// The decay exp(dt A) of the recurrence as 2^(dt A2), A2 = A log2(e) computed once per
// channel: 2^n 2^f with n = round(x) (the 1.5 * 2^23 trick leaves n in the low mantissa bits),
// f in [-1/2, 1/2] and 2^f by a degree-5 minimax polynomial (relative error 2.2e-7, as
// exp2_neg). Cheaper than exp_approx, whose argument reduction it skips; x is clamped to
// [-127, 127] (2^-127 is exactly 0: a state that has fully decayed). V is float (the step) or
// Lanes (the scan), with the same operations in the same order.
// decays_of<K>: out[k] = 2^(dt A2[k]) for K arguments, each operation done for all K before
// the next, so that K independent chains sit side by side in the instruction stream. Each
// result has the bits of decay_of (the same operations on it, in the same order).
constexpr float kLog2e = 1.44269504088896341f;
template <int K, class V>
inline void decays_of(V dt, const V* A2, V* out) {
  using I = std::conditional_t<std::is_same_v<V, float>, int32_t, LaneInts>;
  const V lo = V{} - 127.f, hi = V{} + 127.f, magic = V{} + 0x1.8p23f;
  V x[K], f[K], p[K];
  I ni[K];
  for (int k = 0; k < K; ++k) x[k] = dt * A2[k];
  for (int k = 0; k < K; ++k) x[k] = at_least(x[k], lo);
  for (int k = 0; k < K; ++k) x[k] = at_most(x[k], hi);
  for (int k = 0; k < K; ++k) {
    const V shifted = x[k] + magic;
    const V n = shifted - magic;
    f[k] = x[k] - n;
    ni[k] = std::bit_cast<I>(shifted) - std::bit_cast<int32_t>(0x1.8p23f);
  }
  for (int k = 0; k < K; ++k) p[k] = V{} + 1.3276472e-3f;
  for (int k = 0; k < K; ++k) p[k] = p[k] * f[k] + 9.6755410e-3f;
  for (int k = 0; k < K; ++k) p[k] = p[k] * f[k] + 5.5507131e-2f;
  for (int k = 0; k < K; ++k) p[k] = p[k] * f[k] + 2.4022120e-1f;
  for (int k = 0; k < K; ++k) p[k] = p[k] * f[k] + 6.9314694e-1f;
  for (int k = 0; k < K; ++k) p[k] = p[k] * f[k] + 1.0000001f;
  for (int k = 0; k < K; ++k) out[k] = p[k] * std::bit_cast<V>((ni[k] + 127) << 23);
}
template <class V>
inline V decay_of(V dt, V A2) {
  V a;
  decays_of<1>(dt, &A2, &a);
  return a;
}

// Lanes [0, lanes) of row src (one time step of [B, T, E]), the rest zero. Written as one
// masked loop of fixed length: GCC turns split loops into memcpy/memset calls.
inline void load_lanes(const float* src, int lanes, float* dst) {
#pragma omp simd
  for (int l = 0; l < kLanes; ++l) dst[l] = l < lanes ? src[l] : 0.f;
}

// dst[l] = src[l] for the lanes [0, lanes).
inline void store_lanes(const float* src, int lanes, float* dst) {
#pragma omp simd
  for (int l = 0; l < kLanes; ++l)
    if (l < lanes) dst[l] = src[l];
}

// dst[l] += src[l] for the lanes [0, lanes) (a gradient row; skipped when dst is null). A
// fresh (uninitialised) dst is set to 0 + src[l], the bits the add into zeros gives.
inline void add_lanes(const float* src, int lanes, float* dst, bool fresh) {
  if (!dst) return;
  if (fresh) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l)
      if (l < lanes) dst[l] = 0.f + src[l];
  } else {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l)
      if (l < lanes) dst[l] += src[l];
  }
}

// Channels-last rows are 4E bytes apart, so a block walking through time touches a new cache
// line per step and tensor (and a new page every few steps), which hardware prefetchers do
// not follow: fetch the rows kPrefetch steps ahead (rows past `end` are skipped).
constexpr int64_t kPrefetch = 8;
inline void prefetch_rows(std::initializer_list<const float*> bases, int64_t row, int64_t end,
                          int64_t E, int64_t e0) {
  if (row + kPrefetch >= end) return;
  for (const float* p : bases)
    if (p) __builtin_prefetch(p + (row + kPrefetch) * E + e0);
}

}  // namespace tri::scan_lanes
