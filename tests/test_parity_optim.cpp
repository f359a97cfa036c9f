// framework/optim.hpp against torch.optim: tests/torch/gen_optim.py writes
// TORCH_REF_DIR/optim.h5 with initial parameters, a fixed sequence of gradients and, for
// each optimizer run, the parameters after every update (and clip_grad_norm_'s norms and
// clipped gradients where the run clips). Here the same gradients are replayed through the
// C++ optimizer, built from the run's stored hyperparameters, and every parameter is
// compared after every update.
// err = max|ours - torch| / max|torch| per tensor; the bound on parameters is 1e-6 (a few
// float32 ulp). clip_grad_norm sums squares in double: its norm must equal a float64 sum to
// 1e-12, while torch's float32 sum over ~41k squares is itself off by up to ~1e-6, so the
// norm and the clipped gradients are held to 2e-6 against torch.
// Prints per run the worst errors and the fraction of parameter elements that are
// bit-identical to torch's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "framework/h5.hpp"
#include "framework/optim.hpp"

using namespace tri;

namespace {

constexpr double kTol = 1e-6;
constexpr double kClipTol = 2e-6;
constexpr double kNorm64Tol = 1e-12;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  return out;
}

// Worst error of one tensor, and how many of its elements are bit-identical.
struct Compare {
  double err = 0;
  int64_t same = 0, total = 0;
  void add(const Tensor& got, const Tensor& want) {
    REQUIRE(got.shape() == want.shape());
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < want.numel(); i++) {
      diff = std::max(diff, std::fabs(double(got.data()[i]) - want.data()[i]));
      scale = std::max(scale, std::fabs(double(want.data()[i])));
      same += got.data()[i] == want.data()[i];
    }
    total += want.numel();
    err = std::max(err, scale > 0 ? diff / scale : diff);
    last = scale > 0 ? diff / scale : diff;
  }
  double last = 0;  // error of the latest tensor
};

std::vector<Parameter> initial_params(const H5File& f, const std::vector<std::string>& names) {
  std::vector<Parameter> params;
  for (const auto& name : names) {
    Tensor t = f.read("/init/" + name);
    t.requires_grad_();
    params.push_back({name, t, f.attr_int("/init/" + name, "decay") != 0});
  }
  return params;
}

// Gives each parameter update k's gradient, or no gradient where torch had p.grad = None.
void set_grads(const H5File& f, int64_t k, std::vector<Parameter>& params) {
  for (Parameter& p : params) {
    const std::string path = "/grads/" + std::to_string(k) + "/" + p.name;
    if (!f.exists(path)) {
      p.tensor.impl()->grad.reset();
      continue;
    }
    Tensor g = f.read(path);
    std::copy(g.data(), g.data() + g.numel(), p.tensor.grad_data());
  }
}

std::unique_ptr<Optimizer> make_optimizer(const H5File& f, const std::string& run,
                                          std::vector<Parameter> params) {
  const std::string kind = f.attr_string(run, "optimizer");
  if (kind == "adamw") {
    AdamWOptions o;
    o.lr = f.attr_double(run, "lr");
    o.beta1 = f.attr_double(run, "beta1");
    o.beta2 = f.attr_double(run, "beta2");
    o.eps = f.attr_double(run, "eps");
    o.weight_decay = f.attr_double(run, "weight_decay");
    return std::make_unique<AdamW>(std::move(params), o);
  }
  REQUIRE(kind == "sgd");
  SGDOptions o;
  o.lr = f.attr_double(run, "lr");
  o.momentum = f.attr_double(run, "momentum");
  o.dampening = f.attr_double(run, "dampening");
  o.weight_decay = f.attr_double(run, "weight_decay");
  o.nesterov = f.attr_int(run, "nesterov") != 0;
  return std::make_unique<SGD>(std::move(params), o);
}

}  // namespace

TEST_CASE("optimizers and clip_grad_norm match torch step by step") {
  H5File f(TORCH_REF_DIR "/optim.h5", H5File::Mode::read);
  const int64_t steps = f.attr_int("/", "steps");
  const std::vector<std::string> names = split(f.attr_string("/", "names"), ',');
  REQUIRE(steps > 0);
  REQUIRE(names.size() > 1);

  std::vector<std::string> runs;
  std::set<std::string> kinds;
  for (const auto& g : f.list("/"))
    if (f.has_attr("/" + g, "optimizer")) {
      runs.push_back("/" + g);
      kinds.insert(f.attr_string("/" + g, "optimizer"));
    }
  CHECK(kinds == std::set<std::string>{"adamw", "sgd"});

  std::printf("%-14s %-10s %-14s %-10s %s\n", "run", "param err", "bit-identical", "clip err",
              "norm err vs float64");
  for (const std::string& run : runs) {
    CAPTURE(run);
    std::vector<Parameter> params = initial_params(f, names);
    auto opt = make_optimizer(f, run, params);
    const double max_norm = f.attr_double(run, "max_norm");
    Compare param_cmp, clip_cmp;
    double norm64_err = 0;
    for (int64_t k = 0; k < steps; k++) {
      CAPTURE(k);
      set_grads(f, k, params);
      if (max_norm > 0) {
        const std::string clipped = run + "/clipped/" + std::to_string(k);
        const double norm = clip_grad_norm(params, max_norm);
        const double torch_norm = f.attr_double(clipped, "norm");
        const double norm64 = f.attr_double(clipped, "norm64");
        const double norm_err = std::fabs(norm - torch_norm) / torch_norm;
        CHECK(norm_err <= kClipTol);
        CHECK(std::fabs(norm - norm64) <= kNorm64Tol * norm64);
        norm64_err = std::max(norm64_err, std::fabs(norm - norm64) / norm64);
        clip_cmp.err = std::max(clip_cmp.err, norm_err);
        for (const Parameter& p : params) {
          const std::string path = clipped + "/" + p.name;
          CHECK(f.exists(path) == p.tensor.grad().defined());
          if (!f.exists(path)) continue;
          clip_cmp.add(p.tensor.grad(), f.read(path));
          CHECK_MESSAGE(clip_cmp.last <= kClipTol, p.name);
        }
      }
      opt->step();
      for (const Parameter& p : params) {
        param_cmp.add(p.tensor, f.read(run + "/" + std::to_string(k) + "/" + p.name));
        CHECK_MESSAGE(param_cmp.last <= kTol, p.name);
      }
    }
    CHECK(opt->step_count() == steps);
    char clip[32] = "-", norm64[32] = "-";
    if (max_norm > 0) {
      std::snprintf(clip, sizeof clip, "%.3g", clip_cmp.err);
      std::snprintf(norm64, sizeof norm64, "%.3g", norm64_err);
    }
    char same[32];
    std::snprintf(same, sizeof same, "%.3f%%", 100.0 * double(param_cmp.same) / double(param_cmp.total));
    std::printf("%-14s %-10.3g %-14s %-10s %s\n", run.c_str() + 1, param_cmp.err, same, clip, norm64);
  }
}
