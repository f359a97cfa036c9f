// The Mamba mixer against its PyTorch twin (tests/torch/mamba_ref.py, a port of mamba_ssm's
// Mamba with selective_scan_ref), in each SSM mode. tests/torch/gen_mamba.py writes
// mamba.h5: per mode the state_dict, an input x, an upstream gradient gout, the output and the
// gradients of sum(out * gout) with respect to x and every parameter, in float32 and float64.
// Here the same weights are loaded by name, the same loss is back-propagated and every tensor
// is compared by relative RMS error against torch float32 and float64: the output, and the
// gradients as one group, within max(kFloor, kOwnErrorFactor * torch's own) (tests/compare.hpp).
// Prints a table "mode | tensor | rms|torch| | err vs float64 | err vs torch" and per mode the
// worst errors against their bounds.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/ops/ops.hpp"
#include "framework/io/state_io.hpp"
#include "models/mamba.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

// float32 through three GEMMs, a conv and a 24-step recurrence, summed in other orders than
// torch's: measured at most 7.2e-7 relative RMS, a margin of 14.
constexpr double kFloor = 1e-5;

void check_mode(const H5File& f, const std::string& mode) {
  const std::string g = "/" + mode;
  ModelConfig cfg = ModelConfig::of("mamba");
  cfg.d_model = f.attr_int(g, "d_model");
  MambaOptions& o = cfg.options<MambaOptions>();
  o.d_state = f.attr_int(g, "d_state");
  o.d_conv = f.attr_int(g, "d_conv");
  o.expand = f.attr_int(g, "expand");
  o.dt_rank = f.attr_int(g, "dt_rank");
  o.ssm_selective = f.attr_int(g, "selective") != 0;
  o.a_init = f.attr_string(g, "a_init");
  Rng rng(1);
  MambaMixer m(cfg, rng);
  load_parameters(f, m, g + "/params");  // every name and shape must match torch's state_dict

  Tensor x = f.read(g + "/x").requires_grad_();
  m.zero_grad();
  const Tensor out = m.forward(x);
  backward(sum(out * f.read(g + "/gout")));

  ParityErrors outputs, grads;
  auto row = [&](ParityErrors& group, const std::string& name, const Tensor& ours,
                 const std::string& ref32, const std::string& ref64) {
    REQUIRE_MESSAGE(ours.defined(), mode << ": no gradient for " << name);
    const Tensor torch32 = f.read(g + ref32), torch64 = f.read(g + ref64);
    group.add(name, ours, torch32, torch64);
    std::printf("%-13s %-18s %10.3e  %9.2e  %9.2e\n", mode.c_str(), name.c_str(), rms(torch64),
                rms_err(ours, torch64), rms_err(ours, torch32));
  };
  row(outputs, "out", out, "/out", "/out64");
  row(grads, "grad x", x.grad(), "/grad_x", "/grad_x64");
  for (const Parameter& p : m.parameters())
    row(grads, p.name, p.tensor.grad(), "/grads/" + p.name, "/grads64/" + p.name);
  std::printf("%-13s output err / bound %.2e / %.2e, gradients %.2e / %.2e\n", mode.c_str(),
              std::max(outputs.vs_exact, outputs.vs_torch), outputs.bound(kFloor),
              std::max(grads.vs_exact, grads.vs_torch), grads.bound(kFloor));
  for (const ParityErrors* e : {&outputs, &grads}) {
    INFO(mode << " " << e->worst << ": vs float64 " << e->vs_exact << ", vs torch " << e->vs_torch
              << ", torch's own " << e->torch_own << ", bound " << e->bound(kFloor));
    CHECK(e->within(kFloor));
  }
}

}  // namespace

TEST_CASE("Mamba mixer matches PyTorch: output and every gradient, in each SSM mode") {
  H5File f(torch_ref("mamba.h5"), H5File::Mode::read);
  const std::vector<std::string> modes = f.list("/");
  CHECK(modes == std::vector<std::string>{"hippo_legs", "lti_s4d_real", "s4d_lin", "selective"});
  std::printf("%-13s %-18s %10s  %9s  %9s\n", "mode", "tensor", "rms|torch|", "vs f64", "vs torch");
  for (const std::string& mode : modes) check_mode(f, mode);
}
