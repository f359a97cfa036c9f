// The Mamba mixer against its PyTorch twin (tests/torch/mamba_ref.py, a port of mamba_ssm's
// Mamba with selective_scan_ref), in each SSM mode. tests/torch/gen_mamba.py writes
// TORCH_REF_DIR/mamba.h5: per mode the state_dict, an input x, an upstream gradient gout, the
// output and the gradients of sum(out * gout) with respect to x and every parameter.
// Here the same weights are loaded by name, the same loss is back-propagated and every tensor
// is compared: err = max|ours - torch| / max|torch|, which must stay <= 1e-4 (float32 through
// three GEMMs, a conv and a 24-step recurrence, summed in other orders than torch's).
// Prints a table "mode | tensor | max|torch| | err".
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "framework/autograd.hpp"
#include "framework/h5.hpp"
#include "framework/ops.hpp"
#include "framework/state_io.hpp"
#include "models/mamba.hpp"

using namespace tri;

namespace {

constexpr double kTol = 1e-4;

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.tolist()) m = std::max(m, double(std::fabs(v)));
  return m;
}

// max|a - b| / max|b|; shapes must agree.
double rel_err(const Tensor& ours, const Tensor& ref) {
  REQUIRE(ours.shape() == ref.shape());
  double d = 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    d = std::max(d, double(std::fabs(ours.data()[i] - ref.data()[i])));
  const double scale = max_abs(ref);
  return scale > 0 ? d / scale : d;
}

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

  auto row = [&](const std::string& name, const Tensor& ours, const Tensor& ref) {
    REQUIRE_MESSAGE(ours.defined(), mode << ": no gradient for " << name);
    const double err = rel_err(ours, ref);
    std::printf("%-13s %-18s %10.3e  %9.2e%s\n", mode.c_str(), name.c_str(), max_abs(ref), err,
                err <= kTol ? "" : "  FAIL");
    CHECK_MESSAGE(err <= kTol, mode << " " << name << ": err " << err);
  };
  row("out", out, f.read(g + "/out"));
  row("grad x", x.grad(), f.read(g + "/grad_x"));
  for (const Parameter& p : m.parameters()) row(p.name, p.tensor.grad(), f.read(g + "/grads/" + p.name));
}

}  // namespace

TEST_CASE("Mamba mixer matches PyTorch: output and every gradient, in each SSM mode") {
  H5File f(std::string(TORCH_REF_DIR) + "/mamba.h5", H5File::Mode::read);
  const std::vector<std::string> modes = f.list("/");
  CHECK(modes == std::vector<std::string>{"hippo_legs", "lti_s4d_real", "s4d_lin", "selective"});
  std::printf("%-13s %-18s %10s  %9s   (tolerance %.0e)\n", "mode", "tensor", "max|torch|", "err", kTol);
  for (const std::string& mode : modes) check_mode(f, mode);
}
