// Comparisons shared by the test suites.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "framework/options.hpp"
#include "framework/rng.hpp"
#include "framework/tensor.hpp"

namespace trilemma_test {

// max|a - b| / max(1, max|b|): relative to the reference's scale, absolute below 1.
inline double scaled_err(const tri::Tensor& a, const tri::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double diff = 0, ref = 1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, double(std::fabs(a.data()[i] - b.data()[i])));
    ref = std::max(ref, double(std::fabs(b.data()[i])));
  }
  return diff / ref;
}

// Same shape and the same bits.
inline bool bit_equal(const tri::Tensor& a, const tri::Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * size_t(a.numel())) == 0;
}

// The message of the tri::Error that fn throws ("" if it throws none).
template <class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const tri::Error& e) {
    return e.what();
  }
  return "";
}

// Token ids [B, T] uniform in [0, V), a pure function of the seed.
inline tri::IntTensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  tri::Rng rng(seed);
  std::vector<int32_t> v(size_t(B * T));
  for (auto& x : v) x = int32_t(rng.below(uint64_t(V)));
  return tri::IntTensor(tri::Shape{B, T}, v);
}

// Sets the fields of `o` named in `values` (text as in a config file); fields it does not have
// are left out, so one list can serve configs of several families or tasks.
inline void set_options(tri::Options& o, const tri::TextMap& values) { tri::read_text(o, values, false); }

}  // namespace trilemma_test
