// The selective scan against PyTorch: tests/torch/gen_selective_scan.py runs mamba_ssm's
// selective_scan_ref (ported to the project, channels-first) and writes selective_scan.h5 in
// our channels-last layout: inputs, the output, an upstream gradient gout and torch's
// gradients of sum(out * gout), in float32 and float64. Both the fused kernel and the naive
// port must match: relative RMS errors against torch float32 and float64 within
// max(kFloor, kOwnErrorFactor * torch's own) (tests/compare.hpp), the output alone and the
// gradients as one group. Prints a table "case | kernel | tensor | err" (the worse of vs
// float32 and vs float64) and per case and kernel the worst errors against their bounds.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/ops/ops.hpp"
#include "framework/kernels/selective_scan.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

// Both sides are float32 and follow the same recurrence; they differ by the exp/softplus
// implementations (a few ulp) and the order of sums over N, channels and time (dA, dD,
// delta_bias sum up to 300 terms): measured at most 4.5e-7 relative RMS, a margin of 22.
constexpr double kFloor = 1e-5;

const char* kInputs[] = {"u", "delta", "A", "B", "C", "D", "z", "delta_bias"};

}  // namespace

TEST_CASE("selective scan matches PyTorch's selective_scan_ref: output and every gradient") {
  const H5File f(torch_ref("selective_scan.h5"), H5File::Mode::read);
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
      ParityErrors outputs, grads;
      auto row = [&](ParityErrors& group, const char* tensor, const Tensor& ours,
                     const std::string& ref) {
        group.add(tensor, ours, f.read(ref), f.read(ref + "64"));
        std::printf("%-16s | %-6s | %-10s | %.2e\n", name.c_str(), kernel, tensor,
                    std::max(rms_err(ours, f.read(ref)), rms_err(ours, f.read(ref + "64"))));
      };
      row(outputs, "out", out, g + "/out");
      for (size_t k = 0; k < in.size(); ++k) {
        if (!in[k].defined()) continue;
        CAPTURE(kInputs[k]);
        REQUIRE(in[k].grad().defined());
        row(grads, kInputs[k], in[k].grad(), g + "/grad_" + kInputs[k]);
      }
      std::printf("%-16s | %-6s | output err / bound %.2e / %.2e, gradients %.2e / %.2e\n",
                  name.c_str(), kernel, std::max(outputs.vs_exact, outputs.vs_torch),
                  outputs.bound(kFloor), std::max(grads.vs_exact, grads.vs_torch), grads.bound(kFloor));
      for (const ParityErrors* e : {&outputs, &grads}) {
        INFO(e->worst << ": vs float64 " << e->vs_exact << ", vs torch " << e->vs_torch
                      << ", torch's own " << e->torch_own << ", bound " << e->bound(kFloor));
        CHECK(e->within(kFloor));
      }
    }
  }
}
