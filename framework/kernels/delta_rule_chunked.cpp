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
#include <optional>
#include <string>

#include "framework/kernels/chunks.hpp"
#include "framework/kernels/delta_rule.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

namespace {

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
  delta_rule_check("delta_rule_chunked", q, k, v, beta, g);
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), Dk = q.size(3), Dv = v.size(3);
  const int64_t n = (T + C - 1) / C;
  const bool gated = g.defined();
  const Tensor Qc = chunks::split(q, C, n), Kc = chunks::split(k, C, n), Vc = chunks::split(v, C, n);
  const Tensor betac = chunks::split(reshape(beta, Shape{B, T, H, 1}), C, n);  // [n, B, H, C, 1]
  const Tensor gc = gated ? chunks::split(reshape(g, Shape{B, T, H, 1}), C, n) : Tensor();
  const Tensor strict = chunks::mask_of(C, [](int64_t t, int64_t i) { return i < t; });
  const chunks::DecayMasks masks(C);
  const Tensor& causal = masks.causal;
  Tensor M = Tensor::zeros(Shape{B, H, Dk, Dv});
  std::vector<Tensor> outs;
  for (int64_t c = 0; c < n; ++c) {
    const Tensor Q = chunks::at(Qc, c), K = chunks::at(Kc, c), V = chunks::at(Vc, c), b = chunks::at(betac, c);  // b [B, H, C, 1]
    Tensor A = mul(matmul(mul(K, b), K, false, true), strict);  // beta_t k_t . k_i, i < t
    std::optional<chunks::Decay> decay;
    if (gated) {
      decay.emplace(chunks::at(gc, c), masks);
      A = mul(A, decay->within);
    }
    const Tensor inverse = unit_lower_inverse(A, C);
    const Tensor KbM = matmul(mul(K, b), M);  // beta K M [B, H, C, Dv]
    const Tensor u = matmul(inverse, sub(mul(V, b), gated ? mul(KbM, decay->from_start) : KbM));
    const Tensor QM = matmul(Q, M), E = gated ? decay->within : causal;
    outs.push_back(mul_scalar(add(gated ? mul(QM, decay->from_start) : QM, matmul(mul(matmul(Q, K, false, true), E), u)), scale));
    M = gated ? add(mul(M, decay->whole), matmul(mul(K, decay->to_end), u, true, false)) : add(M, matmul(K, u, true, false));
  }
  return chunks::join(outs, T);
}

}  // namespace tri
