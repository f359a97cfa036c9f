// The GEMM ops (matmul, linear) under --precision bf16 against PyTorch (tests/torch/gen_ops_bf16.py,
// ops_bf16.h5): forward output and input gradients, each as a relative RMS error (compare.hpp),
//   - against float64 on the bf16-rounded inputs (the rule trilemma implements: bf16 inputs,
//     float32 sums; a backward GEMM rounds d out too): float32 summation error only;
//   - against float64 on the float32 inputs, no larger than torch.autocast's own error there
//     (autocast also rounds each output to bf16; trilemma keeps it float32).
// Prints a table "case | tensor | err vs rule | err vs exact | autocast's err vs exact".
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/gemm_bf16.hpp"
#include "framework/runtime/runtime.hpp"
#include "tests/compare.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

// Against the rule's float64 result: float32 sums of K <= 512 exact bf16 products, in oneDNN's
// blocked order, and a bias's gradient summed in another order: measured at most 1.3e-7 on AMX,
// margin 15 (AVX2's and AVX-512's kernels, the parity variants, sum in other orders).
constexpr double kRuleTol = 2e-6;
// Against the exact result, at most autocast's error there times this: both are dominated by
// the inputs' bf16 rounding (2.3e-3 to 2.9e-3 relative); trilemma's lacks the output rounding,
// measured 0.78-0.84 of autocast's; 1.0 leaves the margin of that rounding.
constexpr double kVsAutocast = 1.0;

Tensor run_op(const H5File& f, const std::string& g, const std::vector<Tensor>& in) {
  const std::string op = f.attr_string(g, "op");
  if (op == "matmul") return matmul(in[0], in[1], f.attr_int(g, "trans_a") != 0, f.attr_int(g, "trans_b") != 0);
  if (op == "linear") return linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
  throw Error("no runner for op '" + op + "'");
}

}  // namespace

TEST_CASE("GEMM ops under bf16 against PyTorch: the rule exactly, and no less accurate than autocast") {
  const std::string missing = bf16_unavailable_reason();
  if (!missing.empty()) {
    MESSAGE("this CPU lacks " << missing << ": bf16 parity was not run here (test_gemm_bf16 checks the refusal)");
    return;
  }
  H5File f(torch_ref("ops_bf16.h5"), H5File::Mode::read);
  std::printf("\n| case | tensor | err vs rule | err vs exact | autocast's err vs exact |\n|---|---|---|---|---|\n");
  int cases = 0;
  for (const std::string& name : f.list("/")) {
    const std::string g = "/" + name;
    std::vector<Tensor> in;
    for (int i = 0; f.exists(g + "/in" + std::to_string(i)); ++i) {
      in.push_back(f.read(g + "/in" + std::to_string(i)));
      in.back().requires_grad_();
    }
    set_gemm_precision(Precision::bf16);
    const Tensor out = run_op(f, g, in);
    backward(sum(mul(out, f.read(g + "/gout"))));  // d out = gout exactly
    set_gemm_precision(Precision::fp32);
    auto check = [&](const std::string& tensor, const Tensor& got) {
      const Tensor rule = f.read(g + "/" + tensor + "r"), exact = f.read(g + "/" + tensor + "64"),
                   autocast = f.read(g + "/" + tensor + "_ac");
      const double vs_rule = rms_err(got, rule), vs_exact = rms_err(got, exact), ac = rms_err(autocast, exact);
      std::printf("| %s | %s | %.1e | %.2e | %.2e |\n", name.c_str(), tensor.c_str(), vs_rule, vs_exact, ac);
      CAPTURE(name);
      CAPTURE(tensor);
      CHECK(vs_rule <= kRuleTol);
      CHECK(vs_exact <= kVsAutocast * ac);
    };
    check("out", out);
    for (size_t i = 0; i < in.size(); ++i) check("gin" + std::to_string(i), in[i].grad());
    ++cases;
  }
  std::fflush(stdout);
  CHECK(cases >= 8);
}
