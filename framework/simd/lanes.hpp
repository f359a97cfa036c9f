// Sixteen floats as one GCC vector (AVX-512: one register; AVX2: two; else plain code), for the
// recurrent kernels (selective_scan.cpp, linear_attention.cpp): a recurrence written on it
// compiles to straight vector code, without the masks and spills GCC adds to vectorised lane
// loops, and at full width whatever -mprefer-vector-width the host's tuning picks.
#pragma once
#include <cmath>
#include <cstdint>
#if defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace tri::lanes {

constexpr int kLanes = 16;  // one AVX-512 vector of floats

// Loads and stores need only float alignment.
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));
using LaneInts = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
// Loads and stores are one access of the whole vector, through a type that may alias floats.
// Not memcpy: under some -mtune (rocketlake's, say) GCC copies 64 bytes as two 32-byte halves
// through the stack, and the 64-byte load that follows waits for both stores (a failed store
// forward), which made the selective scan 6x slower.
using LanesAlias = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(4), may_alias));
inline Lanes ld(const float* p) { return *reinterpret_cast<const LanesAlias*>(p); }
inline void st(float* p, Lanes v) { *reinterpret_cast<LanesAlias*>(p) = v; }
// x in every lane. x - 0 is x exactly, signed zeros included, so it compiles to one broadcast
// (0 + x, which turns -0 into +0, costs a scalar add first).
inline Lanes bcast(float x) { return x - Lanes{}; }

// The sum of the 16 lanes, in a fixed order (a tree of halves).
inline float hsum(Lanes x) {
  x += __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  x += __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  x += __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  x += __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  return x[0];
}

// a b + c rounded once, in every lane: a fused multiply-add whatever the code around it (GCC
// fuses a product into a sum or not depending on that code).
inline Lanes fma(Lanes a, Lanes b, Lanes c) {
#if defined(__AVX512F__)
  return Lanes(_mm512_fmadd_ps(__m512(a), __m512(b), __m512(c)));
#else
  for (int l = 0; l < kLanes; ++l) c[l] = std::fma(a[l], b[l], c[l]);
  return c;
#endif
}

// x, as a value the compiler cannot see into: a product passed through it is rounded to float
// before a sum takes it. Otherwise GCC moves lane shuffles in front of a multiplication and fuses
// the product into the addition after them (an FMA), which changes the bits of hsum16's sums.
inline Lanes opaque(Lanes x) {
#if defined(__AVX512F__)
  asm("" : "+v"(x));  // one register, no instruction
#else
  asm("" : "+m"(x));  // two registers or more: through memory
#endif
  return x;
}

// The same for one float: a product passed through it is rounded before a sum takes it, whatever
// -mtune says (GCC's Zen tuning keeps a loop-carried chain of multiply-adds unfused, its other
// tunings fuse it: the bits would follow the machine that compiled them).
inline float opaque(float x) {
  asm("" : "+x"(x));
  return x;
}

// hsum16's first level for its rows 2i and 2i + 1 (each row's lanes l and l + 8 added: 8 lanes
// a row), so that a caller can fold each pair of rows as soon as both exist.
inline Lanes hsum16_pair(Lanes even, Lanes odd) {
  return __builtin_shufflevector(even, odd, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
         __builtin_shufflevector(even, odd, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
}

// The rest of hsum16, from its 8 pairs (hsum16_pair of rows 2i and 2i + 1 in h8[i]).
inline Lanes hsum16_pairs(const Lanes (&h8)[8]) {
  Lanes h4[4], h2[2];
  for (int i = 0; i < 4; ++i)  // rows 4i .. 4i + 3: 4 lanes each
    h4[i] = __builtin_shufflevector(h8[2 * i], h8[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
            __builtin_shufflevector(h8[2 * i], h8[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  for (int i = 0; i < 2; ++i)  // rows 8i .. 8i + 7: 2 lanes each
    h2[i] = __builtin_shufflevector(h4[2 * i], h4[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
            __builtin_shufflevector(h4[2 * i], h4[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  return __builtin_shufflevector(h2[0], h2[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(h2[0], h2[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// Lane j of the result = hsum(r[j]), bit for bit: each level adds the same lane pairs as hsum
// does (l and l + 8, then l + 4, l + 2, l + 1), with the rows packed side by side so that one
// vector addition serves several rows.
inline Lanes hsum16(const Lanes (&r)[kLanes]) {
  Lanes h8[8];
  for (int i = 0; i < 8; ++i) h8[i] = hsum16_pair(r[2 * i], r[2 * i + 1]);
  return hsum16_pairs(h8);
}

// hsum16 for R = 4, 8 or 16 rows, given their R / 2 pairs (hsum16_pair of rows 2i and 2i + 1):
// lane i of the result is hsum(row i), bit for bit, for i < R; the other lanes repeat them (the
// pairs repeated to 8, whose repeated folds the compiler computes once).
template <int R>
inline Lanes hsum_pairs(const Lanes (&pairs)[R / 2]) {
  static_assert(R == 4 || R == 8 || R == 16, "4, 8 or 16 rows");
  Lanes h8[8];
  for (int i = 0; i < 8; ++i) h8[i] = pairs[i % (R / 2)];
  return hsum16_pairs(h8);
}

// hsum16 fed one row at a time (row i of 16; i is known at compile time once the caller's loop
// is unrolled): each pair of rows is folded (hsum16_pair) as soon as both exist, so that 8
// vectors are live instead of 16 and a caller can keep its rows in registers. sum() is hsum16
// of the 16 rows, bit for bit.
struct Hsum16Fold {
  Lanes even{}, pairs[8];
  void add(int i, Lanes row) {
    if (i % 2 == 0)
      even = row;
    else
      pairs[i / 2] = hsum16_pair(even, row);
  }
  Lanes sum() const { return hsum16_pairs(pairs); }
};

// Asks for the n floats of a row ahead of their use (for writing: the lines' ownership too). The
// kernels' walks over [B, T, H, *] rows are H rows apart, short runs the hardware prefetcher
// follows poorly. Inlined always: GCC takes a function that only prefetches for one without
// effects and drops its calls.
[[gnu::always_inline]] inline void prefetch(const float* row, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) __builtin_prefetch(row + i, 0);
}
[[gnu::always_inline]] inline void prefetch_for_write(float* row, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) __builtin_prefetch(row + i, 1);
}

// While alive, the calling thread flushes subnormal results and operands to zero (x86's FTZ and
// DAZ; elsewhere a no-op). An adjoint that receives no gradient for a long stretch (a needle
// scored at one position in 1024) decays through the subnormal range, where each operation
// costs an Intel core a microcode assist: the selective scan's backward ran 6x slower at T 1024.
// A subnormal is below half an ulp of any float above 2^-102, so no sum of that size changes.
class FlushSubnormals {
 public:
#if defined(__SSE__)
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
#else
  FlushSubnormals() = default;
#endif
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
#if defined(__SSE__)
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;  // MXCSR bits
  unsigned saved_;
#endif
};

}  // namespace tri::lanes
