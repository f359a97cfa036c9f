// framework/optim/optim.hpp without PyTorch: the update formulas against float64
// re-implementations, parameter groups, skipped parameters, clipping, schedules, checkpoint
// state, thread-count independence and argument checking.
// (tests/framework/test_parity_optim.cpp compares against torch.optim itself.)
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/optim/optim.hpp"
#include "framework/core/rng.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

Tensor random_tensor(const Shape& s, uint64_t seed, float scale = 1.0f) {
  Tensor t = Tensor::empty(s);
  Rng rng(seed);
  for (int64_t i = 0; i < t.numel(); i++) t.data()[i] = scale * float(rng.normal());
  return t;
}

Parameter make_param(const std::string& name, const Shape& s, bool decay, uint64_t seed) {
  Tensor t = random_tensor(s, seed);
  t.requires_grad_();
  return {name, t, decay};
}

void set_grad(const Parameter& p, const Tensor& g) {
  std::copy(g.data(), g.data() + g.numel(), p.tensor.grad_data());
}

// Gradient of parameter i at update `step`: the same for every copy of a parameter list.
Tensor grad_at(const Parameter& p, size_t i, int step, float scale = 1.0f) {
  return random_tensor(p.tensor.shape(), seed_mix(1000 + step, i), scale);
}

void set_grads(const std::vector<Parameter>& params, int step, float scale = 1.0f) {
  for (size_t i = 0; i < params.size(); i++) set_grad(params[i], grad_at(params[i], i, step, scale));
}

std::vector<Parameter> deep_copy(const std::vector<Parameter>& params) {
  std::vector<Parameter> out;
  for (const Parameter& p : params) {
    Tensor t = p.tensor.clone();
    t.requires_grad_();
    out.push_back({p.name, t, p.decay});
  }
  return out;
}

std::vector<double> to_double(const Tensor& t) { return {t.data(), t.data() + t.numel()}; }

double max_rel_diff(const Tensor& got, const std::vector<double>& want) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < got.numel(); i++) {
    diff = std::max(diff, std::fabs(got.data()[i] - want[size_t(i)]));
    scale = std::max(scale, std::fabs(want[size_t(i)]));
  }
  return diff / scale;
}

double grad_norm64(const std::vector<Parameter>& params) {
  double s = 0;
  for (const Parameter& p : params) {
    if (!p.tensor.grad().defined()) continue;
    for (float g : p.tensor.grad().tolist()) s += double(g) * g;
  }
  return std::sqrt(s);
}

// The message of the Error that fn throws ("" if it throws none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// fn throws a one-line Error naming every fragment.
void check_error(const std::function<void()>& fn, std::initializer_list<const char*> fragments) {
  const std::string msg = error_of(fn);
  CAPTURE(msg);
  CHECK(!msg.empty());
  CHECK(msg.find('\n') == std::string::npos);
  for (const char* f : fragments) CHECK(msg.find(f) != std::string::npos);
}

}  // namespace

TEST_CASE("AdamW and SGD follow their formulas (float64 re-implementations)") {
  // w spans several update blocks (1024 elements) and ends in a ragged one.
  const std::vector<Parameter> init = {make_param("w", {37, 61}, true, 1),
                                       make_param("b", {7}, false, 2)};
  constexpr int kSteps = 4;

  SUBCASE("AdamW, weight decay on w only") {
    const double lr = 0.05;
    AdamWOptions o;
    o.weight_decay = 0.3;
    std::vector<Parameter> params = deep_copy(init);
    AdamW opt(params, lr, o);
    for (int t = 1; t <= kSteps; t++) {
      set_grads(params, t);
      opt.step();
    }
    CHECK(opt.step_count() == kSteps);
    for (size_t j = 0; j < init.size(); j++) {
      std::vector<double> p = to_double(init[j].tensor), m(p.size()), v(p.size());
      const double wd = init[j].decay ? o.weight_decay : 0.0;
      for (int t = 1; t <= kSteps; t++) {
        const Tensor g = grad_at(init[j], j, t);
        for (size_t i = 0; i < p.size(); i++) {
          const double gi = g.data()[i];
          p[i] -= lr * wd * p[i];
          m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
          v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
          const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(o.beta2, t)) + o.eps;
          p[i] -= lr / (1 - std::pow(o.beta1, t)) * m[i] / denom;
        }
      }
      CAPTURE(init[j].name);
      CHECK(max_rel_diff(params[j].tensor, p) <= 1e-6);
      CHECK(max_rel_diff(opt.exp_avg(init[j].name), m) <= 1e-6);
      CHECK(max_rel_diff(opt.exp_avg_sq(init[j].name), v) <= 1e-6);
      CHECK(opt.state().at(init[j].name).step == kSteps);
    }
  }

  SUBCASE("SGD with momentum and weight decay on w only, with dampening or nesterov") {
    for (bool nesterov : {false, true}) {
      CAPTURE(nesterov);
      const double lr = 0.1;
      SGDOptions o;
      o.momentum = 0.9;
      o.dampening = nesterov ? 0.0 : 0.2;
      o.weight_decay = 0.05;
      o.nesterov = nesterov;
      std::vector<Parameter> params = deep_copy(init);
      SGD opt(params, lr, o);
      for (int t = 1; t <= kSteps; t++) {
        set_grads(params, t);
        opt.step();
      }
      for (size_t j = 0; j < init.size(); j++) {
        std::vector<double> p = to_double(init[j].tensor), buf(p.size());
        const double wd = init[j].decay ? o.weight_decay : 0.0;
        for (int t = 1; t <= kSteps; t++) {
          const Tensor g = grad_at(init[j], j, t);
          for (size_t i = 0; i < p.size(); i++) {
            double d = g.data()[i] + wd * p[i];
            buf[i] = t == 1 ? d : o.momentum * buf[i] + (1 - o.dampening) * d;
            d = nesterov ? d + o.momentum * buf[i] : buf[i];
            p[i] -= lr * d;
          }
        }
        CAPTURE(init[j].name);
        CHECK(max_rel_diff(params[j].tensor, p) <= 1e-6);
        CHECK(max_rel_diff(opt.momentum_buffer(init[j].name), buf) <= 1e-6);
      }
    }
  }
}

TEST_CASE("decay=false parameters are not decayed; zero-grad and grad-less parameters") {
  // A zero gradient on a fresh state makes the update itself exactly 0: only decay acts.
  std::vector<Parameter> params = {make_param("w", {4, 3}, true, 3),
                                   make_param("norm", {3}, false, 4),
                                   make_param("unused", {6}, true, 5)};
  const std::vector<Parameter> before = deep_copy(params);
  for (int k = 0; k < 2; k++) set_grad(params[k], Tensor::zeros(params[k].tensor.shape()));
  const uint64_t w_version = params[0].tensor.version();
  const uint64_t unused_version = params[2].tensor.version();
  std::unique_ptr<Optimizer> opt;
  double decay_factor = 0;

  SUBCASE("AdamW") {
    AdamWOptions o;
    o.weight_decay = 0.5;
    opt = std::make_unique<AdamW>(params, 0.1, o);
    decay_factor = 1 - 0.1 * o.weight_decay;
  }
  SUBCASE("SGD") {  // without momentum, which would accumulate the decay term itself
    SGDOptions o;
    o.weight_decay = 0.5;
    opt = std::make_unique<SGD>(params, 0.1, o);
    decay_factor = 1 - 0.1 * o.weight_decay;
  }
  const std::string name = opt->name();
  CAPTURE(name);
  for (int k = 0; k < 3; k++) opt->step();
  const double want = std::pow(decay_factor, 3);
  for (int64_t i = 0; i < params[0].tensor.numel(); i++)
    CHECK(params[0].tensor.data()[i] == doctest::Approx(before[0].tensor.data()[i] * want).epsilon(1e-6));
  CHECK(params[0].tensor.version() > w_version);  // in-place writes are visible to autograd
  CHECK(bit_equal(params[1].tensor, before[1].tensor));
  // No grad: skipped entirely (as PyTorch skips p.grad is None).
  CHECK_FALSE(params[2].tensor.grad().defined());
  CHECK(bit_equal(params[2].tensor, before[2].tensor));
  CHECK(params[2].tensor.version() == unused_version);
  CHECK(opt->state().count("unused") == 0);
  CHECK(opt->state().at("w").step == 3);
  CHECK(opt->step_count() == 3);
}

TEST_CASE("a parameter that first gets a grad later counts its own AdamW steps") {
  std::vector<Parameter> params = {make_param("early", {9}, true, 6), make_param("late", {9}, true, 7)};
  const std::vector<Parameter> late_alone = deep_copy({params[1]});
  AdamW opt(params);
  AdamW opt_alone(late_alone);
  set_grad(params[0], grad_at(params[0], 0, 0));
  opt.step();  // "late" has no grad yet
  CHECK(opt.state().count("late") == 0);
  CHECK_FALSE(opt.exp_avg("late").defined());
  for (int t = 1; t <= 3; t++) {
    set_grads(params, t);
    set_grad(late_alone[0], grad_at(params[1], 1, t));
    opt.step();
    opt_alone.step();
  }
  // Bias corrections use the parameter's own count (3), not the number of step() calls (4).
  CHECK(opt.step_count() == 4);
  CHECK(opt.state().at("early").step == 4);
  CHECK(opt.state().at("late").step == 3);
  CHECK(bit_equal(params[1].tensor, late_alone[0].tensor));
}

TEST_CASE("clip_grad_norm returns the norm and scales to max_norm") {
  std::vector<Parameter> params = {make_param("a", {40, 3}, true, 8), make_param("b", {17}, false, 9),
                                   make_param("no_grad", {5}, true, 10)};
  set_grad(params[0], grad_at(params[0], 0, 0, 3.0f));
  set_grad(params[1], grad_at(params[1], 1, 0, 3.0f));
  const double norm = grad_norm64(params);
  const Tensor ga = params[0].tensor.grad().clone(), gb = params[1].tensor.grad().clone();

  SUBCASE("no clipping when the norm is below max_norm, or max_norm <= 0") {
    for (double max_norm : {2 * norm, norm, 0.0, -1.0}) {
      CAPTURE(max_norm);
      CHECK(clip_grad_norm(params, max_norm) == doctest::Approx(norm).epsilon(1e-12));
      CHECK(bit_equal(params[0].tensor.grad(), ga));
      CHECK(bit_equal(params[1].tensor.grad(), gb));
    }
  }
  SUBCASE("clipping") {
    const double max_norm = norm / 4;
    CHECK(clip_grad_norm(params, max_norm) == doctest::Approx(norm).epsilon(1e-12));
    CHECK(grad_norm64(params) == doctest::Approx(max_norm).epsilon(1e-6));
    // Every element scaled by the same factor: the direction is kept.
    const float coef = float(max_norm / (norm + 1e-6));
    for (int64_t i = 0; i < ga.numel(); i++) CHECK(params[0].tensor.grad().data()[i] == ga.data()[i] * coef);
    for (int64_t i = 0; i < gb.numel(); i++) CHECK(params[1].tensor.grad().data()[i] == gb.data()[i] * coef);
  }
  CHECK_FALSE(params[2].tensor.grad().defined());  // ignored, not given a grad
  std::vector<Parameter> none = {params[2]};
  CHECK(clip_grad_norm(none, 1.0) == 0.0);
}

TEST_CASE("results do not depend on the thread count") {
  // Above the one-thread threshold (2^15 elements), with a ragged tail.
  auto run = [](int threads, double* norm) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<Parameter> params = {make_param("big", {301, 257}, true, 11)};
    AdamW opt(params);
    for (int t = 0; t < 2; t++) {
      set_grads(params, t, 5.0f);
      *norm = clip_grad_norm(params, 1.0);
      opt.step();
    }
    omp_set_num_threads(saved);
    return params[0].tensor.clone();
  };
  double norm1 = 0, norm2 = 0;
  const Tensor one = run(1, &norm1), two = run(2, &norm2);
  CHECK(bit_equal(one, two));
  CHECK(norm1 == norm2);
}

TEST_CASE("optimizer state restores exactly: identical next steps") {
  for (int kind = 0; kind < 2; kind++) {
    auto make = [&](const std::vector<Parameter>& params) -> std::unique_ptr<Optimizer> {
      if (kind == 0) return std::make_unique<AdamW>(params);
      SGDOptions o;
      o.momentum = 0.9;
      o.weight_decay = 0.01;
      return std::make_unique<SGD>(params, 0.05, o);
    };
    std::vector<Parameter> a = {make_param("x", {6, 5}, true, 12), make_param("y", {5}, false, 13)};
    auto opt_a = make(a);
    const std::string name = opt_a->name();
    CAPTURE(name);
    for (int t = 0; t < 3; t++) {
      set_grads(a, t);
      opt_a->step();
    }
    // A resumed copy: parameters and optimizer state restored from opt_a's.
    std::vector<Parameter> b = deep_copy(a);
    auto opt_b = make(b);
    for (const auto& [name, st] : opt_a->state()) opt_b->restore_state(name, st);
    opt_b->set_step_count(opt_a->step_count());
    CHECK(opt_b->state().size() == opt_a->state().size());
    for (int t = 3; t < 5; t++) {
      set_grads(a, t);
      set_grads(b, t);
      opt_a->step();
      opt_b->step();
    }
    for (size_t j = 0; j < a.size(); j++) {
      CHECK(bit_equal(a[j].tensor, b[j].tensor));
      for (const std::string& slot : opt_a->slot_names())
        CHECK(bit_equal(opt_a->slot(a[j].name, slot), opt_b->slot(b[j].name, slot)));
    }
    CHECK(opt_b->step_count() == 5);
  }
}

TEST_CASE("bad optimizer arguments and state throw one-line errors") {
  std::vector<Parameter> params = {make_param("w", {3, 2}, true, 14)};
  auto adamw = [&](auto edit) {
    AdamWOptions o;
    edit(o);
    return [o, &params] { AdamW opt(params, kDefaultLr, o); };
  };
  check_error([&] { AdamW opt(params, -1); }, {"lr", "-1"});
  check_error([&] { AdamW opt(params, NAN); }, {"lr", "nan"});
  check_error(adamw([](AdamWOptions& o) { o.beta1 = 1.0; }), {"beta1", "1", "< 1"});
  check_error(adamw([](AdamWOptions& o) { o.beta2 = -0.1; }), {"beta2", "-0.1"});
  check_error(adamw([](AdamWOptions& o) { o.eps = -1e-8; }), {"eps", "-1e-08"});
  check_error(adamw([](AdamWOptions& o) { o.weight_decay = -0.5; }), {"weight_decay", "-0.5"});

  auto sgd = [&](auto edit) {
    SGDOptions o;
    edit(o);
    return [o, &params] { SGD opt(params, kDefaultLr, o); };
  };
  check_error(sgd([](SGDOptions& o) { o.momentum = -0.9; }), {"momentum", "-0.9"});
  check_error(sgd([](SGDOptions& o) { o.nesterov = true; }), {"nesterov", "momentum = 0"});
  check_error(sgd([](SGDOptions& o) {
                o.nesterov = true;
                o.momentum = 0.9;
                o.dampening = 0.1;
              }),
              {"nesterov", "dampening = 0.1"});

  check_error([] { AdamW opt({}); }, {"empty parameter list"});
  check_error([&] { AdamW opt({params[0], params[0]}); }, {"'w'", "twice"});

  AdamW opt(params);
  check_error([&] { opt.set_lr(-0.5); }, {"lr", "-0.5"});
  check_error([&] { opt.set_step_count(-2); }, {"step count", "-2"});
  ParamState good;
  good.slots["exp_avg"] = Tensor::zeros({3, 2});
  good.slots["exp_avg_sq"] = Tensor::zeros({3, 2});
  opt.restore_state("w", good);
  check_error([&] { opt.restore_state("v", good); }, {"unknown parameter 'v'"});
  ParamState wrong_shape = good;
  wrong_shape.slots["exp_avg_sq"] = Tensor::zeros({2, 3});
  check_error([&] { opt.restore_state("w", wrong_shape); }, {"'w'", "exp_avg_sq", "[2, 3]", "[3, 2]"});
  ParamState missing;
  missing.slots["exp_avg"] = Tensor::zeros({3, 2});
  check_error([&] { opt.restore_state("w", missing); }, {"'w'", "exp_avg, exp_avg_sq"});

  Parameter odd = make_param("odd", {4}, true, 15);
  odd.tensor.impl()->grad = Tensor::zeros({5}).ptr();
  AdamW opt_odd({odd});
  check_error([&] { opt_odd.step(); }, {"'odd'", "[5]", "[4]"});
}

TEST_CASE("LrSchedule: warm-up, constant and cosine endpoints, monotonicity") {
  const double base = 1e-3, min_lr = 1e-5;
  SUBCASE("constant") {
    LrSchedule s("constant", base, 10, 100);
    CHECK(s.lr_at(0) == doctest::Approx(base / 10));
    CHECK(s.lr_at(4) == doctest::Approx(base * 5 / 10));
    CHECK(s.lr_at(9) == base);
    CHECK(s.lr_at(10) == base);
    CHECK(s.lr_at(1000) == base);
    for (int64_t t = 1; t < 200; t++) CHECK(s.lr_at(t) >= s.lr_at(t - 1));
    CHECK(LrSchedule("constant", base, 0, 100).lr_at(0) == base);
  }
  SUBCASE("cosine") {
    LrSchedule s("cosine", base, 10, 110, min_lr);
    CHECK(s.lr_at(0) == doctest::Approx(base / 10));
    CHECK(s.lr_at(10) == base);                                       // progress 0
    CHECK(s.lr_at(60) == doctest::Approx((base + min_lr) / 2));       // progress 1/2
    CHECK(s.lr_at(35) == doctest::Approx(min_lr + (base - min_lr) * (1 + std::sqrt(0.5)) / 2));
    CHECK(s.lr_at(110) == doctest::Approx(min_lr).epsilon(1e-12));    // progress 1
    CHECK(s.lr_at(5000) == doctest::Approx(min_lr).epsilon(1e-12));   // clamped
    for (int64_t t = 1; t < 10; t++) CHECK(s.lr_at(t) > s.lr_at(t - 1));
    for (int64_t t = 11; t < 200; t++) CHECK(s.lr_at(t) <= s.lr_at(t - 1));
    CHECK(LrSchedule("cosine", base, 0, 50).lr_at(0) == base);
    CHECK(s.describe().find("cosine") != std::string::npos);
  }
  SUBCASE("wsd: warm-up, the full rate, then linearly to min_lr over the last share") {
    LrSchedule s("wsd", base, 10, 100, min_lr, 0.2);
    CHECK(s.decay_start() == 80);
    CHECK(s.lr_at(0) == doctest::Approx(base / 10));
    for (int64_t t = 10; t < 80; ++t) CHECK(s.lr_at(t) == base);
    CHECK(s.lr_at(90) == doctest::Approx((base + min_lr) / 2));      // half way through the decay
    CHECK(s.lr_at(99) == doctest::Approx(min_lr + (base - min_lr) / 20));
    CHECK(s.lr_at(100) == min_lr);
    CHECK(s.lr_at(5000) == min_lr);
    for (int64_t t = 81; t <= 100; ++t) CHECK(s.lr_at(t) < s.lr_at(t - 1));
    // The decay never starts inside the warm-up; a share of 0 is the constant schedule.
    CHECK(LrSchedule("wsd", base, 50, 100, 0, 0.9).decay_start() == 50);
    CHECK(LrSchedule("wsd", base, 0, 100, 0, 0).lr_at(99) == base);
    CHECK(s.describe().find("decay_start=80") != std::string::npos);
  }
}

TEST_CASE("LrSchedule rejects bad arguments") {
  check_error([] { LrSchedule("linear", 1e-3, 0, 10); }, {"'linear'", "constant, cosine, wsd"});
  check_error([] { LrSchedule("wsd", 1e-3, 0, 10, 0, 1.5); }, {"decay_fraction = 1.5", "0..1"});
  check_error([] { LrSchedule("cosine", -1e-3, 0, 10); }, {"base_lr", "-0.001"});
  check_error([] { LrSchedule("cosine", 1e-3, 0, 10, 1e-2); }, {"min_lr", "0.01"});
  check_error([] { LrSchedule("cosine", 1e-3, 0, 10, -1e-5); }, {"min_lr", "-1e-05"});
  check_error([] { LrSchedule("constant", 1e-3, 20, 10); }, {"warmup_steps = 20", "total_steps = 10"});
  check_error([] { LrSchedule("constant", 1e-3, -1, 10); }, {"warmup_steps = -1"});
  check_error([] { LrSchedule("constant", 1e-3, 0, -5); }, {"total_steps = -5"});
  check_error([] { LrSchedule("constant", 1e-3, 0, 10).lr_at(-1); }, {"step = -1"});
}
