// FNV-1a, 64 bits: a stable hash of bytes (parameter checksums, run ids). Not cryptographic.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tri {

constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

// Continues hash `h` over n bytes at p.
inline uint64_t fnv1a(const void* p, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace tri
