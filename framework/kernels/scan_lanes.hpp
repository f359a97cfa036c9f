// The selective scan's lane helpers (internal to framework/kernels/selective_scan.cpp): a block of
// kLanes channels as one GCC vector, exp(dt A) as 2^(dt A log2 e), partial rows of a block,
// and prefetching the rows of the next steps.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

namespace tri::scan_lanes {

constexpr int kLanes = 16;       // channels per block: one AVX-512 vector of floats

// A block's kLanes channels as one GCC vector (AVX-512: one register; AVX2: two; else plain
// code). The recurrence written on it compiles to straight vector code, without the masks and
// spills that GCC adds to vectorised lane loops. Loads and stores need only float alignment.
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));
using LaneInts = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
// Loads and stores are one access of the whole vector, through a type that may alias floats.
// Not memcpy: under some -mtune (rocketlake's, say) GCC copies 64 bytes as two 32-byte halves
// through the stack, and the 64-byte load that follows waits for both stores (a failed store
// forward), which made the scan 6x slower.
using LanesAlias = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4), may_alias));
inline Lanes ld(const float* p) { return *reinterpret_cast<const LanesAlias*>(p); }
inline void st(float* p, Lanes v) { *reinterpret_cast<LanesAlias*>(p) = v; }
// x in every lane. x - 0 is x exactly, signed zeros included, so it compiles to one broadcast
// (0 + x, which turns -0 into +0, costs a scalar add first).
inline Lanes bcast(float x) { return x - Lanes{}; }

// The decay exp(dt A) of the recurrence as 2^(dt A2), A2 = A log2(e) computed once per
// channel: 2^n 2^f with n = round(x) (the 1.5 * 2^23 trick leaves n in the low mantissa bits),
// f in [-1/2, 1/2] and 2^f by a degree-5 minimax polynomial (relative error 2.2e-7, as
// exp2_neg). Cheaper than exp_approx, whose argument reduction it skips; x is clamped to
// [-127, 127] (2^-127 is exactly 0: a state that has fully decayed). V is float (the step) or
// Lanes (the scan), with the same operations in the same order.
constexpr float kLog2e = 1.44269504088896341f;
template <class V>
inline V decay_of(V dt, V A2) {
  using I = std::conditional_t<std::is_same_v<V, float>, int32_t, LaneInts>;
  const V lo = V{} - 127.f, hi = V{} + 127.f, magic = V{} + 0x1.8p23f;
  V x = dt * A2;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const V shifted = x + magic;
  const V n = shifted - magic, f = x - n;
  const I ni = std::bit_cast<I>(shifted) - std::bit_cast<int32_t>(0x1.8p23f);
  V p = V{} + 1.3276472e-3f;
  p = p * f + 9.6755410e-3f;
  p = p * f + 5.5507131e-2f;
  p = p * f + 2.4022120e-1f;
  p = p * f + 6.9314694e-1f;
  p = p * f + 1.0000001f;
  return p * std::bit_cast<V>((ni + 127) << 23);
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
