// Deterministic random numbers, identical on every machine and standard library: no
// std::*_distribution (their outputs differ between implementations). SplitMix64 for
// counter-based draws (dropout masks, data rows), xoshiro256** for sequential streams.
#pragma once
#include <cmath>
#include <cstdint>

namespace tri {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A stream id from a seed and a counter (e.g. a step or a batch index).
inline uint64_t seed_mix(uint64_t seed, uint64_t counter) {
  return splitmix64(splitmix64(seed) ^ (counter * 0xD1B54A32D192ED03ull));
}

// The i-th uniform in [0, 1) of a stream, 24 random bits: a pure function, so parallel loops
// give the same values at any thread count.
inline float uniform_at(uint64_t stream, uint64_t i) {
  return float(splitmix64(stream ^ (i * 0x9E3779B97F4A7C15ull)) >> 40) * 0x1.0p-24f;
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix64(x++);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Uniform integer in [0, n) without modulo bias (Lemire's method).
  uint64_t below(uint64_t n) {
    unsigned __int128 m = (unsigned __int128)next() * n;
    uint64_t lo = uint64_t(m);
    if (lo < n) {
      const uint64_t thresh = (0 - n) % n;
      while (lo < thresh) {
        m = (unsigned __int128)next() * n;
        lo = uint64_t(m);
      }
    }
    return uint64_t(m >> 64);
  }
  double normal() {  // Box-Muller, one value per call
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  const uint64_t* state() const { return s_; }
  void set_state(const uint64_t s[4]) {
    for (int i = 0; i < 4; ++i) s_[i] = s[i];
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace tri
