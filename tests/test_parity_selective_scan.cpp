// The selective scan against PyTorch: tests/torch/gen_selective_scan.py runs mamba_ssm's
// selective_scan_ref (ported to the project, channels-first) and writes TORCH_REF_DIR/
// selective_scan.h5 in our channels-last layout: inputs, the output, an upstream gradient gout
// and torch's gradients of sum(out * gout). Both the fused kernel and the naive port must match.
// Prints a table "case | kernel | tensor | err" to stdout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "framework/autograd.hpp"
#include "framework/h5.hpp"
#include "framework/ops.hpp"
#include "framework/selective_scan.hpp"

using namespace tri;

namespace {

// err = max|a - b| / max|b|, relative to the reference's scale. Both sides are float32 and
// follow the same recurrence; they differ by the exp/softplus implementations (a few ulp) and
// the order of sums over N, channels and time (dA, dD, delta_bias sum up to 300 terms).
constexpr double kTol = 1e-5;

const char* kInputs[] = {"u", "delta", "A", "B", "C", "D", "z", "delta_bias"};

double rel_err(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num = std::max(num, std::fabs(double(a.data()[i]) - b.data()[i]));
    den = std::max(den, std::fabs(double(b.data()[i])));
  }
  return den > 0 ? num / den : num;
}

}  // namespace

TEST_CASE("selective scan matches PyTorch's selective_scan_ref: output and every gradient") {
  const H5File f(std::string(TORCH_REF_DIR) + "/selective_scan.h5", H5File::Mode::read);
  const std::vector<std::string> cases = f.list("/");
  REQUIRE(cases.size() >= 5);
  std::printf("%-16s | %-6s | %-10s | %s\n", "case", "kernel", "tensor", "err");
  for (const std::string& name : cases) {
    const std::string g = "/" + name;
    const bool softplus = f.attr_int(g, "softplus") != 0;
    for (bool fused : {true, false}) {
      std::vector<Tensor> in;
      for (const char* k : kInputs) {
        const std::string path = g + "/" + k;
        in.push_back(f.exists(path) ? f.read(path) : Tensor());
        if (in.back().defined()) in.back().requires_grad_(true);
      }
      const Tensor out = fused ? selective_scan(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], softplus)
                               : selective_scan_naive(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], softplus);
      backward(sum(mul(out, f.read(g + "/gout"))));
      const char* kernel = fused ? "fused" : "naive";
      CAPTURE(name);
      CAPTURE(kernel);
      const double out_err = rel_err(out, f.read(g + "/out"));
      std::printf("%-16s | %-6s | %-10s | %.2e\n", name.c_str(), kernel, "out", out_err);
      CHECK(out_err < kTol);
      for (size_t k = 0; k < in.size(); ++k) {
        if (!in[k].defined()) continue;
        CAPTURE(kInputs[k]);
        REQUIRE(in[k].grad().defined());
        const double err = rel_err(in[k].grad(), f.read(g + "/grad_" + kInputs[k]));
        std::printf("%-16s | %-6s | %-10s | %.2e\n", name.c_str(), kernel, kInputs[k], err);
        CHECK(err < kTol);
      }
    }
  }
}
