// The fused causal linear-attention kernel against PyTorch: output and the gradient of every
// input. tests/torch/gen_linear_attention.py writes linear_attention.h5 with two torch float32
// computations of each case (the masked quadratic form and the prefix-sum form) and the
// quadratic form in float64; ours must match both forms: relative RMS errors against the
// form's float32 result and the float64 one within max(floor, kOwnErrorFactor * that form's
// own error) (tests/compare.hpp). Prints a table "case | form | forward err / bound |
// backward err / bound" (err: the worse of vs float32 and vs float64).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/kernels/linear_attention.hpp"
#include "framework/ops/ops.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

// Each output is a ratio of two sums of up to T * Dk = 9600 products, accumulated in another
// order than torch's (a running state here, blocked GEMMs or prefix sums there); gradients add
// one more such sum. Measured at most 1.9e-7 forward and 6.8e-7 backward: margins 10 and 7.
constexpr double kFloorForward = 2e-6, kFloorBackward = 5e-6;

}  // namespace

TEST_CASE("linear_attention parity with PyTorch: output and every gradient") {
  H5File f(torch_ref("linear_attention.h5"), H5File::Mode::read);
  const std::vector<std::string> cases = f.list("/");
  REQUIRE(cases.size() >= 4);
  std::printf("\n%-24s | %-9s | %-19s | %s\n", "case", "torch form", "forward err / bound",
              "backward err / bound");
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
      const char* form = suffix.empty() ? "quadratic" : "cumsum";
      ParityErrors fwd, bwd;
      fwd.add("out", out, f.read(c + "/out" + suffix), f.read(c + "/out64"));
      for (size_t i = 0; i < in.size(); ++i) {
        const std::string g = c + "/g_" + names[i];
        bwd.add("gradient of " + names[i], in[i].grad(), f.read(g + suffix), f.read(g + "64"));
      }
      for (auto [p, floor] : {std::pair{&fwd, kFloorForward}, std::pair{&bwd, kFloorBackward}}) {
        INFO(p->worst << " vs torch's " << form << " form: vs float64 " << p->vs_exact
                      << ", vs torch " << p->vs_torch << ", torch's own " << p->torch_own
                      << ", bound " << p->bound(floor));
        CHECK(p->within(floor));
      }
      std::printf("%-24s | %-9s | %.2e / %.2e | %.2e / %.2e\n", c.c_str(), form,
                  std::max(fwd.vs_exact, fwd.vs_torch), fwd.bound(kFloorForward),
                  std::max(bwd.vs_exact, bwd.vs_torch), bwd.bound(kFloorBackward));
    }
  }
}
