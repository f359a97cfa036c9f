// Sixteen floats as one GCC vector (AVX-512: one register; AVX2: two; else plain code), for the
// recurrent kernels (selective_scan.cpp, linear_attention.cpp): a recurrence written on it
// compiles to straight vector code, without the masks and spills GCC adds to vectorised lane
// loops, and at full width whatever -mprefer-vector-width the host's tuning picks.
#pragma once
#include <cstdint>
#if defined(__SSE__)
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
