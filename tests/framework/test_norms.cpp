// The norms' loops compiled for the common row widths (16 to 256) against their loop for any
// width: the same bits forward and backward, at 1 and 2 threads. Together with the parity and
// gradient checks, which run at other widths, this pins down every path. And l2_norm against
// rms_norm and a scale, bit for bit.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <functional>
#include <utility>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"

using namespace tri;
using namespace trilemma_test;
using gradcheck::param;

namespace {

using Norm = std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)>;

// y, and the gradients of x, w and b under the loss sum(y c) (a norm without w or b adds them
// times 0, so that every gradient exists).
std::vector<Tensor> outputs(const Shape& shape, const Norm& norm) {
  clear_tape();
  const int64_t D = shape[-1];
  Tensor x = param(shape, 41, -2, 2), w = param({D}, 42, 0.5f, 1.5f), b = param({D}, 43);
  const Tensor y = norm(x, w, b);
  backward(sum(mul(y, gradcheck::uniform(shape, 44))));
  return {y, x.grad(), w.grad(), b.grad()};
}

}  // namespace

TEST_CASE("norms: the loops for the common widths give the general loop's bits") {
  const std::pair<const char*, Norm> norms[] = {
      {"layer_norm", [](const Tensor& x, const Tensor& w, const Tensor& b) { return layer_norm(x, w, b); }},
      {"layer_norm without affine", [](const Tensor& x, const Tensor& w, const Tensor& b) {
         return add(layer_norm(x, Tensor(), Tensor()), add(mul_scalar(w, 0.f), mul_scalar(b, 0.f)));
       }},
      {"rms_norm", [](const Tensor& x, const Tensor& w, const Tensor& b) {
         return add(rms_norm(x, w), mul_scalar(b, 0.f));
       }},
      {"l2_norm", [](const Tensor& x, const Tensor& w, const Tensor& b) {
         return add(l2_norm(x), add(mul_scalar(w, 0.f), mul_scalar(b, 0.f)));
       }},
  };
  const int saved = omp_get_max_threads();
  // 200 rows: 12 whole blocks of 16 and a part; [2, 600, D] at the larger widths is threaded.
  for (int64_t D : {16, 32, 64, 128, 256})
    for (const Shape& shape : {Shape{200, D}, Shape{2, 600, D}})
      for (int threads : {1, 2})
        for (const auto& [name, norm] : norms) {
          CAPTURE(name);
          CAPTURE(D);
          CAPTURE(threads);
          omp_set_num_threads(threads);
          const std::vector<Tensor> compiled = outputs(shape, norm);
          std::vector<Tensor> general;
          {
            GeneralNormWidths guard;
            general = outputs(shape, norm);
          }
          for (size_t i = 0; i < compiled.size(); ++i) CHECK(bit_equal(compiled[i], general[i]));
        }
  omp_set_num_threads(saved);
}

TEST_CASE("norms: l2_norm has the bits of rms_norm and then the scale, forward and backward") {
  // [300, 70] and [40, 16]: one thread's pass and the threaded one, a row tail, DeltaNet's heads.
  const int saved = omp_get_max_threads();
  for (const Shape& shape : {Shape{300, 70}, Shape{40, 16}})
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      omp_set_num_threads(threads);
      const int64_t D = shape[1];
      const Tensor c = gradcheck::uniform(shape, 31);
      auto run = [&](bool fused) {
        clear_tape();
        Tensor x = param(shape, 32, -2, 2);
        const Tensor y = fused ? l2_norm(x, 1e-6f)
                               : mul_scalar(rms_norm(x, Tensor(), 1e-6f / float(D)), 1.f / std::sqrt(float(D)));
        backward(sum(mul(y, c)));
        return std::pair{y, x.grad()};
      };
      const auto [y_fused, g_fused] = run(true);
      const auto [y_ops, g_ops] = run(false);
      CHECK(bit_equal(y_fused, y_ops));
      CHECK(bit_equal(g_fused, g_ops));
    }
  omp_set_num_threads(saved);
}
