// The book's worked self-attention example, computed with the framework's ops:
// X = [[1,0],[0,1],[1,1]] (3 tokens, d = 2), W_Q = W_K = W_V = I,
// self_attention(X) = softmax(Q K^T / sqrt(d)) V with Q = X W_Q, K = X W_K, V = X W_V.
// Checked against a double-precision computation written here with plain loops, and the
// book's published 4-decimal table checked against that computation.
// (tests/torch/gen_ops.py has the same example as the case book_attention, run by torch.)
#include <doctest/doctest.h>

#include <cmath>

#include "framework/ops/ops.hpp"

using namespace tri;

namespace {
constexpr int kTokens = 3, kDim = 2;
const double kX[kTokens][kDim] = {{1, 0}, {0, 1}, {1, 1}};

// softmax(X X^T / sqrt(d)) and its product with X, in double with plain loops.
void attention_in_double(double attn[kTokens][kTokens], double out[kTokens][kDim]) {
  for (int i = 0; i < kTokens; ++i) {
    double score[kTokens], total = 0;
    for (int j = 0; j < kTokens; ++j) {
      double dot = 0;
      for (int k = 0; k < kDim; ++k) dot += kX[i][k] * kX[j][k];
      score[j] = std::exp(dot / std::sqrt(double(kDim)));
      total += score[j];
    }
    for (int j = 0; j < kTokens; ++j) attn[i][j] = score[j] / total;
    for (int k = 0; k < kDim; ++k) {
      out[i][k] = 0;
      for (int j = 0; j < kTokens; ++j) out[i][k] += attn[i][j] * kX[j][k];
    }
  }
}

long round4(double v) { return std::lround(v * 1e4); }  // v rounded to 4 decimals, in 1e-4 units
}  // namespace

TEST_CASE("the book's self-attention example") {
  Tensor X = Tensor::from(Shape{kTokens, kDim}, {1, 0, 0, 1, 1, 1});
  Tensor I = Tensor::from(Shape{kDim, kDim}, {1, 0, 0, 1});
  Tensor Q = matmul(X, I), K = matmul(X, I), V = matmul(X, I);
  Tensor attn = softmax(mul_scalar(matmul(Q, K, false, true), 1.f / std::sqrt(float(kDim))));
  Tensor out = matmul(attn, V);
  REQUIRE(attn.shape() == Shape{kTokens, kTokens});
  REQUIRE(out.shape() == Shape{kTokens, kDim});

  double attn_ref[kTokens][kTokens], out_ref[kTokens][kDim];
  attention_in_double(attn_ref, out_ref);
  const float *attn_got = attn.data(), *out_got = out.data();
  for (int i = 0; i < kTokens; ++i) {
    for (int j = 0; j < kTokens; ++j) CHECK(std::fabs(attn_got[i * kTokens + j] - attn_ref[i][j]) <= 1e-6);
    for (int k = 0; k < kDim; ++k) CHECK(std::fabs(out_got[i * kDim + k] - out_ref[i][k]) <= 1e-6);
  }

  // The values the book publishes. They are exactly what the formula gives, rounded; the
  // book's printed 0.42 / 0.16 and out_1 = [0.84, 0.58] elsewhere are rounding errors.
  const double published_attn[kTokens][kTokens] = {
      {0.4011, 0.1978, 0.4011}, {0.1978, 0.4011, 0.4011}, {0.2483, 0.2483, 0.5035}};
  const double published_out1[kDim] = {0.8022, 0.5989};
  for (int i = 0; i < kTokens; ++i)
    for (int j = 0; j < kTokens; ++j) {
      CHECK(round4(attn_ref[i][j]) == round4(published_attn[i][j]));
      CHECK(round4(attn_got[i * kTokens + j]) == round4(published_attn[i][j]));
    }
  for (int k = 0; k < kDim; ++k) {
    CHECK(round4(out_ref[0][k]) == round4(published_out1[k]));
    CHECK(round4(out_got[k]) == round4(published_out1[k]));
  }
}
