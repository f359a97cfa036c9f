// The fused causal linear-attention kernel against PyTorch: output and the gradient of every
// input. tests/torch/gen_linear_attention.py writes TORCH_REF_DIR/linear_attention.h5 with two
// torch computations of each case (the masked quadratic form and the prefix-sum form); ours must
// match both. Prints a table "case | form | forward err | backward err".
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/autograd.hpp"
#include "framework/h5.hpp"
#include "framework/linear_attention.hpp"
#include "framework/ops.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {


// Each output is a ratio of two sums of up to T * Dk = 9600 products, accumulated in another
// order than torch's (a running state here, blocked GEMMs or prefix sums there); the errors
// measured are below 2e-7 forward and 5e-7 backward (gradients add one more such sum), about
// sqrt(T) ulp. The tolerances leave a margin of ten for other BLAS blockings.
constexpr double kTolForward = 2e-6, kTolBackward = 5e-6;

}  // namespace

TEST_CASE("linear_attention parity with PyTorch: output and every gradient") {
  H5File f(std::string(TORCH_REF_DIR) + "/linear_attention.h5", H5File::Mode::read);
  const std::vector<std::string> cases = f.list("/");
  REQUIRE(cases.size() >= 4);
  std::printf("\n%-24s | %-9s | forward err | backward err\n", "case", "torch form");
  for (const std::string& c : cases) {
    CAPTURE(c);
    const bool sep = f.attr_int(c, "separate_den") != 0;
    const float eps = float(f.attr_double(c, "eps"));
    std::vector<std::string> names = {"q", "k", "v"};
    if (sep) names.insert(names.end(), {"q_den", "k_den"});
    std::vector<Tensor> in;
    for (const std::string& n : names) in.push_back(f.read(c + "/" + n).requires_grad_());
    Tensor out = sep ? linear_attention(in[0], in[1], in[2], in[3], in[4], eps)
                     : linear_attention(in[0], in[1], in[2], Tensor(), Tensor(), eps);
    backward(sum(mul(out, f.read(c + "/gout"))));
    for (const std::string suffix : {"", "_cumsum"}) {
      const double fwd = scaled_err(out, f.read(c + "/out" + suffix));
      double bwd = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const double e = scaled_err(in[i].grad(), f.read(c + "/g_" + names[i] + suffix));
        INFO("gradient of " << names[i] << " vs torch's " << (suffix[0] ? "cumsum" : "quadratic")
                            << " form: " << e);
        CHECK(e < kTolBackward);
        bwd = std::max(bwd, e);
      }
      CHECK(fwd < kTolForward);
      std::printf("%-24s | %-9s | %11.2e | %12.2e\n", c.c_str(), suffix[0] ? "cumsum" : "quadratic",
                  fwd, bwd);
    }
  }
}
