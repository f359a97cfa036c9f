// The differentiable ops. Shapes use one vocabulary: B batch, T time, D model width,
// H heads, N state size, V vocab, C channels, K kernel width.
// Every op is defined in one place with its backward beside it (ops_*.cpp); an op records
// itself on the tape only when an input requires a gradient.
#pragma once
#include <cstdint>
#include <vector>

#include "framework/core/tensor.hpp"

namespace tri {

// ---- matmul (ops_matmul.cpp) -------------------------------------------------------------
// a [..., M, K] (or [..., K, M] with trans_a), b [..., K, N] (or [..., N, K] with trans_b).
// b may be 2-D (shared across a's batch dims) or have the same batch dims as a.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// PyTorch's nn.Linear: x [..., in] @ w[out, in]^T + bias[out] (bias may be undefined).
// With a residual (shaped like the output): residual + linear(x, w, bias), the bits of
// add(residual, linear(x, w, bias)) without a separate tensor for the projection (a residual
// block's sum, one [B, T, D] tensor fewer kept for backward). gelu_linear likewise.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(),
              const Tensor& residual = Tensor());
// The slices of linear(x, w) along its last axis, `widths` wide in order (summing to w's rows),
// each written by its own GEMM: no [..., out] tensor and no copies. Backward assembles d out
// from the parts' gradients (zeros where none flowed) and runs linear's backward: the bits of
// slice(linear(x, w), -1, ...) wherever the parts' GEMMs give the whole GEMM's columns' bits.
std::vector<Tensor> linear_parts(const Tensor& x, const Tensor& w, const std::vector<int64_t>& widths);
// linear(gelu(h), w, bias) with the same bits, keeping h instead of gelu(h) for backward (which
// recomputes it): the MLP's d_ff-wide activation is stored once, not twice.
Tensor gelu_linear(const Tensor& h, const Tensor& w, const Tensor& bias = Tensor(),
                   const Tensor& residual = Tensor());

// ---- element-wise binary with numpy broadcasting (ops_elementwise.cpp) --------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// Scalar ops: a + s, a * s, a ^ p (p any real; a must be > 0 unless p is an integer).
Tensor add_scalar(const Tensor& a, float s);
Tensor mul_scalar(const Tensor& a, float s);
Tensor pow_scalar(const Tensor& a, float p);
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator*(const Tensor& a, float s) { return mul_scalar(a, s); }
inline Tensor operator+(const Tensor& a, float s) { return add_scalar(a, s); }

// ---- element-wise unary (ops_activation.cpp) --------------------------------------------
Tensor gelu(const Tensor& x);      // exact (erf) form
Tensor silu(const Tensor& x);
Tensor elu(const Tensor& x, float alpha = 1.0f);
Tensor elu_plus_one(const Tensor& x);  // elu(x) + 1 in one pass: x + 1 above 0, e^x below
Tensor softplus(const Tensor& x);  // log(1 + e^x), linear above x = 20 like PyTorch
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor tanh(const Tensor& x);
// a * silu(x) for a and x of one shape (a gate: Mamba 2's and Gated DeltaNet's), one pass each
// way, with mul(a, silu(x))'s bits.
Tensor mul_silu(const Tensor& a, const Tensor& x);

// ---- reductions (ops_reduce.cpp) ---------------------------------------------------------
// Over the listed axes (negative counts from the end); empty list = all axes.
Tensor sum(const Tensor& x, std::vector<int> axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int> axes = {}, bool keepdim = false);

// ---- shape (ops_shape.cpp) ---------------------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& s);           // a view; -1 is not supported
Tensor permute(const Tensor& x, std::vector<int> order);   // copy
Tensor transpose(const Tensor& x, int a0, int a1);         // copy
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end);  // view on axis 0
Tensor concat(const std::vector<Tensor>& xs, int axis);

// ---- neural-network ops (ops_nn.cpp, ops_loss.cpp) ---------------------------------------
// weight [V, D], ids any shape -> [ids..., D]; backward scatter-adds into weight rows.
Tensor embedding(const Tensor& weight, const IntTensor& ids);
// Over the last axis. weight/bias [D] may be undefined (no affine part).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps = 1e-5f);
// x / sqrt(|x|^2 + eps): the delta rule's L2 norm of q and k (fla's l2_norm), with the bits of
// mul_scalar(rms_norm(x, {}, eps / D), 1 / sqrt(D)).
Tensor l2_norm(const Tensor& x, float eps = 1e-6f);
// While alive, the three norms take every row width through their loop for any width, instead of
// the loops compiled for the common widths (16 to 256): tests compare the two, whose bits must
// be the same. Not thread-safe: for a test's main thread.
class GeneralNormWidths {
 public:
  GeneralNormWidths();
  ~GeneralNormWidths();
  GeneralNormWidths(const GeneralNormWidths&) = delete;
  GeneralNormWidths& operator=(const GeneralNormWidths&) = delete;
};
Tensor softmax(const Tensor& x);       // over the last axis
Tensor log_softmax(const Tensor& x);   // over the last axis
// Mean cross-entropy of logits [..., V] against targets [...] over the positions whose target
// is not ignore_index (PyTorch's convention, -100). Fused log-softmax, numerically stable.
constexpr int32_t kIgnoreIndex = -100;
Tensor cross_entropy(const Tensor& logits, const IntTensor& targets);
// Targets with the positions where mask == 0 replaced by kIgnoreIndex.
IntTensor masked_targets(const IntTensor& targets, const std::vector<uint8_t>& mask);
// Inverted dropout with probability p; the mask comes from (seed, counter) so runs repeat.
// Identity when !training or p == 0.
Tensor dropout(const Tensor& x, float p, bool training, uint64_t seed, uint64_t counter);
// Causal depthwise conv over time, channels last: x [B, T, C], weight [C, 1, K] (PyTorch's
// Conv1d(groups=C) layout), bias [C] or undefined. y[b,t,c] = bias[c] +
// sum_k weight[c,0,k] * x[b, t-K+1+k, c], with x = 0 before t = 0.
Tensor causal_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias);
// silu(causal_conv1d(x, weight, bias)) in one op (same shapes).
Tensor causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias);
// One decoding step of causal_conv1d (no grad): x [B, 1, C], window [B, K-1, C] holding the
// last K-1 inputs, oldest first (zeros before t = 0). Returns y [B, 1, C] with causal_conv1d's
// order of additions (so the same bits as the parallel op), and slides x into the window.
Tensor causal_conv1d_step(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& window);

// ---- feature maps (ops_features.cpp) -----------------------------------------------------
// The second-order Taylor feature map of Based (Arora et al. 2024) over the last axis:
// x [..., F] -> [..., 1 + F + F^2], concat(1, x / F^(1/4), vec(x x^T) / (sqrt(2) sqrt(F))), so
// that phi(q) . phi(k) = 1 + s + s^2 / 2 with s = q . k / sqrt(F): exp(s) to second order.
Tensor taylor_features(const Tensor& x);

}  // namespace tri
