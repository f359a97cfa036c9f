// The tape's semantics: accumulation, no-grad scopes, what gets recorded, in-place
// modification of saved tensors, error messages, views, deep chains, and Module registration.
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/core/module.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"

using namespace tri;
using namespace trilemma_test;
using gradcheck::param;

namespace {


bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Every op of ops.hpp once, on x [2, 4, 6] and weights that require grad exactly when x does.
std::vector<Tensor> run_every_op(const Tensor& x) {
  const bool rg = x.requires_grad();
  auto like = [rg](const Shape& s, uint64_t seed) {
    Tensor t = gradcheck::uniform(s, seed, 0.5f, 1.5f);
    t.requires_grad_(rg);
    return t;
  };
  Tensor w = like({6}, 1), m = like({6, 5}, 2), lw = like({3, 6}, 3), lb = like({3}, 4),
         cw = like({6, 1, 3}, 5), emb = like({7, 6}, 6);
  IntTensor ids({2, 4}, {0, 1, 2, 3, 4, 5, 6, 0});
  IntTensor targets({2, 4}, {0, 5, kIgnoreIndex, 2, 1, 1, 3, 4});
  return {matmul(x, m), linear(x, lw, lb), add(x, w), sub(x, w), mul(x, w), tri::div(x, w),
          add_scalar(x, 1.f), mul_scalar(x, 2.f), pow_scalar(w, 1.5f), gelu(x), silu(x), elu(x),
          softplus(x), tri::exp(x), tri::log(w), sigmoid(x), relu(x), tri::tanh(x), sum(x, {1}),
          mean(x), reshape(x, Shape{8, 6}), permute(x, {2, 0, 1}), transpose(x, 0, 1),
          slice(x, 0, 1, 2), slice(x, 2, 1, 3), concat({x, x}, 1), embedding(emb, ids),
          layer_norm(x, w, w), rms_norm(x, w), l2_norm(x), softmax(x), log_softmax(x),
          cross_entropy(x, targets), dropout(x, 0.5f, true, 1, 2), causal_conv1d(x, cw, w), mul_silu(x, x)};
}

}  // namespace

TEST_CASE("autograd: gradients accumulate across uses and across backward calls") {
  clear_tape();
  Tensor x = param({5}, 1);
  // L = sum(x * x + 3x): dL/dx = 2x + 3, with x reached three times.
  auto step = [&] { backward(sum(add(mul(x, x), mul_scalar(x, 3.f)))); };
  step();
  REQUIRE(x.grad().defined());
  for (int64_t i = 0; i < 5; ++i)
    CHECK(x.grad().data()[i] == doctest::Approx(2 * x.data()[i] + 3).epsilon(1e-6));
  step();  // a second backward adds on top
  for (int64_t i = 0; i < 5; ++i)
    CHECK(x.grad().data()[i] == doctest::Approx(2 * (2 * x.data()[i] + 3)).epsilon(1e-6));
  x.zero_grad();
  for (int64_t i = 0; i < 5; ++i) CHECK(x.grad().data()[i] == 0.f);
  step();
  for (int64_t i = 0; i < 5; ++i)
    CHECK(x.grad().data()[i] == doctest::Approx(2 * x.data()[i] + 3).epsilon(1e-6));
  CHECK(tape_size() == 0);  // backward consumed the tape
}

TEST_CASE("autograd: NoGradGuard records nothing and nests") {
  clear_tape();
  Tensor x = param({3}, 2);
  CHECK(grad_enabled());
  {
    NoGradGuard outer;
    CHECK_FALSE(grad_enabled());
    Tensor y = tri::exp(mul(x, x));
    CHECK_FALSE(y.requires_grad());
    {
      NoGradGuard inner;
      CHECK_FALSE(grad_enabled());
    }
    CHECK_FALSE(grad_enabled());  // leaving the inner scope keeps the outer one in force
    Tensor z = linear(reshape(x, Shape{1, 3}), Tensor::full({2, 3}, 0.5f));
    CHECK_FALSE(z.requires_grad());
    CHECK(tape_size() == 0);
  }
  CHECK(grad_enabled());
  Tensor y = tri::exp(x);
  CHECK(y.requires_grad());
  CHECK(tape_size() == 1);
  clear_tape();
}

TEST_CASE("autograd: every op records one node exactly when an input needs grad") {
  clear_tape();
  Tensor x = gradcheck::uniform({2, 4, 6}, 11);
  for (const Tensor& y : run_every_op(x)) CHECK_FALSE(y.requires_grad());
  CHECK(tape_size() == 0);
  x.requires_grad_(true);
  {
    NoGradGuard no_grad;
    for (const Tensor& y : run_every_op(x)) CHECK_FALSE(y.requires_grad());
    CHECK(tape_size() == 0);
  }
  std::vector<Tensor> ys = run_every_op(x);
  for (const Tensor& y : ys) CHECK(y.requires_grad());
  CHECK(tape_size() == ys.size());
  clear_tape();
}

TEST_CASE("autograd: ops whose inputs need no grad are not recorded") {
  clear_tape();
  Tensor a = gradcheck::uniform({2, 3}, 1), b = gradcheck::uniform({3}, 2), w = param({3}, 3);
  Tensor c = softmax(add(mul(a, b), a));
  CHECK_FALSE(c.requires_grad());
  CHECK(tape_size() == 0);
  Tensor d = mul(c, w);  // one input needs grad: recorded
  CHECK(d.requires_grad());
  CHECK_FALSE(d.is_leaf());
  CHECK(tape_size() == 1);
  backward(sum(d));
  CHECK_FALSE(a.grad().defined());  // inputs that need no grad never get one
  CHECK_FALSE(c.grad().defined());
  for (int64_t j = 0; j < 3; ++j)
    CHECK(w.grad().data()[j] == doctest::Approx(c.data()[j] + c.data()[3 + j]).epsilon(1e-6));
}

TEST_CASE("autograd: a saved tensor modified in place makes backward fail, naming the op") {
  clear_tape();
  Tensor x = param({4}, 4), c = param({4}, 5);
  SUBCASE("the input of mul") {
    Tensor loss = sum(mul(x, c));
    c.fill_(2.f);
    std::string msg = error_of([&] { backward(loss); });
    CHECK(contains(msg, "'mul'"));
    CHECK(contains(msg, "modified in place"));
  }
  SUBCASE("the output of exp, which exp saves") {
    Tensor y = tri::exp(mul(x, c));  // mul is left unvisited on the failed tape
    Tensor loss = sum(y);
    y.fill_(0.f);
    std::string msg = error_of([&] { backward(loss); });
    CHECK(contains(msg, "'exp'"));
  }
  SUBCASE("a view of a saved tensor: views share the version counter") {
    Tensor loss = sum(mul(x, c));
    c.view(Shape{2, 2}).narrow0(1, 1).fill_(0.f);
    CHECK(contains(error_of([&] { backward(loss); }), "'mul'"));
  }
  // The failed backward leaves an empty tape and grad mode on: the next step runs and is right.
  CHECK(tape_size() == 0);
  CHECK(grad_enabled());
  x.zero_grad();
  c.zero_grad();
  backward(sum(mul(x, c)));
  for (int64_t i = 0; i < 4; ++i) {
    CHECK(x.grad().data()[i] == c.data()[i]);
    CHECK(c.grad().data()[i] == x.data()[i]);
  }
  CHECK(tape_size() == 0);
}

TEST_CASE("autograd: every op saves what its backward reads") {
  // Writing a tensor that an op's backward reads, after the forward, must make backward fail
  // naming the op instead of silently using the new values.
  auto expect_caught = [](const char* op, const Tensor& loss, Tensor victim) {
    victim.fill_(0.5f);
    const std::string msg = error_of([&] { backward(loss); });
    const std::string what = std::string(op) + ": " + msg;
    INFO(what);
    CHECK(contains(msg, std::string("'") + op + "'"));
    CHECK(tape_size() == 0);
  };
  clear_tape();
  Tensor x = param({2, 4}, 1), w = param({4}, 2, 0.5f, 1.5f), b = param({4}, 3),
         m = param({3, 4}, 4);
  expect_caught("matmul", sum(matmul(x, m, false, true)), m);
  expect_caught("linear", sum(linear(x, m)), x);
  expect_caught("linear", sum(linear(x, m)), m);
  expect_caught("div", sum(tri::div(x, w)), w);
  Tensor y = tri::tanh(x);
  expect_caught("tanh", sum(y), y);  // unary ops save their output too
  y = softmax(x);
  expect_caught("softmax", sum(y), y);
  y = log_softmax(x);
  expect_caught("log_softmax", sum(y), y);
  expect_caught("layer_norm", sum(layer_norm(x, w, b)), w);
  expect_caught("rms_norm", sum(rms_norm(x, w)), w);
  expect_caught("l2_norm", sum(mul(l2_norm(x), b)), x);
  Tensor conv_w = param({4, 1, 3}, 5);
  expect_caught("causal_conv1d", sum(causal_conv1d(reshape(x, Shape{1, 2, 4}), conv_w, Tensor())),
                conv_w);
  expect_caught("cross_entropy", cross_entropy(x, IntTensor({2}, {0, 2})), x);
}

TEST_CASE("autograd: shape errors name the op and both shapes") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  std::string m = error_of([&] { matmul(a, b); });
  CHECK(contains(m, "matmul"));
  CHECK(contains(m, "[2, 3]"));
  CHECK(contains(m, "[4, 5]"));
  m = error_of([&] { add(a, Tensor::zeros({4, 3})); });
  CHECK(contains(m, "add"));
  CHECK(contains(m, "[2, 3]"));
  CHECK(contains(m, "[4, 3]"));
  m = error_of([&] { linear(a, b); });
  CHECK(contains(m, "linear"));
  CHECK(contains(m, "[2, 3]"));
  CHECK(contains(m, "[4, 5]"));
  m = error_of([&] { concat({a, Tensor::zeros({2, 4})}, 0); });
  CHECK(contains(m, "concat"));
  CHECK(contains(m, "[2, 3]"));
  CHECK(contains(m, "[2, 4]"));
}

TEST_CASE("autograd: backward on a bad loss names the fix") {
  clear_tape();
  Tensor x = param({3}, 6);
  Tensor y = tri::exp(x);
  std::string m = error_of([&] { backward(y); });
  CHECK(contains(m, "[3]"));
  CHECK(contains(m, "sum()"));  // reduce it first
  clear_tape();
  Tensor frozen = gradcheck::uniform({3}, 7);
  m = error_of([&] { backward(sum(frozen)); });
  CHECK(contains(m, "requires_grad"));
  CHECK(contains(m, "NoGradGuard"));
  {
    NoGradGuard no_grad;
    Tensor l = sum(x);
    CHECK(contains(error_of([&] { backward(l); }), "NoGradGuard"));
  }
  CHECK(contains(error_of([] { backward(Tensor()); }), "undefined"));
  CHECK(tape_size() == 0);
}

TEST_CASE("autograd: clear_tape drops recorded ops") {
  clear_tape();
  Tensor x = param({3}, 8);
  Tensor stale = sum(tri::exp(x));  // an evaluation forward that is never backpropagated
  CHECK(tape_size() == 2);
  clear_tape();
  CHECK(tape_size() == 0);
  backward(sum(mul_scalar(x, 2.f)));  // only this step's ops contribute
  for (int64_t i = 0; i < 3; ++i) CHECK(x.grad().data()[i] == 2.f);
  (void)stale;
}

// reshape's backward hands its gradient buffer to an intermediate input instead of copying it;
// the sums must be those of copying: h = x * 2 reached through two reshapes.
TEST_CASE("autograd: a reshape's gradient reaches its input whole, shared or added") {
  clear_tape();
  Tensor x = param({2, 6}, 3);
  const Tensor h = mul_scalar(x, 2.f);  // an intermediate: the first reshape's backward hands over
  const Tensor a = reshape(h, Shape{3, 4}), b = reshape(h, Shape{12});
  const Tensor w = gradcheck::uniform({12}, 4);
  // L = sum(a * 3) + sum(b * w): b's reshape runs first and hands d b = w over, a's adds 3.
  backward(add(sum(mul_scalar(a, 3.f)), sum(mul(b, w))));
  REQUIRE(x.grad().defined());
  for (int64_t i = 0; i < 12; ++i) CHECK(x.grad().data()[i] == 2.f * (w.data()[i] + 3.f));
  // A leaf keeps its own buffer: a reshape of a parameter copies its gradient.
  Tensor p = param({4}, 5);
  const Tensor r = reshape(p, Shape{2, 2});
  backward(sum(mul_scalar(r, 2.f)));
  for (int64_t i = 0; i < 4; ++i) CHECK(p.grad().data()[i] == 2.f);
  p.zero_grad();
  CHECK(p.grad().data()[0] == 0.f);
}

TEST_CASE("autograd: the norms' one-pass backward gives the threaded bits, written fresh or added") {
  // [300, 70]: above the threaded threshold, rows of 70 (a tail past the 8-lane row sums and a
  // column block narrower than 16). One thread takes the one-pass loop, two the two passes.
  const int saved = omp_get_max_threads();
  const Tensor c = gradcheck::uniform({300, 70}, 21);
  auto grads = [&](int threads, bool rms, bool x_used_first) {
    omp_set_num_threads(threads);
    clear_tape();
    Tensor x = param({300, 70}, 22, -2, 2), w = param({70}, 23, 0.5f, 1.5f), b = param({70}, 24);
    // x's other use, recorded before or after the norm, runs backward after or before it: the
    // norm's backward writes x's gradient fresh or adds to it.
    const Tensor other = x_used_first ? sum(mul(x, c)) : Tensor();
    const Tensor y = rms ? rms_norm(x, w) : layer_norm(x, w, b);
    const Tensor loss = add(sum(mul(y, c)), x_used_first ? other : sum(mul(x, c)));
    backward(loss);
    omp_set_num_threads(saved);
    return std::vector<Tensor>{x.grad(), w.grad(), rms ? Tensor() : b.grad()};
  };
  for (bool rms : {false, true}) {
    CAPTURE(rms);
    const std::vector<Tensor> one = grads(1, rms, false), two = grads(2, rms, false);
    const std::vector<Tensor> added = grads(1, rms, true), added_two = grads(2, rms, true);
    for (size_t i = 0; i < one.size(); ++i) {
      if (!one[i].defined()) continue;
      CAPTURE(i);
      CHECK(bit_equal(one[i], two[i]));
      CHECK(bit_equal(added[i], added_two[i]));
    }
  }
}

TEST_CASE("autograd: mul_silu has the bits of mul(a, silu(x)), forward and backward") {
  // [300, 70]: the threaded loops; [40, 16]: one thread's. a and x each also used elsewhere
  // before the gate (their gradients added to) or not (written fresh).
  const int saved = omp_get_max_threads();
  for (const Shape& shape : {Shape{300, 70}, Shape{40, 16}})
    for (int threads : {1, 2})
      for (bool shared : {false, true}) {
        CAPTURE(threads);
        CAPTURE(shared);
        omp_set_num_threads(threads);
        const Tensor c = gradcheck::uniform(shape, 41);
        auto run = [&](bool fused) {
          clear_tape();
          Tensor a = param(shape, 42, -2, 2), x = param(shape, 43, -6, 6);
          const Tensor y = fused ? mul_silu(a, x) : mul(a, silu(x));
          Tensor loss = sum(mul(y, c));
          if (shared) loss = add(loss, add(sum(mul(a, c)), sum(mul(x, c))));
          backward(loss);
          return std::vector<Tensor>{y, a.grad(), x.grad()};
        };
        const std::vector<Tensor> fused = run(true), ops = run(false);
        for (size_t i = 0; i < fused.size(); ++i) {
          CAPTURE(i);
          CHECK(bit_equal(fused[i], ops[i]));
        }
      }
  omp_set_num_threads(saved);
}

TEST_CASE("autograd: slices of one tensor write, then add to, its gradient") {
  clear_tape();
  Tensor x = param({4, 10}, 25);
  const Tensor ca = gradcheck::uniform({4, 3}, 26), cb = gradcheck::uniform({4, 4}, 27);
  // Columns 0-2 and 5-8 used, 3-4 and 9 not: their gradient must be 0, not uninitialised.
  backward(add(sum(mul(slice(x, -1, 0, 3), ca)), sum(mul(slice(x, -1, 5, 9), cb))));
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t j = 0; j < 10; ++j) {
      const float want = j < 3 ? ca.data()[r * 3 + j] : j >= 5 && j < 9 ? cb.data()[r * 4 + j - 5] : 0.f;
      CHECK(x.grad().data()[r * 10 + j] == want);
    }
}

TEST_CASE("autograd: views share storage and the version counter") {
  Tensor x = gradcheck::uniform({4, 3}, 9);
  Tensor v = x.view(Shape{12});
  Tensor r = reshape(x, Shape{2, 6});
  Tensor n = x.narrow0(1, 2);
  CHECK(v.data() == x.data());
  CHECK(r.data() == x.data());
  CHECK(n.data() == x.data() + 3);
  CHECK(n.shape() == Shape{2, 3});
  const uint64_t v0 = x.version();
  n.fill_(5.f);
  CHECK(x.version() == v0 + 1);
  CHECK(v.version() == x.version());
  CHECK(r.version() == x.version());
  CHECK(x.data()[3] == 5.f);
  CHECK(x.data()[8] == 5.f);
  CHECK(x.data()[2] != 5.f);
  Tensor s = slice(x, 0, 2, 4);  // slice on axis 0 is a view too
  CHECK(s.data() == x.data() + 6);
  x.copy_(Tensor::zeros({4, 3}));
  CHECK(s.version() == x.version());
  CHECK(s.data()[0] == 0.f);
  // A clone owns its storage.
  Tensor c = x.clone();
  CHECK(c.data() != x.data());
  c.fill_(1.f);
  CHECK(x.version() == v0 + 2);
}

TEST_CASE("autograd: a 100,000-op chain runs backward without deep recursion") {
  // Ten times the 10,000 ops a recursive walk would already struggle with on a small stack.
  clear_tape();
  Tensor x = param({2}, 10, 0.5f, 1.f);
  const int n = 100000;
  const float k = 1.00001f;
  Tensor y = x;
  for (int i = 0; i < n; ++i) y = mul_scalar(y, k);
  CHECK(tape_size() == size_t(n));
  backward(sum(y));
  CHECK(tape_size() == 0);
  // d y / d x = k^n, computed independently in double.
  const double expect = std::pow(double(k), n);
  for (int64_t i = 0; i < 2; ++i)
    CHECK(x.grad().data()[i] == doctest::Approx(expect).epsilon(1e-3));
}

namespace {
struct Affine : Module {
  Tensor weight = Tensor::zeros({3, 2}), bias = Tensor::zeros({3});
  Affine() {
    add_parameter("weight", weight);
    add_parameter("bias", bias, /*decay=*/false);
  }
};
struct Net : Module {
  Tensor embed = Tensor::zeros({10, 2});
  Affine first, second;
  Net() {
    add_parameter("embed.weight", embed);
    add_module("layers.0", first);
    add_module("layers.1", second);
  }
};
}  // namespace

TEST_CASE("autograd: Module registers named parameters") {
  Net net;
  std::vector<Parameter> ps = net.parameters();
  REQUIRE(ps.size() == 5);
  const char* names[] = {"embed.weight", "layers.0.weight", "layers.0.bias", "layers.1.weight",
                         "layers.1.bias"};
  const bool decay[] = {true, true, false, true, false};
  for (size_t i = 0; i < ps.size(); ++i) {
    CHECK(ps[i].name == names[i]);
    CHECK(ps[i].decay == decay[i]);
    CHECK(ps[i].tensor.requires_grad());
  }
  CHECK(ps[1].tensor.same(net.first.weight));  // the registered tensor itself, not a copy
  CHECK(net.num_parameters() == 20 + 2 * (6 + 3));
  std::string table = net.parameter_table();
  for (const char* name : names) CHECK(contains(table, name));
  CHECK(contains(table, "total"));
  CHECK(contains(table, std::to_string(net.num_parameters())));

  struct Twice : Module {
    Tensor a = Tensor::zeros({1}), b = Tensor::zeros({1});
    Affine child, other;
    void param_twice() {
      add_parameter("a", a);
      add_parameter("a", b);
    }
    void child_twice() {
      add_module("c", child);
      add_module("c", other);
    }
    void undefined() {
      Tensor u;
      add_parameter("u", u);
    }
  } t;
  CHECK(contains(error_of([&] { t.param_twice(); }), "'a' registered twice"));
  CHECK(contains(error_of([&] { t.child_twice(); }), "'c' registered twice"));
  CHECK(contains(error_of([&] { t.undefined(); }), "'u'"));

  // zero_grad reaches children; train/eval reach children.
  clear_tape();
  backward(sum(linear(net.embed, net.first.weight, net.first.bias)));
  CHECK(net.first.bias.grad().data()[0] == 10.f);
  net.zero_grad();
  CHECK(net.first.bias.grad().data()[0] == 0.f);
  net.eval();
  CHECK_FALSE(net.second.training());
  net.train();
  CHECK(net.second.training());
}

TEST_CASE("tensor memory limit: an allocation beyond it is an Error naming the scope; scopes nest") {
  const int64_t live = memory_live_bytes();
  {
    TensorMemoryLimit outer(live + (int64_t(1) << 20), "outer scope");
    Tensor small = Tensor::zeros(Shape{1024});  // 4 KiB: within
    CHECK(small.numel() == 1024);
    const std::string err = error_of([] { Tensor::zeros(Shape{1 << 19}); });  // 2 MiB
    CHECK(err.find("outer scope") != std::string::npos);
    {
      TensorMemoryLimit inner(live + (int64_t(16) << 10), "inner scope");
      CHECK(error_of([] { Tensor::zeros(Shape{1 << 13}); }).find("inner scope") != std::string::npos);  // 32 KiB
    }
    Tensor again = Tensor::zeros(Shape{1 << 13});  // the outer limit again
    CHECK(again.numel() == 1 << 13);
  }
  Tensor big = Tensor::zeros(Shape{1 << 19});  // no limit left
  CHECK(big.numel() == 1 << 19);
}

TEST_CASE("tensor storage: blocks from 2 MiB up start on a 2 MiB boundary (huge pages), others on 64 bytes") {
  const int64_t n = (int64_t(1) << 19) + 16;  // 2 MiB and 64 bytes: two huge pages
  Tensor big = Tensor::empty(Shape{n});
  const Tensor small = Tensor::empty(Shape{1000});
  CHECK(reinterpret_cast<uintptr_t>(small.data()) % 64 == 0);
#ifdef __linux__
  CHECK(reinterpret_cast<uintptr_t>(big.data()) % (uintptr_t(2) << 20) == 0);
#endif
  big.fill_(3.f);  // every element is the block's, to the last
  CHECK(big.data()[0] == 3.f);
  CHECK(big.data()[n - 1] == 3.f);
}
