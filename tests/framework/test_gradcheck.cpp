// Every differentiable op in framework/ops/ops.hpp against central finite differences
// (tests/gradcheck.hpp explains the method and the default tolerances). At exit a table of the
// largest errors per case is printed for the documentation.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"

using namespace tri;
using gradcheck::Options;
using gradcheck::param;
using V = std::vector<Tensor>;

namespace {

struct Row {
  std::string name;
  double max_abs, max_rel;
  bool ok;
};

// Collects one row per checked case and prints them when the program ends, whichever cases ran.
struct Table {
  std::vector<Row> rows;
  ~Table() {
    if (rows.empty()) return;
    size_t w = 2;
    for (const Row& r : rows) w = std::max(w, r.name.size());
    std::printf("\n%-*s | max abs err | max rel err\n", int(w), "op");
    std::printf("%s-|-------------|------------\n", std::string(w, '-').c_str());
    for (const Row& r : rows)
      std::printf("%-*s | %11.2e | %11.2e%s\n", int(w), r.name.c_str(), r.max_abs, r.max_rel,
                  r.ok ? "" : "  FAILED");
  }
};
Table g_table;

gradcheck::Result expect_grads(const std::string& name, const V& inputs, const gradcheck::Fn& f,
                               const Options& opt = {}) {
  gradcheck::Result r = gradcheck::check(f, inputs, opt);
  g_table.rows.push_back({name, r.max_abs(), r.max_rel(), r.ok()});
  INFO(name << "\n" << r.summary());
  CHECK(r.ok());
  return r;
}

// A smaller step for strongly curved functions: 1/b, x^-1.5 and log near 0.3 have third
// derivatives up to ~100 on the domains below, and so do normalisations of short rows. eps 3e-3
// keeps the truncation error |f'''| eps^2 / 6 below 2e-4; the noise, ~1e-7 / (2 eps), stays
// near 2e-5.
Options small_step() {
  Options o;
  o.eps = 3e-3;
  return o;
}

// Binary element-wise op over same shapes and every broadcasting pattern. `b_lo` > 0 keeps b's
// magnitude in [b_lo, 2] with a random sign (div).
void check_binary(const char* name, Tensor (*op)(const Tensor&, const Tensor&), float b_lo = 0.f,
                  const Options& opt = {}) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {3, 4}},     // same shape
      {{3, 4}, {4}},        // row vector
      {{3, 4}, {3, 1}},     // column
      {{3, 4}, {1}},        // a single value
      {{3, 1}, {1, 4}},     // both sides broadcast
      {{4}, {2, 3, 4}},     // a broadcasts over b's leading dims
      {{2, 3, 4}, {3, 1}},  // 3-D against 2-D
  };
  uint64_t seed = 100;
  for (const auto& [sa, sb] : cases) {
    Tensor a = param(sa, ++seed), b = param(sb, ++seed);
    if (b_lo > 0.f) {
      Tensor mag = gradcheck::uniform(sb, ++seed, b_lo, 2.f);
      for (int64_t i = 0; i < b.numel(); ++i)
        b.data()[i] = b.data()[i] < 0 ? -mag.data()[i] : mag.data()[i];
    }
    expect_grads(std::string(name) + " " + sa.str() + " " + sb.str(), {a, b},
                 [op](const V& in) { return op(in[0], in[1]); }, opt);
  }
}

// Unary op on [4, 5] values in [lo, hi), kept 0.05 away from 0: the kink of relu and elu, so
// no difference straddles it (harmless for the smooth ops).
using UnaryFn = std::function<Tensor(const Tensor&)>;
void check_unary(const std::string& name, float lo, float hi, const UnaryFn& op,
                 const Options& opt = {}) {
  Tensor x = param({4, 5}, 7, lo, hi);
  gradcheck::nudge_away(x, 0.f, 0.05f);
  expect_grads(name, {x}, [op](const V& in) { return op(in[0]); }, opt);
}

}  // namespace

TEST_CASE("gradcheck: matmul, every transpose, 2-D, batched with shared b, batched-batched") {
  const int64_t M = 3, K = 4, N = 5;
  const char* layouts[] = {"2-D", "batched, shared b", "batched-batched"};
  // A matrix [rows, cols] (stored transposed when `t`) behind the leading dims `lead`.
  auto shape = [](std::vector<int64_t> lead, bool t, int64_t rows, int64_t cols) {
    lead.push_back(t ? cols : rows);
    lead.push_back(t ? rows : cols);
    return Shape(lead);
  };
  for (int layout = 0; layout < 3; ++layout)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const std::vector<int64_t> none, batch = {2, 3};
        Tensor a = param(shape(layout == 0 ? none : batch, ta, M, K), 11 + layout);
        Tensor b = param(shape(layout == 2 ? batch : none, tb, K, N), 21 + ta + 2 * tb);
        std::string name = std::string("matmul ") + layouts[layout] + (ta ? " a^T" : " a");
        expect_grads(name + (tb ? " b^T" : " b"), {a, b},
                     [ta, tb](const V& in) { return matmul(in[0], in[1], ta, tb); });
      }
}

TEST_CASE("gradcheck: linear with and without bias") {
  Tensor x = param({2, 3, 4}, 1), w = param({5, 4}, 2), b = param({5}, 3);
  expect_grads("linear with bias", {x, w, b},
               [](const V& in) { return linear(in[0], in[1], in[2]); });
  expect_grads("linear no bias", {x, w}, [](const V& in) { return linear(in[0], in[1]); });
}

TEST_CASE("gradcheck: gelu_linear, and the bits of linear(gelu(h))") {
  Tensor h = param({2, 3, 4}, 4), w = param({5, 4}, 5), b = param({5}, 6);
  expect_grads("gelu_linear with bias", {h, w, b},
               [](const V& in) { return gelu_linear(in[0], in[1], in[2]); });
  expect_grads("gelu_linear no bias", {h, w}, [](const V& in) { return gelu_linear(in[0], in[1]); });
  // h also read by a later op: its gradient already holds that op's part when gelu_linear's
  // backward adds its own (the other branch of the backward).
  expect_grads("gelu_linear, h read twice", {h, w, b},
               [](const V& in) { return add(gelu_linear(in[0], in[1], in[2]), linear(in[0], in[1])); });
  // Large enough for the threaded loops; the fused op keeps every bit of the composition.
  Tensor hb = param({64, 40, 48}, 7), wb = param({24, 48}, 8), bb = param({24}, 9), g = param({64, 40, 24}, 10);
  for (const bool h_read_twice : {false, true}) {
    CAPTURE(h_read_twice);
    auto grads = [&](bool fused) {
      for (Tensor* t : {&hb, &wb, &bb}) t->impl()->grad.reset();
      Tensor out = fused ? gelu_linear(hb, wb, bb) : linear(gelu(hb), wb, bb);
      if (h_read_twice) out = add(out, linear(hb, wb));
      backward(sum(mul(out, g)));
      return std::vector<Tensor>{out, hb.grad(), wb.grad(), bb.grad()};
    };
    const std::vector<Tensor> fused = grads(true), composed = grads(false);
    for (size_t i = 0; i < fused.size(); ++i) {
      REQUIRE(fused[i].numel() == composed[i].numel());
      CHECK(std::memcmp(fused[i].data(), composed[i].data(), sizeof(float) * size_t(fused[i].numel())) == 0);
    }
  }
}

TEST_CASE("gradcheck: linear and gelu_linear with a residual, and the bits of add(r, linear(..))") {
  Tensor x = param({2, 3, 4}, 31), w = param({5, 4}, 32), b = param({5}, 33), r = param({2, 3, 5}, 34);
  expect_grads("linear + residual", {x, w, b, r},
               [](const V& in) { return linear(in[0], in[1], in[2], in[3]); });
  expect_grads("gelu_linear + residual", {x, w, b, r},
               [](const V& in) { return gelu_linear(in[0], in[1], in[2], in[3]); });
  // The residual's gradient also gets a part from another op (as a block's x does through its
  // norm); large enough for the threaded loops.
  Tensor xb = param({64, 40, 48}, 35), wb = param({24, 48}, 36), bb = param({24}, 37),
         rb = param({64, 40, 24}, 38), g = param({64, 40, 24}, 39);
  for (const bool gelu_first : {false, true}) {
    CAPTURE(gelu_first);
    auto grads = [&](bool fused) {
      for (Tensor* t : {&xb, &wb, &bb, &rb}) t->impl()->grad.reset();
      const Tensor r2 = mul(rb, rb);
      Tensor out = gelu_first ? (fused ? gelu_linear(xb, wb, bb, r2) : add(r2, gelu_linear(xb, wb, bb)))
                              : (fused ? linear(xb, wb, bb, r2) : add(r2, linear(xb, wb, bb)));
      backward(sum(mul(out, g)));
      return std::vector<Tensor>{out, xb.grad(), wb.grad(), bb.grad(), rb.grad()};
    };
    const std::vector<Tensor> fused = grads(true), composed = grads(false);
    for (size_t i = 0; i < fused.size(); ++i) {
      REQUIRE(fused[i].numel() == composed[i].numel());
      CHECK(std::memcmp(fused[i].data(), composed[i].data(), sizeof(float) * size_t(fused[i].numel())) == 0);
    }
  }
  // The input as its own residual (square weight): its gradient takes both parts, and the
  // residual's part must not take the buffer the GEMMs read d out from.
  Tensor ws = param({48, 48}, 41), gs = param({64, 40, 48}, 42);
  for (const bool gelu : {false, true}) {
    CAPTURE(gelu);
    auto grads = [&](bool fused) {
      for (Tensor* t : {&xb, &ws, &bb}) t->impl()->grad.reset();
      const Tensor x2 = mul(xb, xb);  // an intermediate: one without a gradient yet
      const Tensor bs = Tensor();
      Tensor out = gelu ? (fused ? gelu_linear(x2, ws, bs, x2) : add(x2, gelu_linear(x2, ws, bs)))
                        : (fused ? linear(x2, ws, bs, x2) : add(x2, linear(x2, ws, bs)));
      backward(sum(mul(out, gs)));
      return std::vector<Tensor>{out, xb.grad(), ws.grad()};
    };
    const std::vector<Tensor> fused = grads(true), composed = grads(false);
    for (size_t i = 0; i < fused.size(); ++i) {
      REQUIRE(fused[i].numel() == composed[i].numel());
      CHECK(std::memcmp(fused[i].data(), composed[i].data(), sizeof(float) * size_t(fused[i].numel())) == 0);
    }
  }
  CHECK_THROWS_WITH_AS(linear(x, w, b, param({2, 3, 4}, 40)),
                       "linear: residual [2, 3, 4] must have the output's shape [2, 3, 5]", Error);
}

TEST_CASE("gradcheck: add") { check_binary("add", tri::add); }
TEST_CASE("gradcheck: sub") { check_binary("sub", tri::sub); }
TEST_CASE("gradcheck: mul") { check_binary("mul", tri::mul); }
TEST_CASE("gradcheck: div") { check_binary("div", tri::div, 0.5f, small_step()); }

TEST_CASE("gradcheck: add_scalar, mul_scalar") {
  check_unary("add_scalar", -1, 1, [](const Tensor& x) { return add_scalar(x, 0.7f); });
  check_unary("mul_scalar", -1, 1, [](const Tensor& x) { return mul_scalar(x, -1.3f); });
}

TEST_CASE("gradcheck: pow_scalar") {
  // A real exponent needs x > 0; an integer one takes either sign.
  for (float p : {2.5f, -1.5f, 0.5f}) {
    char name[32];
    std::snprintf(name, sizeof name, "pow_scalar x^%g", p);
    check_unary(name, 0.5f, 2.f, [p](const Tensor& x) { return pow_scalar(x, p); },
                small_step());
  }
  check_unary("pow_scalar x^3", -1.5f, 1.5f, [](const Tensor& x) { return pow_scalar(x, 3.f); });
}

TEST_CASE("gradcheck: gelu") {
  check_unary("gelu", -4, 4, [](const Tensor& x) { return gelu(x); });
}
TEST_CASE("gradcheck: silu") {
  check_unary("silu", -4, 4, [](const Tensor& x) { return silu(x); });
}
TEST_CASE("gradcheck: elu") {
  check_unary("elu", -3, 3, [](const Tensor& x) { return elu(x, 1.f); });
  // alpha != 1: the derivative jumps at 0, which check_unary keeps away from.
  check_unary("elu alpha 0.5", -3, 3, [](const Tensor& x) { return elu(x, 0.5f); });
}
TEST_CASE("gradcheck: elu_plus_one, and it equals elu(x) + 1") {
  check_unary("elu_plus_one", -3, 3, [](const Tensor& x) { return elu_plus_one(x); });
  Tensor x = Tensor::from(Shape{5}, {-20.f, -1.5f, -1e-3f, 1e-3f, 2.f});
  Tensor fused = elu_plus_one(x), composed = add_scalar(elu(x, 1.f), 1.f);
  for (int64_t i = 0; i < 5; ++i) CHECK(fused.data()[i] == doctest::Approx(composed.data()[i]).epsilon(1e-6));
}

TEST_CASE("gradcheck: softplus") {
  check_unary("softplus", -6, 6, [](const Tensor& x) { return softplus(x); });
  // Above PyTorch's threshold 20 the op is linear.
  check_unary("softplus x > 20", 21, 25, [](const Tensor& x) { return softplus(x); });
}
TEST_CASE("gradcheck: exp") {
  check_unary("exp", -2, 2, [](const Tensor& x) { return tri::exp(x); });
}
TEST_CASE("gradcheck: log") {
  check_unary("log", 0.3f, 3, [](const Tensor& x) { return tri::log(x); }, small_step());
}
TEST_CASE("gradcheck: sigmoid") {
  check_unary("sigmoid", -5, 5, [](const Tensor& x) { return sigmoid(x); });
}
TEST_CASE("gradcheck: relu") {
  check_unary("relu", -2, 2, [](const Tensor& x) { return relu(x); });
}
TEST_CASE("gradcheck: tanh") {
  check_unary("tanh", -3, 3, [](const Tensor& x) { return tri::tanh(x); });
}

TEST_CASE("gradcheck: sum and mean over axes, keepdim") {
  const std::vector<std::vector<int>> axes = {{}, {0}, {1}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};
  Tensor x = param({2, 3, 4}, 5);
  for (const auto& ax : axes)
    for (bool keep : {false, true}) {
      std::string a;
      for (int i : ax) {
        if (!a.empty()) a += ',';
        a += std::to_string(i);
      }
      const std::string suffix = " axes {" + a + "}" + (keep ? " keepdim" : "");
      expect_grads("sum" + suffix, {x}, [ax, keep](const V& in) { return sum(in[0], ax, keep); });
      expect_grads("mean" + suffix, {x}, [ax, keep](const V& in) { return mean(in[0], ax, keep); });
    }
}

TEST_CASE("gradcheck: reshape") {
  expect_grads("reshape", {param({2, 3, 4}, 1)},
               [](const V& in) { return reshape(in[0], Shape{4, 6}); });
}

TEST_CASE("gradcheck: permute") {
  Tensor x = param({2, 3, 4, 5}, 2);
  expect_grads("permute {2,0,3,1}", {x}, [](const V& in) { return permute(in[0], {2, 0, 3, 1}); });
  expect_grads("permute {0,1,3,2}", {x}, [](const V& in) { return permute(in[0], {0, 1, 3, 2}); });
}

TEST_CASE("gradcheck: transpose") {
  Tensor x = param({2, 3, 4}, 3);
  expect_grads("transpose 0,2", {x}, [](const V& in) { return transpose(in[0], 0, 2); });
  expect_grads("transpose -1,-2", {x}, [](const V& in) { return transpose(in[0], -1, -2); });
}

TEST_CASE("gradcheck: slice on axis 0 and inner axes") {
  Tensor x = param({4, 3, 5}, 4);
  expect_grads("slice axis 0", {x}, [](const V& in) { return slice(in[0], 0, 1, 3); });
  expect_grads("slice axis 1", {x}, [](const V& in) { return slice(in[0], 1, 1, 2); });
  expect_grads("slice axis -1", {x}, [](const V& in) { return slice(in[0], -1, 2, 5); });
}

TEST_CASE("gradcheck: concat") {
  Tensor a = param({2, 3, 4}, 5), b = param({2, 2, 4}, 6), c = param({2, 1, 4}, 7);
  Tensor d = param({1, 3, 4}, 8), e = param({2, 3, 2}, 9);
  expect_grads("concat axis 1", {a, b, c}, [](const V& in) { return concat(in, 1); });
  expect_grads("concat axis 0", {a, d}, [](const V& in) { return concat(in, 0); });
  expect_grads("concat axis -1", {a, e}, [](const V& in) { return concat(in, -1); });
}

TEST_CASE("gradcheck: embedding with repeated ids") {
  // The ids are not differentiable: only the weight is an input. Ids 2 and 4 are unused, so
  // their rows must get a zero gradient.
  IntTensor ids({2, 4}, {3, 1, 3, 0, 5, 3, 1, 1});
  expect_grads("embedding", {param({6, 3}, 1)},
               [ids](const V& in) { return embedding(in[0], ids); });
}

TEST_CASE("gradcheck: layer_norm with and without affine") {
  const Options opt = small_step();  // rows of 8: one element moves the row's statistics a lot
  Tensor x = param({3, 4, 8}, 1, -2, 2), w = param({8}, 2, 0.5f, 1.5f), b = param({8}, 3);
  expect_grads("layer_norm affine", {x, w, b},
               [](const V& in) { return layer_norm(in[0], in[1], in[2]); }, opt);
  expect_grads("layer_norm weight only", {x, w},
               [](const V& in) { return layer_norm(in[0], in[1], Tensor()); }, opt);
  expect_grads("layer_norm no affine", {x},
               [](const V& in) { return layer_norm(in[0], Tensor(), Tensor()); }, opt);
}

TEST_CASE("gradcheck: rms_norm with and without weight") {
  const Options opt = small_step();
  Tensor x = param({3, 4, 8}, 4, -2, 2), w = param({8}, 5, 0.5f, 1.5f);
  expect_grads("rms_norm weight", {x, w}, [](const V& in) { return rms_norm(in[0], in[1]); }, opt);
  expect_grads("rms_norm no weight", {x},
               [](const V& in) { return rms_norm(in[0], Tensor()); }, opt);
}

TEST_CASE("gradcheck: l2_norm") {
  const Options opt = small_step();
  Tensor x = param({3, 4, 8}, 6, -2, 2);
  expect_grads("l2_norm", {x}, [](const V& in) { return l2_norm(in[0]); }, opt);
  expect_grads("l2_norm, large eps", {x}, [](const V& in) { return l2_norm(in[0], 0.5f); }, opt);
}

TEST_CASE("gradcheck: softmax") {
  expect_grads("softmax", {param({3, 4, 7}, 1, -3, 3)}, [](const V& in) { return softmax(in[0]); });
}

TEST_CASE("gradcheck: log_softmax") {
  expect_grads("log_softmax", {param({3, 4, 7}, 2, -3, 3)},
               [](const V& in) { return log_softmax(in[0]); });
}

TEST_CASE("gradcheck: cross_entropy with ignored targets") {
  // The mean over 8 scored rows makes gradients ~1/8 at most: a tighter atol matches them, and
  // the scalar loss's rounding, ~2e-7 / (2 eps), stays near 1e-5.
  Options opt;
  opt.atol = 1e-4;
  IntTensor targets({2, 5}, {3, kIgnoreIndex, 0, 6, 6, kIgnoreIndex, 2, 1, 5, 4});
  gradcheck::Result r =
      expect_grads("cross_entropy", {param({2, 5, 7}, 3, -3, 3)},
                   [targets](const V& in) { return cross_entropy(in[0], targets); }, opt);
  CHECK(r.inputs[0].elements == 70);
}

TEST_CASE("cross_entropy: runs of unscored rows across the threads' rows; 1 and 2 threads") {
  // 301 rows of 97 logits (threaded), scored in short stretches between runs of unscored rows,
  // the first and last rows unscored. Unscored rows get exact zeros; scored rows get
  // (softmax - onehot) / count; the bits do not depend on the thread count; a second backward adds.
  const int64_t rows = 301, V = 97;
  std::vector<int32_t> t(static_cast<size_t>(rows));
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool scored = r > 0 && r < rows - 1 && (r / 7) % 3 == 0;
    t[size_t(r)] = scored ? int32_t((r * 13) % V) : kIgnoreIndex;
    count += scored;
  }
  const IntTensor targets(Shape{rows}, t);
  Tensor x = param({rows, V}, 5, -3, 3);
  auto grad = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    x.impl()->grad.reset();
    {  // freed memory of the gradient's size, dirty: a new gradient buffer may reuse it
      Tensor dirty = Tensor::empty(Shape{rows, V});
      std::fill(dirty.data(), dirty.data() + dirty.numel(), NAN);
    }
    backward(cross_entropy(x, targets));
    omp_set_num_threads(before);
    return x.grad().clone();
  };
  const Tensor one = grad(1), two = grad(2);
  CHECK(std::memcmp(one.data(), two.data(), sizeof(float) * size_t(one.numel())) == 0);
  int64_t wrong = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * V;
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(double(xr[j]));
    for (int64_t j = 0; j < V; ++j) {
      const float got = one.data()[r * V + j];
      if (t[size_t(r)] == kIgnoreIndex) {
        wrong += got != 0.f;
        continue;
      }
      const double want = (std::exp(double(xr[j])) / z - (j == t[size_t(r)])) / double(count);
      wrong += std::fabs(got - want) > 1e-6 / double(count);  // a float softmax: ~1e-7 relative
    }
  }
  CHECK(wrong == 0);
  backward(cross_entropy(x, targets));  // into the existing gradient: now twice the first
  int64_t not_twice = 0;
  for (int64_t i = 0; i < one.numel(); ++i) not_twice += x.grad().data()[i] != one.data()[i] + one.data()[i];
  CHECK(not_twice == 0);
}

TEST_CASE("gradcheck: dropout with a fixed seed") {
  // Same (seed, counter) in every evaluation: the same mask, so the op is linear in x.
  Tensor x = param({4, 16}, 4);
  expect_grads("dropout p=0.3", {x}, [](const V& in) { return dropout(in[0], 0.3f, true, 42, 7); });
  // And the mask really drops: some outputs are zero where inputs are not.
  NoGradGuard no_grad;
  Tensor y = dropout(x, 0.3f, true, 42, 7);
  int zeros = 0;
  for (int64_t i = 0; i < y.numel(); ++i) zeros += y.data()[i] == 0.f;
  CHECK(zeros > 5);
  CHECK(zeros < 40);
}

TEST_CASE("gradcheck: causal_conv1d") {
  Tensor x = param({2, 6, 3}, 1), w = param({3, 1, 4}, 2), b = param({3}, 3);
  auto conv = [](const V& in) {
    return causal_conv1d(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
  };
  expect_grads("causal_conv1d", {x, w, b}, conv);
  expect_grads("causal_conv1d no bias", {x, w}, conv);
  // Kernel longer than the sequence: every tap before t = 0 reads zeros.
  expect_grads("causal_conv1d K > T", {x, param({3, 1, 8}, 4), b}, conv);
}

TEST_CASE("gradcheck: taylor_features") {
  // Quadratic in x: central differences are exact up to rounding, so the default tolerances hold.
  auto phi = [](const V& in) { return taylor_features(in[0]); };
  expect_grads("taylor_features F=4", {param({2, 3, 4}, 1)}, phi);
  expect_grads("taylor_features F=1", {param({5, 1}, 2)}, phi);
}

TEST_CASE("gradcheck: mul_silu") {
  expect_grads("mul_silu", {param({3, 7}, 1), param({3, 7}, 2, -4, 4)},
               [](const V& in) { return mul_silu(in[0], in[1]); });
}

TEST_CASE("gradcheck: causal_conv1d_silu") {
  Tensor x = param({2, 6, 3}, 1), w = param({3, 1, 4}, 2), b = param({3}, 3);
  auto conv = [](const V& in) {
    return causal_conv1d_silu(in[0], in[1], in.size() > 2 ? in[2] : Tensor());
  };
  expect_grads("causal_conv1d_silu", {x, w, b}, conv);
  expect_grads("causal_conv1d_silu no bias", {x, w}, conv);
  expect_grads("causal_conv1d_silu K > T", {x, param({3, 1, 8}, 4), b}, conv);
}

TEST_CASE("gradcheck: ops on permuted and sliced inputs") {
  Tensor x = param({2, 4, 3}, 1), w = param({5, 4}, 2), y = param({6, 3, 4}, 3);
  expect_grads("linear(permute(x))", {x, w},
               [](const V& in) { return linear(permute(in[0], {0, 2, 1}), in[1]); });
  expect_grads("matmul(transpose(x), slice0(y)^T)", {x, y}, [](const V& in) {
    return matmul(transpose(in[0], 1, 2), slice(in[1], 0, 2, 4), false, true);
  });
  expect_grads("softmax(slice1(y))", {y},
               [](const V& in) { return softmax(slice(in[0], 1, 1, 3)); });
  expect_grads(
      "layer_norm(slice0(y))", {y},
      [](const V& in) { return layer_norm(slice(in[0], 0, 3, 6), Tensor(), Tensor()); },
      small_step());
  expect_grads("exp(reshape(slice0(y)))", {y},
               [](const V& in) { return tri::exp(reshape(slice(in[0], 0, 1, 2), Shape{12})); });
  expect_grads("mul(slice0, slice0) offset views", {y},
               [](const V& in) { return mul(slice(in[0], 0, 0, 3), slice(in[0], 0, 3, 6)); });
}

TEST_CASE("gradcheck: an input used twice accumulates its gradient") {
  Tensor x = param({3, 4}, 1);
  expect_grads("mul(x, x)", {x}, [](const V& in) { return mul(in[0], in[0]); });
  expect_grads("add(x, slice0(x))", {x},
               [](const V& in) { return add(in[0], slice(in[0], 0, 1, 2)); });
  expect_grads("matmul(x, x^T)", {x},
               [](const V& in) { return matmul(in[0], in[0], false, true); });
  expect_grads("concat(x, x)", {x}, [](const V& in) { return concat({in[0], in[0]}, 1); });
  expect_grads("x * sigmoid(x) + x", {x},
               [](const V& in) { return add(mul(in[0], sigmoid(in[0])), in[0]); });
}

TEST_CASE("gradcheck: a larger input checks a random subset") {
  Options opt;
  opt.max_checked = 150;
  gradcheck::Result r =
      expect_grads("tanh(linear) subset of [64, 48]", {param({64, 48}, 9), param({32, 48}, 10)},
                   [](const V& in) { return tri::tanh(linear(in[0], in[1])); }, opt);
  CHECK(r.inputs[0].elements == 150);
  CHECK(r.inputs[1].elements == 150);
}

TEST_CASE("gradcheck: large inputs take the threaded paths") {
  // Above ~16k-32k elements the ops split rows across threads: check those code paths too.
  // Each evaluation runs the whole forward, so a few dozen elements per input keep this fast.
  Options opt;
  opt.max_checked = 40;
  Tensor x = param({80, 520}, 11, -2, 2), w = param({520}, 12, 0.5f, 1.5f), b = param({520}, 13);
  expect_grads("large: gelu(layer_norm(x)) + softmax(x)", {x, w, b}, [](const V& in) {
    return add(gelu(layer_norm(in[0], in[1], in[2])), softmax(in[0]));
  }, opt);
  // Softmax over 520 values: outputs ~1/520, scaled back to unit size so errors show above atol.
  expect_grads("large: softmax(x) * 520", {x},
               [](const V& in) { return mul_scalar(softmax(in[0]), 520.f); }, opt);
  expect_grads("large: silu(rms_norm(x))", {x, w},
               [](const V& in) { return silu(rms_norm(in[0], in[1])); }, opt);
  // A nudge moves the float32 log-sum-exp (~6, ulp 5e-7) shared by a row of 520 outputs: its
  // rounding, times sum(w) ~ 13, gives fd noise ~1e-5 / (2 eps). eps 3e-2 keeps that near
  // 2e-4; the truncation error, ~|sum(w)| * p * eps^2 / 6 with p < 0.01, stays below 2e-5.
  Options wide = opt;
  wide.eps = 3e-2;
  expect_grads("large: log_softmax(x)", {x}, [](const V& in) { return log_softmax(in[0]); }, wide);
  Tensor u = param({4, 100, 50}, 14), k = param({50, 1, 4}, 15), c = param({50}, 16);
  expect_grads("large: causal_conv1d", {u, k, c},
               [](const V& in) { return causal_conv1d(in[0], in[1], in[2]); }, opt);
  expect_grads("large: causal_conv1d_silu", {u, k, c},
               [](const V& in) { return causal_conv1d_silu(in[0], in[1], in[2]); }, opt);
  // A full reduction rounds one float32 total of ~1e2: with a step of 0.5 (exact, the sum is
  // linear) its rounding error 1e-5 stays far below the unit gradients.
  Options linear_opt = opt;
  linear_opt.eps = 0.5;
  expect_grads("large: sum(x) full reduction", {param({300, 300}, 17)},
               [](const V& in) { return sum(in[0]); }, linear_opt);
}

TEST_CASE("gradcheck: the checker catches a wrong gradient") {
  // A deliberately wrong backward (d/dx x^2 taken as x): the checker must report it.
  Tensor x = param({3, 3}, 2, 0.5f, 1.5f);
  auto wrong_square = [](const V& in) {
    Tensor sg = in[0].clone();  // x with no history: the recorded path sees only mul(x, const)
    return mul(in[0], grad_enabled() ? sg : in[0]);
  };
  gradcheck::Result r = gradcheck::check(wrong_square, {x});
  CHECK_FALSE(r.ok());
  CHECK(r.inputs[0].failed == 9);
  // A function that computes something else when recorded is reported too.
  r = gradcheck::check([](const V& in) { return mul_scalar(in[0], grad_enabled() ? 2.f : 1.f); },
                       {x});
  CHECK_FALSE(r.forward_matches);
  CHECK_FALSE(r.ok());
}
