// The fused causal linear-attention kernel against its naive reference (forward and every
// gradient), finite differences, the recurrent step, causality, determinism and shape errors.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/kernels/linear_attention.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"

using namespace tri;
using namespace trilemma_test;
using gradcheck::param;

namespace {


// Raw inputs of one problem: the features are computed from them with ops, so the gradients
// checked are those reaching the raw tensors through the kernel and the feature maps.
struct Problem {
  int64_t B, T, H, Dk, Dv;
  bool separate_den;  // numerator on signed q, k; normaliser on positive q_den, k_den
  Tensor xq, xk, v, xqd, xkd;

  Problem(int64_t B_, int64_t T_, int64_t H_, int64_t Dk_, int64_t Dv_, bool sep, uint64_t seed)
      : B(B_), T(T_), H(H_), Dk(Dk_), Dv(Dv_), separate_den(sep) {
    xq = param({B, T, H, Dk}, seed + 1);
    xk = param({B, T, H, Dk}, seed + 2);
    v = param({B, T, H, Dv}, seed + 3);
    if (sep) {
      xqd = param({B, T, H, Dk}, seed + 4);
      xkd = param({B, T, H, Dk}, seed + 5);
    }
  }
  std::vector<Tensor> leaves() const {
    return separate_den ? std::vector<Tensor>{xq, xk, v, xqd, xkd} : std::vector<Tensor>{xq, xk, v};
  }
  // elu(x) + 1: the positive feature map of Katharopoulos et al.
  static Tensor phi(const Tensor& x) { return add_scalar(elu(x), 1.f); }

  template <class Kernel>
  Tensor run(Kernel kernel) const {
    if (separate_den) return kernel(xq, xk, v, phi(xqd), phi(xkd));
    return kernel(phi(xq), phi(xk), v, Tensor(), Tensor());
  }
};

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qd,
             const Tensor& kd) {
  return linear_attention(q, k, v, qd, kd);
}
Tensor naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qd,
             const Tensor& kd) {
  return linear_attention_naive(q, k, v, qd, kd);
}

// The output and the gradients of sum(out * w) w.r.t. every leaf.
struct Result {
  Tensor out;
  std::vector<Tensor> grads;
};

template <class Kernel>
Result forward_backward(const Problem& p, Kernel kernel, const Tensor& w) {
  for (const Tensor& t : p.leaves()) t.impl()->grad.reset();
  Result r;
  r.out = p.run(kernel);
  backward(sum(mul(r.out, w)));
  for (const Tensor& t : p.leaves()) r.grads.push_back(t.grad().clone());
  return r;
}

const char* kLeafNames[] = {"q", "k", "v", "q_den", "k_den"};

}  // namespace

TEST_CASE("linear_attention: fused matches the naive reference, forward and every gradient") {
  struct Size {
    int64_t B, T, H, Dk, Dv;
  };
  for (const Size& s : {Size{2, 37, 3, 12, 20}, Size{1, 1, 2, 5, 3}, Size{1, 300, 2, 32, 32}})
    for (bool sep : {false, true}) {
      CAPTURE(s.T);
      CAPTURE(sep);
      Problem p(s.B, s.T, s.H, s.Dk, s.Dv, sep, 10 * s.T + sep);
      Tensor w = gradcheck::uniform({s.B, s.T, s.H, s.Dv}, 7);
      Result f = forward_backward(p, fused, w), n = forward_backward(p, naive, w);
      CHECK(scaled_err(f.out, n.out) < 1e-5);
      for (size_t i = 0; i < f.grads.size(); ++i) {
        INFO("gradient of " << kLeafNames[i]);
        CHECK(scaled_err(f.grads[i], n.grads[i]) < 1e-5);
      }
    }
}

TEST_CASE("linear_attention: passing q, k as their own normaliser features equals omitting them") {
  Problem p(2, 37, 3, 12, 20, false, 3);
  Tensor w = gradcheck::uniform({2, 37, 3, 20}, 8);
  auto explicit_den = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&,
                         const Tensor&) { return linear_attention(q, k, v, q, k); };
  Result a = forward_backward(p, fused, w), b = forward_backward(p, explicit_den, w);
  CHECK(scaled_err(a.out, b.out) == 0);
  for (size_t i = 0; i < a.grads.size(); ++i) CHECK(scaled_err(a.grads[i], b.grads[i]) < 1e-6);
}

TEST_CASE("linear_attention: gradients match finite differences") {
  for (bool sep : {false, true}) {
    CAPTURE(sep);
    const Shape sk{2, 7, 2, 3}, sv{2, 7, 2, 4};
    // Positive features keep the denominators away from zero.
    std::vector<Tensor> in = {param(sk, 1, 0.2f, 1.2f), param(sk, 2, 0.2f, 1.2f),
                              param(sv, 3)};
    if (sep) in.insert(in.end(), {param(sk, 4, 0.2f, 1.2f), param(sk, 5, 0.2f, 1.2f)});
    // Signed numerator features when the normaliser has its own.
    if (sep)
      for (int i = 0; i < 2; ++i)
        for (int64_t j = 0; j < in[i].numel(); ++j) in[i].data()[j] = in[i].data()[j] * 2 - 1.4f;
    auto f = [sep](const std::vector<Tensor>& x) {
      return sep ? linear_attention(x[0], x[1], x[2], x[3], x[4])
                 : linear_attention(x[0], x[1], x[2]);
    };
    gradcheck::Result r = gradcheck::check(f, in);
    INFO(r.summary());
    CHECK(r.ok());
  }
}

TEST_CASE("linear_attention with a feature map: the bits of linear_attention(phi(q), phi(k), v)") {
  // The fused form recomputes phi(q), phi(k) in backward instead of storing them; every output
  // and gradient must equal the composition's. Also when q already holds a gradient from a
  // later op (the kernel's part is then added, not written), and at sizes that use the threads.
  const Shape sk{3, 70, 4, 24}, sv{3, 70, 4, 20};
  Tensor q = param(sk, 11), k = param(sk, 12), v = param(sv, 13), w = gradcheck::uniform(sv, 14);
  const std::pair<FeatureMap, Tensor (*)(const Tensor&)> maps[] = {
      {FeatureMap::elu_plus_one, elu_plus_one}, {FeatureMap::relu, relu}, {FeatureMap::identity, nullptr}};
  for (const auto& [map, phi] : maps)
    for (const bool q_read_twice : {false, true}) {
      CAPTURE(int(map));
      CAPTURE(q_read_twice);
      auto run = [&](bool fused) {
        for (Tensor* t : {&q, &k, &v}) t->impl()->grad.reset();
        Tensor out = fused ? linear_attention(q, k, v, map)
                           : linear_attention(phi ? phi(q) : q, phi ? phi(k) : k, v);
        Tensor loss = sum(mul(out, w));
        if (q_read_twice) loss = add(loss, sum(mul(q, q)));
        backward(loss);
        return std::vector<Tensor>{out, q.grad(), k.grad(), v.grad()};
      };
      const std::vector<Tensor> fused = run(true), composed = run(false);
      for (size_t i = 0; i < fused.size(); ++i) {
        REQUIRE(fused[i].numel() == composed[i].numel());
        CHECK(std::memcmp(fused[i].data(), composed[i].data(), sizeof(float) * size_t(fused[i].numel())) == 0);
      }
    }
  // And against finite differences, through the feature map's derivative.
  const Shape tk{2, 7, 2, 3}, tv{2, 7, 2, 4};
  for (const FeatureMap map : {FeatureMap::elu_plus_one, FeatureMap::relu}) {
    CAPTURE(int(map));
    // relu: inputs away from its kink; both: denominators away from zero.
    std::vector<Tensor> in = {param(tk, 21, 0.2f, 1.2f), param(tk, 22, 0.2f, 1.2f), param(tv, 23)};
    if (map == FeatureMap::elu_plus_one)
      for (int i = 0; i < 2; ++i)
        for (int64_t j = 0; j < in[i].numel(); ++j) in[i].data()[j] = in[i].data()[j] * 2 - 1.4f;
    gradcheck::Result r =
        gradcheck::check([map](const std::vector<Tensor>& x) { return linear_attention(x[0], x[1], x[2], map); }, in);
    INFO(r.summary());
    CHECK(r.ok());
  }
}

TEST_CASE("linear_attention: stepping token by token equals the parallel forward") {
  // The parallel forward takes several steps per pass over the state, the step function one;
  // each state element sees the same operations in the same order, so the results are the
  // same bits. T = 63 ends in a part block. Dv = 20 steps through a padded copy
  // of the state, Dv = 32 and 64 in place.
  const int64_t B = 2, T = 63, H = 3;
  for (auto [Dk, Dv] : {std::pair<int64_t, int64_t>{12, 20}, {16, 32}, {64, 64}})
    for (bool sep : {false, true}) {
      CAPTURE(Dv);
      CAPTURE(sep);
      NoGradGuard no_grad;
      Tensor q = gradcheck::uniform({B, T, H, Dk}, 1, sep ? -1.f : 0.1f, 1.f);
      Tensor k = gradcheck::uniform({B, T, H, Dk}, 2, sep ? -1.f : 0.1f, 1.f);
      Tensor v = gradcheck::uniform({B, T, H, Dv}, 3);
      Tensor qd = sep ? gradcheck::uniform({B, T, H, Dk}, 4, 0.1f, 1.f) : Tensor();
      Tensor kd = sep ? gradcheck::uniform({B, T, H, Dk}, 5, 0.1f, 1.f) : Tensor();
      Tensor full = linear_attention(q, k, v, qd, kd);
      Tensor S = Tensor::zeros({B, H, Dk, Dv}), z = Tensor::zeros({B, H, Dk});
      // Token t of every batch row, as [B, 1, H, D] (concat of first-axis views).
      auto token = [&](const Tensor& x, int64_t t) {
        if (!x.defined()) return Tensor();
        const int64_t D = x.size(3);
        std::vector<Tensor> rows;
        for (int64_t b = 0; b < B; ++b)
          rows.push_back(x.narrow0(b, 1).view({T, H, D}).narrow0(t, 1));
        return concat(rows, 0).view({B, 1, H, D});
      };
      std::vector<Tensor> outs;
      for (int64_t t = 0; t < T; ++t)
        outs.push_back(linear_attention_step(token(q, t), token(k, t), token(v, t), S, z,
                                             token(qd, t), token(kd, t)));
      CHECK(scaled_err(concat(outs, 1), full) == 0);
    }
}

TEST_CASE("linear_attention: output t has exactly zero gradient w.r.t. inputs after t") {
  const int64_t B = 2, T = 37, H = 3, Dk = 12, Dv = 20, t0 = 20;
  for (bool sep : {false, true}) {
    CAPTURE(sep);
    Problem p(B, T, H, Dk, Dv, sep, 5);
    Tensor w = gradcheck::uniform({B, T, H, Dv}, 9);
    for (int64_t i = 0; i < w.numel(); ++i)
      if ((i / (H * Dv)) % T != t0) w.data()[i] = 0.f;  // only output t0 reaches the loss
    Result r = forward_backward(p, fused, w);
    for (size_t i = 0; i < r.grads.size(); ++i) {
      INFO("gradient of " << kLeafNames[i]);
      const Tensor& g = r.grads[i];
      const int64_t D = g.size(3);
      double after = 0, at_or_before = 0;
      for (int64_t j = 0; j < g.numel(); ++j) {
        const int64_t t = (j / (H * D)) % T;
        (t > t0 ? after : at_or_before) += std::fabs(g.data()[j]);
      }
      CHECK(after == 0);
      CHECK(at_or_before > 0);  // the loss does reach the inputs up to t0
    }
  }
}

namespace {

// Runs the sequence of T steps and its first `cut` steps alone, the loss seeing only those, and
// checks that both give the same bits (output and every gradient) on them.
void check_first_steps(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, int64_t cut, bool sep) {
  auto first_steps = [&](const Tensor& x, bool leaf) {
    const int64_t D = x.size(3);
    Tensor y = Tensor::empty({B, cut, H, D});
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(y.data() + b * cut * H * D, x.data() + b * T * H * D, cut * H * D * sizeof(float));
    if (leaf) y.requires_grad_();
    return y;
  };
  Problem whole(B, T, H, Dk, Dv, sep, 13), part = whole;
  part.T = cut;
  for (Tensor* x : {&part.xq, &part.xk, &part.v, &part.xqd, &part.xkd})
    if (x->defined()) *x = first_steps(*x, true);
  Tensor w = gradcheck::uniform({B, T, H, Dv}, 14);
  for (int64_t i = 0; i < w.numel(); ++i)
    if ((i / (H * Dv)) % T >= cut) w.data()[i] = 0.f;  // the loss sees the first steps only
  const Result a = forward_backward(whole, fused, w);
  const Result b = forward_backward(part, fused, first_steps(w, false));
  CHECK(scaled_err(first_steps(a.out, false), b.out) == 0);
  for (size_t i = 0; i < a.grads.size(); ++i) {
    INFO("gradient of " << kLeafNames[i]);
    CHECK(scaled_err(first_steps(a.grads[i], false), b.grads[i]) == 0);
  }
}

}  // namespace

TEST_CASE("linear_attention: a sequence's first steps get the bits of the sequence cut there") {
  // The sweeps take blocks of steps per pass over a state, from t = 0 forward and from T - 1
  // backward: cut at 22 of 37, every step of the cut sequence's reverse sweep sits at another
  // place in its block, and its last two forward steps leave a block for single steps. Dv = 20
  // pads the state's rows, 64 does not.
  const int64_t B = 2, T = 37, H = 3, cut = 22;
  for (auto [Dk, Dv] : {std::pair<int64_t, int64_t>{12, 20}, {64, 64}})
    for (bool sep : {false, true}) {
      CAPTURE(Dk);
      CAPTURE(sep);
      check_first_steps(B, T, H, Dk, Dv, cut, sep);
    }
}

TEST_CASE("linear_attention: results repeat bit for bit, at any thread count") {
  Problem p(2, 37, 3, 12, 20, true, 11);
  Tensor w = gradcheck::uniform({2, 37, 3, 20}, 12);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Result one = forward_backward(p, fused, w);
  omp_set_num_threads(std::max(2, threads));
  Result two = forward_backward(p, fused, w), again = forward_backward(p, fused, w);
  omp_set_num_threads(threads);
  for (const Result* r : {&two, &again}) {
    CHECK(scaled_err(r->out, one.out) == 0);
    for (size_t i = 0; i < one.grads.size(); ++i) CHECK(scaled_err(r->grads[i], one.grads[i]) == 0);
  }
}

TEST_CASE("linear_attention: bad shapes are errors naming the argument") {
  Tensor q = Tensor::zeros({2, 5, 3, 4}), v = Tensor::zeros({2, 5, 3, 6});
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { linear_attention(q, Tensor::zeros({2, 5, 3, 5}), v); }).find("k [2, 5, 3, 5]") !=
        std::string::npos);
  CHECK(message([&] { linear_attention(q, q, Tensor::zeros({2, 4, 3, 6})); }).find("v [2, 4, 3, 6]") !=
        std::string::npos);
  CHECK(message([&] { linear_attention(q, q, v, q); }).find("both") != std::string::npos);
  CHECK(message([&] { linear_attention_naive(q.view({10, 3, 4}), q, v); }).find("[B, T, H, Dk]") !=
        std::string::npos);
  Tensor S = Tensor::zeros({2, 3, 4, 6}), z = Tensor::zeros({2, 3, 4});
  CHECK(message([&] { linear_attention_step(q, q, v, S, z); }).find("T = 5") != std::string::npos);
  Tensor q1 = Tensor::zeros({2, 1, 3, 4}), v1 = Tensor::zeros({2, 1, 3, 6});
  Tensor bad_S = Tensor::zeros({2, 3, 6, 4});
  CHECK(message([&] { linear_attention_step(q1, q1, v1, bad_S, z); }).find("S [2, 3, 6, 4]") !=
        std::string::npos);
}
