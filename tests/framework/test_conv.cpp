// The causal depthwise conv's paths against each other: the decoding step against the whole
// sequence, the fused conv + SiLU against its composition, and the fused op's register sums of
// d weight and d bias and its one-pass backward against its plain loops. Finite-difference checks: test_gradcheck.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"

using namespace tri;
using gradcheck::param;

TEST_CASE("causal_conv1d_step over a sequence gives causal_conv1d's bits, K > T included") {
  for (const int64_t K : {1, 3, 8}) {
    CAPTURE(K);
    const int64_t B = 2, T = 6, C = 5;
    const Tensor x = gradcheck::uniform({B, T, C}, 1, -1, 1), w = gradcheck::uniform({C, 1, K}, 2, -1, 1),
                 b = gradcheck::uniform({C}, 3, -1, 1);
    const Tensor whole = causal_conv1d(x, w, b);
    Tensor window = Tensor::zeros({B, K - 1, C});
    for (int64_t t = 0; t < T; ++t) {
      Tensor xt = Tensor::empty({B, 1, C});
      for (int64_t bi = 0; bi < B; ++bi)
        std::memcpy(xt.data() + bi * C, x.data() + (bi * T + t) * C, C * sizeof(float));
      const Tensor yt = causal_conv1d_step(xt, w, b, window);
      for (int64_t bi = 0; bi < B; ++bi)
        CHECK(std::memcmp(yt.data() + bi * C, whole.data() + (bi * T + t) * C, C * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("causal_conv1d_silu equals silu(causal_conv1d): output and gradients") {
  // 150 channels: three channel blocks of the weight gradient, the last partial; 4 x 100 rows
  // take the threaded paths. SiLU's exponential differs (exp_approx vs expf, ~1 ulp each).
  for (bool with_bias : {true, false}) {
    std::vector<std::vector<float>> got, want;
    for (bool fused : {true, false}) {
      Tensor x = param({4, 100, 150}, 21), w = param({150, 1, 4}, 22), b = param({150}, 23);
      const Tensor bb = with_bias ? b : Tensor();
      const Tensor y = fused ? causal_conv1d_silu(x, w, bb) : silu(causal_conv1d(x, w, bb));
      const Tensor wts = param({4, 100, 150}, 24);
      backward(sum(mul(y, wts)));
      auto& out = fused ? got : want;
      out = {y.tolist(), x.grad().tolist(), w.grad().tolist()};
      if (with_bias) out.push_back(b.grad().tolist());
    }
    for (size_t k = 0; k < got.size(); ++k) {
      double worst = 0, scale = 0;
      for (size_t i = 0; i < got[k].size(); ++i) {
        worst = std::max(worst, double(std::fabs(got[k][i] - want[k][i])));
        scale = std::max(scale, double(std::fabs(want[k][i])));
      }
      CAPTURE(k);
      CHECK(worst <= 1e-5 * scale);  // relative to the largest entry: sums of 400 rows round
    }
  }
}

// Column c of t viewed as [rows, cols]: a [rows] tensor (shaped as `shape`).
Tensor column(const Tensor& t, int64_t cols, int64_t c, Shape shape) {
  Tensor out = Tensor::empty(shape);
  for (int64_t r = 0; r < out.numel(); ++r) out.data()[r] = t.data()[r * cols + c];
  return out;
}

TEST_CASE("causal_conv1d_silu: each channel's d weight and d bias have the bits of that channel alone") {
  // With 4 taps, channels are summed 16 at a time in registers and the rest by plain loops; a
  // channel alone (1 of 1) takes the plain loops. 37 channels: two register groups and 5 plain.
  const int64_t B = 3, T = 21, C = 37, K = 4;
  const Tensor x = param({B, T, C}, 31), w = param({C, 1, K}, 32), b = param({C}, 33),
               g = param({B, T, C}, 34);
  backward(sum(mul(causal_conv1d_silu(x, w, b), g)));
  for (int64_t c = 0; c < C; ++c) {
    Tensor xc = column(x, C, c, Shape{B, T, 1}), wc = Tensor::empty(Shape{1, 1, K}),
           bc = column(b, C, c, Shape{1});
    for (int64_t k = 0; k < K; ++k) wc.data()[k] = w.data()[c * K + k];
    for (Tensor* t : {&xc, &wc, &bc}) t->requires_grad_();
    backward(sum(mul(causal_conv1d_silu(xc, wc, bc), column(g, C, c, Shape{B, T, 1}))));
    CAPTURE(c);
    CHECK(std::memcmp(wc.grad().data(), w.grad().data() + c * K, sizeof(float) * K) == 0);
    CHECK(std::memcmp(bc.grad().data(), b.grad().data() + c, sizeof(float)) == 0);
  }
}

TEST_CASE("causal_conv1d_silu: the one-pass backward has the bits of the passes, every gradient") {
  // 32 channels and 4 taps take the one pass (channels in whole vectors); a channel alone takes
  // the passes. T 2 < K - 1: every row's taps reach before the sequence. 80 channels at B 4, T 64:
  // threaded, the threads' channel ranges of 2 and 3 vectors.
  struct Size {
    int64_t B, T, C;
  };
  for (const Size sz : {Size{3, 21, 32}, Size{3, 2, 32}, Size{4, 64, 80}}) {
    const int64_t B = sz.B, T = sz.T, C = sz.C, K = 4;
    CAPTURE(T);
    CAPTURE(C);
    const Tensor x = param({B, T, C}, 41), w = param({C, 1, K}, 42), b = param({C}, 43), g = param({B, T, C}, 44);
    const Tensor y = causal_conv1d_silu(x, w, b);
    backward(sum(mul(y, g)));
    for (int64_t c = 0; c < C; ++c) {
      Tensor xc = column(x, C, c, Shape{B, T, 1}), wc = Tensor::empty(Shape{1, 1, K}), bc = column(b, C, c, Shape{1});
      for (int64_t k = 0; k < K; ++k) wc.data()[k] = w.data()[c * K + k];
      for (Tensor* t : {&xc, &wc, &bc}) t->requires_grad_();
      const Tensor yc = causal_conv1d_silu(xc, wc, bc);
      backward(sum(mul(yc, column(g, C, c, Shape{B, T, 1}))));
      CAPTURE(c);
      const Tensor want_y = column(y, C, c, Shape{B, T, 1}), want_gx = column(x.grad(), C, c, Shape{B, T, 1});
      CHECK(std::memcmp(yc.data(), want_y.data(), sizeof(float) * size_t(B * T)) == 0);
      CHECK(std::memcmp(xc.grad().data(), want_gx.data(), sizeof(float) * size_t(B * T)) == 0);
      CHECK(std::memcmp(wc.grad().data(), w.grad().data() + c * K, sizeof(float) * K) == 0);
      CHECK(std::memcmp(bc.grad().data(), b.grad().data() + c, sizeof(float)) == 0);
    }
  }
}

TEST_CASE("causal_conv1d_silu: the one-pass backward gives the same bits at 1 and 2 threads") {
  // 80 channels (5 vectors) over 16384 rows: threaded, the channel ranges split unevenly.
  const int64_t B = 4, T = 4096, C = 80, K = 4;
  const Tensor x = param({B, T, C}, 51), w = param({C, 1, K}, 52), b = param({C}, 53), g = param({B, T, C}, 54);
  auto grads = [&](int threads) {
    omp_set_num_threads(threads);
    for (const Tensor* t : {&x, &w, &b}) t->impl()->grad.reset();
    backward(sum(mul(causal_conv1d_silu(x, w, b), g)));
    return std::vector<Tensor>{x.grad().clone(), w.grad().clone(), b.grad().clone()};
  };
  const int before = omp_get_max_threads();
  const std::vector<Tensor> one = grads(1), two = grads(2);
  omp_set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(one[i].data(), two[i].data(), sizeof(float) * size_t(one[i].numel())) == 0);
  }
}
