// Comparisons shared by the test suites, and where the parity suites read torch's references.
// docs/TESTING.md lists every tolerance the suites apply with these functions.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "framework/config/options.hpp"
#include "framework/core/rng.hpp"
#include "framework/core/tensor.hpp"

namespace trilemma_test {

// The file `name` among the references tests/torch/gen_*.py wrote: in TRILEMMA_TORCH_REFS if
// set (CTest points it at references regenerated on other torch kernels), else TORCH_REF_DIR.
inline std::string torch_ref(const std::string& name) {
  const char* dir = std::getenv("TRILEMMA_TORCH_REFS");
  return std::string(dir && *dir ? dir : TORCH_REF_DIR) + "/" + name;
}

// max|t|
inline double max_abs(const float* t, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(std::fabs(t[i])));
  return m;
}
inline double max_abs(const tri::Tensor& t) { return max_abs(t.data(), t.numel()); }

// max|a - b| / max|b|, relative to the reference's scale (max|a - b| when b is all zero);
// infinite where one side is NaN and the other not.
inline double max_rel_err(const float* a, const float* b, int64_t n) {
  double diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
  }
  const double scale = max_abs(b, n);
  return scale > 0 ? diff / scale : diff;
}
inline double max_rel_err(const tri::Tensor& a, const tri::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  return max_rel_err(a.data(), b.data(), a.numel());
}
inline double max_rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  return max_rel_err(a.data(), b.data(), int64_t(b.size()));
}

// max|a - b| / max(1, max|b|): relative to the reference's scale, absolute below 1.
inline double scaled_err(const tri::Tensor& a, const tri::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    diff = std::max(diff, double(std::fabs(a.data()[i] - b.data()[i])));
  return diff / std::max(1.0, max_abs(b));
}

// Root mean square of the elements, accumulated in double.
inline double rms(const float* t, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(t[i]) * double(t[i]);
  return n > 0 ? std::sqrt(s / double(n)) : 0;
}
inline double rms(const tri::Tensor& t) { return rms(t.data(), t.numel()); }

// rms(a - b) / max(scale_floor, rms(b)): the relative RMS error, absolute where the reference
// is smaller than scale_floor (rms(a - b) when both are 0); infinite where one side is NaN and
// the other not. Unlike a maximum it averages over every element, so another summation order
// or kernel moves it by little.
inline double rms_err(const tri::Tensor& a, const tri::Tensor& b, double scale_floor = 0) {
  REQUIRE(a.shape() == b.shape());
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::isnan(a.data()[i]) != std::isnan(b.data()[i]))
      return std::numeric_limits<double>::infinity();
    if (std::isnan(a.data()[i])) continue;  // NaN on both sides: they agree
    const double d = double(a.data()[i]) - double(b.data()[i]);
    s += d * d;
  }
  const double diff = a.numel() > 0 ? std::sqrt(s / double(a.numel())) : 0;
  const double scale = std::max(scale_floor, rms(b));
  return scale > 0 ? diff / scale : diff;
}

// Parity with PyTorch. The generators run every reference twice, in float32 and in float64
// (exact to float32 precision), so torch's own float32 error is known. Our relative RMS error
// against both must stay within
//   bound = max(floor, kOwnErrorFactor * torch's own error)
// The floor is the suite's statement of float32 accuracy for a well-conditioned quantity; the
// second term takes over where the quantity is ill-conditioned and torch itself errs more.
// Another float32 computation of the same quantity lands at a distance of the same order as
// torch's: the largest ratio measured is 3.2 (test_parity_models' linear_relu gradients, where
// relu features leave normalisers near zero); 20 leaves a margin of 6 and stays far below the
// relative error of a wrong formula (>= 1e-3: the largest own error measured is 1.9e-5).
constexpr double kOwnErrorFactor = 20;

// The errors of a group of tensors (a case's gradients, a model's logits, ...): the worst of
// each kind over the group, so the bound follows the group's worst conditioning.
struct ParityErrors {
  // rms_err's scale_floor: 1 where the inputs are O(1) and sums may cancel to near zero.
  explicit ParityErrors(double scale_floor = 0) : scale_floor(scale_floor) {}
  double scale_floor;
  double vs_exact = 0, vs_torch = 0, torch_own = 0;
  std::string worst;  // the tensor with the largest error against the exact result
  void add(const std::string& name, const tri::Tensor& ours, const tri::Tensor& torch32,
           const tri::Tensor& torch64) {
    const double e = rms_err(ours, torch64, scale_floor);
    if (worst.empty() || e > vs_exact) vs_exact = e, worst = name;
    vs_torch = std::max(vs_torch, rms_err(ours, torch32, scale_floor));
    torch_own = std::max(torch_own, rms_err(torch32, torch64, scale_floor));
  }
  double bound(double floor) const { return std::max(floor, kOwnErrorFactor * torch_own); }
  bool within(double floor) const {
    return vs_exact <= bound(floor) && vs_torch <= bound(floor);
  }
  // How far below its bound the worse of the two errors is (> 1: passes with that margin).
  double margin(double floor) const { return bound(floor) / std::max(vs_exact, vs_torch); }
};

// Same shape and the same bits.
inline bool bit_equal(const tri::Tensor& a, const tri::Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * size_t(a.numel())) == 0;
}

// a and b from two code paths that do the same operations in the same order: the same bits.
// Under the sanitizers, instrumented code changes which loops GCC vectorises, and with that
// the order of an `omp simd` reduction's adds: there the paths agree to rounding, `tol` in
// scaled_err.
inline bool bit_equal_unless_sanitized(const tri::Tensor& a, const tri::Tensor& b, double tol) {
  if (std::strstr(TRILEMMA_BUILD, "sanitized") == nullptr) return bit_equal(a, b);
  return scaled_err(a, b) < tol;
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
