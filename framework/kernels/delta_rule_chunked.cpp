// The delta rule in its chunkwise form (DeltaNet, Yang et al. 2024, section 3: the WY
// representation by the UT transform; Gated DeltaNet's decayed form), written with ops and
// differentiated by the tape (delta_rule.hpp). Per chunk of C steps, with M = S^T the state
// before it and, for the gated rule, G_t = g_1 + ... + g_t inside the chunk (gamma_t = exp(G_t)):
//   A_ti  = beta_t (k_t . k_i) exp(G_t - G_i)        for i < t, 0 elsewhere   (C x C)
//   u     = (I + A)^-1 (beta v - gamma beta K M)    the corrections, all C at once
//   O     = scale (gamma Q M + (Q K^T (.) E) u)     E_ti = exp(G_t - G_i) for i <= t, 0 elsewhere
//   M'    = gamma_C M + (exp(G_C - G) K)^T u
// (the recurrence unrolled: S_t = gamma_t S_0 + sum_{i <= t} exp(G_t - G_i) u_i k_i^T, so
// u_t = beta_t (v_t - alpha_t S_{t-1} k_t) is a unit lower-triangular system in the u's).
// (I + A)^-1 by forward substitution (unit_lower_inverse). The chunks run in turn.
#include <string>

#include "framework/kernels/delta_rule.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

namespace {

// A constant C x C matrix: 1 where pick(t, i), else 0.
template <class Pick>
Tensor mask_of(int64_t C, Pick pick) {
  std::vector<float> m(size_t(C * C));
  for (int64_t t = 0; t < C; ++t)
    for (int64_t i = 0; i < C; ++i) m[size_t(t * C + i)] = pick(t, i) ? 1.f : 0.f;
  return Tensor::from(Shape{C, C}, m);
}

// x [B, T, H, D] padded with zero steps to n C, as [n, B, H, C, D]: chunk c is slice c. Zero
// steps (k = 0, beta = 0, g = 0) leave the state as it is.
Tensor chunks_of(const Tensor& x, int64_t C, int64_t n) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3);
  Tensor padded = n * C == T ? x : concat({x, Tensor::zeros(Shape{B, n * C - T, H, D})}, 1);
  return permute(reshape(padded, Shape{B, n, C, H, D}), {1, 0, 3, 2, 4});
}

Tensor chunk(const Tensor& chunks, int64_t c) {
  const std::vector<int64_t> dims = chunks.shape().vec();
  return reshape(slice(chunks, 0, c, c + 1), Shape(std::vector<int64_t>(dims.begin() + 1, dims.end())));
}

// (I + A)^-1 for A [..., C, C] strictly lower triangular, by forward substitution: row t of R is
// e_t - sum_{i < t} A_ti R_i. (A power series, (I - A)(I + A^2)(I + A^4)..., would be GEMMs,
// but with the models' similar keys A's powers grow like binomial coefficients and cancel.) The
// gradient, dA = -R^T dR R^T, comes from the tape through R - R (A - A') R, where A' is a copy
// of A: its value is R exactly (A - A' is zero), and its derivative in A is -R dA R.
Tensor unit_lower_inverse(const Tensor& A, int64_t C) {
  Tensor R = Tensor::zeros(A.shape());
  const int64_t matrices = A.numel() / (C * C);
#pragma omp parallel for schedule(static) if (matrices > 1)
  for (int64_t m = 0; m < matrices; ++m) {
    const float* a = A.data() + m * C * C;
    float* r = R.data() + m * C * C;
    for (int64_t t = 0; t < C; ++t) {
      float* row = r + t * C;
      row[t] = 1.f;
      for (int64_t i = 0; i < t; ++i) {
        const float ati = a[t * C + i];
        for (int64_t j = 0; j <= i; ++j) row[j] -= ati * r[i * C + j];
      }
    }
  }
  if (!needs_grad({A})) return R;
  return sub(R, matmul(matmul(R, sub(A, A.clone())), R));
}

}  // namespace

Tensor delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, const Tensor& g,
                          float scale, int64_t C) {
  if (C < 1) throw Error("delta_rule_chunked: chunk " + std::to_string(C) + " must be at least 1");
  // The shape checks are the fused kernel's; its T = 0 call costs nothing.
  if (q.dim() != 4 || k.shape() != q.shape() || v.dim() != 4 || beta.dim() != 3 || (g.defined() && g.dim() != 3))
    delta_rule(q, k, v, beta, g, scale);
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), Dk = q.size(3), Dv = v.size(3);
  const int64_t n = (T + C - 1) / C;
  const bool gated = g.defined();
  const Tensor Qc = chunks_of(q, C, n), Kc = chunks_of(k, C, n), Vc = chunks_of(v, C, n);
  const Tensor betac = chunks_of(reshape(beta, Shape{B, T, H, 1}), C, n);  // [n, B, H, C, 1]
  const Tensor gc = gated ? chunks_of(reshape(g, Shape{B, T, H, 1}), C, n) : Tensor();
  const Tensor strict = mask_of(C, [](int64_t t, int64_t i) { return i < t; });
  const Tensor causal = mask_of(C, [](int64_t t, int64_t i) { return i <= t; });
  const Tensor upper = mask_of(C, [](int64_t t, int64_t i) { return t <= i; });  // cumsum as g^T U
  const Tensor last = Tensor::from(Shape{C, 1}, [C] {  // picks step C of a chunk
    std::vector<float> e(size_t(C), 0.f);
    e.back() = 1.f;
    return e;
  }());
  Tensor M = Tensor::zeros(Shape{B, H, Dk, Dv});
  std::vector<Tensor> outs;
  for (int64_t c = 0; c < n; ++c) {
    const Tensor Q = chunk(Qc, c), K = chunk(Kc, c), V = chunk(Vc, c), b = chunk(betac, c);  // b [B, H, C, 1]
    Tensor A = mul(matmul(mul(K, b), K, false, true), strict);  // beta_t k_t . k_i, i < t
    Tensor E = causal, gamma, decay_to_end, gamma_end;
    if (gated) {
      const Tensor G = reshape(matmul(reshape(chunk(gc, c), Shape{B, H, 1, C}), upper), Shape{B, H, C, 1});
      const Tensor Grow = reshape(G, Shape{B, H, 1, C});
      // exp of the masked difference, then masked again: above the diagonal G_t - G_i >= 0 may overflow.
      E = mul(exp(mul(sub(G, Grow), causal)), causal);
      A = mul(A, E);
      gamma = exp(G);
      const Tensor G_end = matmul(Grow, last);  // [B, H, 1, 1]
      decay_to_end = exp(sub(G_end, G));
      gamma_end = exp(G_end);
    }
    const Tensor inverse = unit_lower_inverse(A, C);
    const Tensor KbM = matmul(mul(K, b), M);  // beta K M [B, H, C, Dv]
    const Tensor u = matmul(inverse, sub(mul(V, b), gated ? mul(KbM, gamma) : KbM));
    const Tensor QM = matmul(Q, M);
    outs.push_back(mul_scalar(add(gated ? mul(QM, gamma) : QM, matmul(mul(matmul(Q, K, false, true), E), u)), scale));
    M = gated ? add(mul(M, gamma_end), matmul(mul(K, decay_to_end), u, true, false)) : add(M, matmul(K, u, true, false));
  }
  // [n, B, H, C, Dv] -> [n C, B, H, Dv], the padding cut, -> [B, T, H, Dv].
  std::vector<Tensor> stacked;
  for (const Tensor& o : outs) stacked.push_back(reshape(o, Shape{1, B, H, C, Dv}));
  const Tensor time_major = reshape(permute(concat(stacked, 0), {0, 3, 1, 2, 4}), Shape{n * C, B, H, Dv});
  return permute(slice(time_major, 0, 0, T), {1, 0, 2, 3});
}

}  // namespace tri
