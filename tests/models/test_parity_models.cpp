// Whole language models against their PyTorch twins (tests/torch/models.py):
// tests/torch/gen_models.py writes models.h5, one group per configuration with the config,
// torch's initial weights, inputs and targets, the logits, the loss, every parameter's
// gradient and the parameters after 3 AdamW steps, computed by torch in float32 and again in
// float64 from the same weights (its docstring lists the layout). Here the LanguageModel is
// built from the stored config, torch's weights are loaded by name (state_io), and the same
// computation is repeated: logits, loss, backward, and 3 steps of framework/optim/optim.hpp's AdamW
// with the model's own weight-decay flags (which must equal the groups torch used).
//
// Logits, loss, gradients: relative RMS errors against torch float32 and float64 within
// max(kFloor, kOwnErrorFactor * torch's own error) (tests/compare.hpp), torch's own error taken
// as the worst over the configuration's tensors of the kind.
//
// Parameters after the steps, in units of the step: e = |p - p64| / (lr * steps), against the
// float64 run. Adam moves each element by m_hat / (sqrt(v_hat) + eps) <= ~1 lr per step, which
// for an element whose denominator is tiny amplifies float32 rounding of its gradient:
// with delta the tensor's float32 gradient error (torch's own, the largest over the tensor) and
// d the element's smallest denominator over the float64 run,
//   kappa = delta / d
// bounds how far rounding can move its update, in lr per step. Each element must satisfy
//   e <= kStepFloor + kappa.
// Elements with kappa >= kUnsettled are those float32 cannot settle (for the first update,
// Adam's step is the gradient's sign, and float32 cannot tell that sign): they are left out,
// and held on the float64 run's path after every update, because a coin-flipped element
// moves every later gradient of the model (torch's own unheld float32 run differs by up to
// 2.5e-3 steps on well-settled elements for that reason). Their number must stay below
// kMaxUnsettledFraction of the model, so the check never becomes vacuous.
//
// Why this cannot pass a wrong gradient: which elements are checked, and their bounds, come
// from torch's two runs only, never from ours. A wrong gradient gives a checked element the
// wrong sign or a wrong share of its running average, moving it by a sizeable part of a step
// (0.1 to 2) against a bound of kStepFloor + kappa < 0.1 + 1e-3; and the gradients themselves
// are compared at the first update, where a wrong gradient errs by >= 1e-3 relative RMS against
// a bound <= 4e-4. Adam is invariant to a constant factor on a gradient, so a gradient that is
// off by a constant factor moves the parameters as the right one does: the gradient check is
// the one that rejects it. The last test case demonstrates each of these.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <set>
#include <string>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/optim/optim.hpp"
#include "framework/io/state_io.hpp"
#include "models/lm.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

// Logits, loss, gradients: float32 through two blocks whose ops each agree with the exact
// result to ~1e-7 relative RMS (test_parity_ops): measured at most 1.5e-6 (gradients; all
// configurations but linear_relu, which torch's own error bounds), a margin of 6.7.
constexpr double kFloor = 1e-5;
// After the steps, in steps: measured at most 0.126 * (kStepFloor + kappa) on checked
// elements over oneDNN's ISAs, OpenBLAS's kernels and torch's (docs/TESTING.md), margin 7.9.
constexpr double kStepFloor = 1e-3;
// kappa from here on: float32 rounding may move the update by a tenth of a step or more.
constexpr double kUnsettled = 0.1;
// Measured at most 22 of 26304 (0.08%, linear_relu's dead and kinked units).
constexpr double kMaxUnsettledFraction = 0.01;
// A float32 gradient's error is never taken below one ulp of its largest element.
constexpr double kGradUlp = 1.2e-7;

// The group's attributes hold ModelConfig's fields under their C++ names (d_model, n_heads,
// ...; "family" is --model): read as config text through the same parser as a config file.
TextMap config_text(const H5File& f, const std::string& g) {
  TextMap text;
  for (const std::string& name : f.attr_names(g)) {
    std::string key = name == "family" ? "model" : name;
    std::replace(key.begin(), key.end(), '_', '-');
    try {
      text[key] = f.attr_string(g, name);
    } catch (const Error&) {
      try {
        text[key] = std::to_string(f.attr_int(g, name));
      } catch (const Error&) {
        text[key] = exact_number(f.attr_double(g, name));  // loss, lr: not config fields
      }
    }
  }
  return text;
}

ModelConfig config_from(const H5File& f, const std::string& g) {
  const TextMap text = config_text(f, g);
  ModelConfig c = ModelConfig::of(text.at("model"));
  read_text(c, text, false);
  c.vocab = f.attr_int(g, "vocab");
  return c;
}

IntTensor ints(const H5File& f, const std::string& path) {
  Shape s;
  std::vector<int32_t> v = f.read_ints(path, &s);
  return IntTensor(s, std::move(v));
}

// Per element of one parameter: kappa, from the references only (see the top of the file).
std::vector<double> update_conditioning(const H5File& f, const std::string& g,
                                        const std::string& name) {
  const Tensor g32 = f.read(g + "/grad/" + name), g64 = f.read(g + "/grad64/" + name);
  const Tensor denom = f.read(g + "/denom64/" + name);
  double delta = kGradUlp * max_abs(g64);
  for (int64_t i = 0; i < g64.numel(); ++i)
    delta = std::max(delta, std::fabs(double(g32.data()[i]) - double(g64.data()[i])));
  std::vector<double> kappa(size_t(denom.numel()), 0.0);  // 0: no gradient, nothing to round
  for (int64_t i = 0; i < denom.numel(); ++i)
    if (denom.data()[i] > 0) kappa[size_t(i)] = delta / denom.data()[i];
  return kappa;
}

// The parameters after the steps, in units of the step.
struct StepErrors {
  double worst = 0;      // max over checked elements of e / (kStepFloor + kappa): <= 1 passes
  double worst_e = 0;    // e at that element
  double max_e = 0;      // the largest e over checked elements
  std::string worst_name;
  int64_t unsettled = 0, total = 0;
  bool ok() const { return worst <= 1 && double(unsettled) <= kMaxUnsettledFraction * double(total); }
};

struct Result {
  ParityErrors logits, loss, grad;
  StepErrors after;
};

// A deliberate backward bug: rewrites one gradient after every backward (update k).
using GradientBug = std::function<void(int64_t k, const std::string& param, Tensor& grad)>;

Result run_case(const H5File& f, const std::string& g, const GradientBug& bug = {}) {
  const ModelConfig cfg = config_from(f, g);
  LanguageModel model(cfg, 1);
  load_parameters(f, model, g + "/model");
  for (const Parameter& p : model.parameters()) {
    INFO(g << ": " << p.name);
    CHECK(p.decay == (f.attr_int(g + "/model/" + p.name, "decay") != 0));
  }
  const IntTensor ids = ints(f, g + "/ids"), targets = ints(f, g + "/targets");
  auto apply_bug = [&](int64_t k) {
    if (!bug) return;
    for (const Parameter& p : model.parameters()) {
      Tensor grad = p.tensor.grad();
      bug(k, p.name, grad);
    }
  };

  Result r;
  Tensor logits = model.forward(ids);
  Tensor loss = cross_entropy(logits, targets);
  r.logits.add("logits", logits, f.read(g + "/logits"), f.read(g + "/logits64"));
  r.loss.add("loss", loss, Tensor::scalar(float(f.attr_double(g, "loss"))),
             Tensor::scalar(float(f.attr_double(g, "loss64"))));
  backward(loss);
  apply_bug(0);
  for (const Parameter& p : model.parameters()) {
    REQUIRE_MESSAGE(p.tensor.grad().defined(), g << ": no gradient for " << p.name);
    r.grad.add(p.name, p.tensor.grad(), f.read(g + "/grad/" + p.name),
               f.read(g + "/grad64/" + p.name));
  }

  std::vector<std::vector<double>> kappa;
  for (const Parameter& p : model.parameters()) kappa.push_back(update_conditioning(f, g, p.name));
  const double lr = f.attr_double(g, "lr");
  AdamWOptions opt;
  opt.weight_decay = f.attr_double(g, "weight_decay");
  AdamW adamw(model.parameters(), lr, opt);
  const int64_t steps = f.attr_int(g, "steps");
  for (int64_t k = 0; k < steps; ++k) {
    if (k > 0) {  // update 0 uses the gradients compared above
      model.zero_grad();
      backward(model.loss(ids, targets));
      apply_bug(k);
    }
    adamw.step();
    if (k + 1 == steps) break;
    size_t j = 0;  // hold the unsettled elements on the float64 path
    for (const Parameter& p : model.parameters()) {
      const Tensor path = f.read(g + "/path64/" + std::to_string(k + 1) + "/" + p.name);
      for (int64_t i = 0; i < path.numel(); ++i)
        if (kappa[j][size_t(i)] >= kUnsettled) p.tensor.data()[i] = path.data()[i];
      ++j;
    }
  }

  const double step = lr * double(steps);
  size_t j = 0;
  for (const Parameter& p : model.parameters()) {
    const Tensor exact = f.read(g + "/after64/" + p.name);
    const std::vector<double>& kap = kappa[j++];
    for (int64_t i = 0; i < exact.numel(); ++i) {
      ++r.after.total;
      if (kap[size_t(i)] >= kUnsettled) {
        ++r.after.unsettled;
        continue;
      }
      const double e = std::fabs(double(p.tensor.data()[i]) - double(exact.data()[i])) / step;
      r.after.max_e = std::max(r.after.max_e, e);
      const double ratio = e / (kStepFloor + kap[size_t(i)]);
      if (std::isnan(ratio) || ratio > r.after.worst)
        r.after.worst = ratio, r.after.worst_e = e, r.after.worst_name = p.name;
    }
  }
  return r;
}

// The failures of one configuration's result, one line each ("" if it passes).
std::string failures(const Result& r) {
  std::string out;
  auto parity = [&](const char* kind, const ParityErrors& e) {
    if (e.within(kFloor)) return;
    char line[256];
    std::snprintf(line, sizeof line, "%s: worst %s, rel. RMS error vs float64 %.2e, vs torch %.2e, "
                  "torch's own %.2e, bound %.2e\n", kind, e.worst.c_str(), e.vs_exact, e.vs_torch,
                  e.torch_own, e.bound(kFloor));
    out += line;
  };
  parity("logits", r.logits);
  parity("loss", r.loss);
  parity("gradients", r.grad);
  if (!r.after.ok()) {
    char line[256];
    std::snprintf(line, sizeof line, "after the steps: worst %s, %.2e steps = %.2f of its bound; "
                  "%lld of %lld elements unsettled\n", r.after.worst_name.c_str(), r.after.worst_e,
                  r.after.worst, (long long)r.after.unsettled, (long long)r.after.total);
    out += line;
  }
  return out;
}

}  // namespace

TEST_CASE("language models match PyTorch: logits, loss, gradients, 3 AdamW steps") {
  H5File f(torch_ref("models.h5"), H5File::Mode::read);
  std::set<std::string> covered;
  std::printf("relative RMS errors against float64 / their bounds; after 3 steps: largest error in "
              "steps, largest error / bound, unsettled elements\n");
  std::printf("%-31s | %-17s | %-17s | %-17s | %-8s | %-6s | %s\n", "config", "logits", "loss",
              "gradients", "steps", "/bound", "unsettled");
  for (const std::string& name : f.list("/")) {
    const std::string g = "/" + name;
    const ModelConfig cfg = config_from(f, g);
    TextMap text;
    write_text(cfg, text);
    covered.insert(cfg.family);
    if (cfg.hybrid()) covered.insert("hybrid " + cfg.name());
    if (cfg.family == "attention") covered.insert("attention pos " + cfg.pos);
    if (cfg.family == "attention" && text.at("window") != "0") covered.insert("attention window pos " + cfg.pos);
    if (cfg.family == "linear") covered.insert("linear " + text.at("feature-map"));
    if (cfg.family == "linear") covered.insert("linear pos " + cfg.pos);
    if (text.count("short-conv") && text.at("short-conv") != "0") covered.insert(cfg.family + " short-conv");
    if (text.count("conv-size")) covered.insert(cfg.family + (text.at("conv-size") != "0" ? " conv" : " no conv"));
    if (text.count("l2-norm") && text.at("l2-norm") == "0") covered.insert(cfg.family + " no l2-norm");
    if (text.count("state-gate") && text.at("state-gate") == "0") covered.insert(cfg.family + " no state-gate");
    if (text.count("output-gate") && text.at("output-gate") == "0") covered.insert(cfg.family + " no output-gate");
    if (cfg.family == "linear" && text.at("feature-dim") != "0") covered.insert("linear feature-dim");
    if (cfg.family == "mamba") covered.insert(text.at("ssm-selective") == "1" ? "mamba selective" : "mamba lti");
    if (cfg.family == "mamba2" && text.at("n-groups") != "1") covered.insert("mamba2 groups");
    covered.insert("norm " + cfg.norm);
    covered.insert("mlp " + cfg.mlp);
    if (cfg.tie_embeddings) covered.insert("tied");

    const Result r = run_case(f, g);
    std::printf("%-31s | %.1e / %.1e | %.1e / %.1e | %.1e / %.1e | %.2e | %6.3f | %lld\n",
                name.c_str(), r.logits.vs_exact, r.logits.bound(kFloor), r.loss.vs_exact,
                r.loss.bound(kFloor), r.grad.vs_exact, r.grad.bound(kFloor), r.after.max_e,
                r.after.worst, (long long)r.after.unsettled);
    CHECK_MESSAGE(failures(r).empty(), name << ":\n" << failures(r));
  }
  for (const char* need :
       {"attention", "linear", "mamba", "attention pos none", "attention pos sinusoidal",
        "attention pos learned", "attention pos rope", "attention pos alibi", "attention window pos none",
        "attention window pos sinusoidal", "attention window pos learned", "attention window pos rope",
        "attention window pos alibi", "linear elu",
        "linear relu", "linear identity", "linear taylor", "linear pos rope", "attention short-conv",
        "linear short-conv", "linear feature-dim", "mamba selective", "mamba lti", "norm pre",
        "norm post", "mlp none", "mlp gelu", "tied", "hybrid mamba+attention", "hybrid linear+attention",
        "deltanet", "deltanet conv", "deltanet no conv", "deltanet no l2-norm", "gated_deltanet",
        "gated_deltanet conv", "gated_deltanet no state-gate", "gated_deltanet no output-gate",
        "hybrid gated_deltanet+attention", "mamba2", "mamba2 groups", "hybrid mamba2+attention"}) {
    INFO("models.h5 has no case for " << need);
    CHECK(covered.count(need) == 1);
  }
}

// The criteria above must reject plausible backward bugs, injected into one parameter's
// gradient of linear_relu, the configuration with the loosest bounds (its relu features make
// torch's own float32 errors the largest).
TEST_CASE("the model parity criteria reject a wrong backward") {
  H5File f(torch_ref("models.h5"), H5File::Mode::read);
  const std::string g = "/linear_relu";
  REQUIRE(failures(run_case(f, g)).empty());
  auto report = [](const char* bug, const Result& r) {
    std::printf("%-34s gradients at %8.2f x their bound, steps at %8.2f x their bound\n", bug,
                1 / r.grad.margin(kFloor), r.after.worst);
  };

  SUBCASE("a transposed weight gradient (swapped trans flags in a square projection's backward)") {
    const Result r = run_case(f, g, [](int64_t, const std::string& name, Tensor& grad) {
      if (name != "backbone.layers.0.mixer.q_proj.weight") return;
      const Tensor right = grad.clone();
      const int64_t n = grad.size(0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) grad.data()[i * n + j] = right.data()[j * n + i];
    });
    report("transposed weight gradient:", r);
    CHECK_FALSE(r.grad.within(kFloor));
    CHECK_FALSE(r.after.ok());
  }
  SUBCASE("a gradient accumulated across updates (its buffer not zeroed between backwards)") {
    // Right at update 0, so only the steps can show it.
    Tensor previous;
    const Result r = run_case(f, g, [&](int64_t k, const std::string& name, Tensor& grad) {
      if (name != "backbone.layers.1.mlp.fc2.weight") return;
      if (k > 0)
        for (int64_t i = 0; i < grad.numel(); ++i) grad.data()[i] += previous.data()[i];
      previous = grad.clone();
    });
    report("gradient accumulated over updates:", r);
    CHECK(r.grad.within(kFloor));
    CHECK_FALSE(r.after.ok());
  }
  SUBCASE("a gradient off by a constant factor (a mean over the batch taken as a sum)") {
    // Adam divides the factor out (up to eps), so the steps cannot show it: the gradient check must.
    const Result r = run_case(f, g, [](int64_t, const std::string& name, Tensor& grad) {
      if (name != "backbone.norm_f.weight") return;
      for (int64_t i = 0; i < grad.numel(); ++i) grad.data()[i] *= 2;
    });
    report("gradient off by a factor of 2:", r);
    CHECK_FALSE(r.grad.within(kFloor));
    CHECK(r.after.ok());  // the steps alone would pass it
  }
}
