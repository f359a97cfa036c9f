// The selective scan of Mamba (Gu & Dao 2023), with the official argument set of
// mamba_ssm's selective_scan_fn, in channels-last layout (ours: [B, T, E]; theirs: [B, E, T]).
//   u, delta [B, T, E];  A [E, N];  Bm, Cm [B, T, N] (selective) or [E, N] (time-invariant);
//   D [E] or undefined;  z [B, T, E] or undefined;  delta_bias [E] or undefined.
//   dt = delta + delta_bias, then softplus(dt) when delta_softplus
//   h_t = exp(dt_t A) * h_{t-1} + dt_t * B_t * u_t        (per channel e: h is [N])
//   y_t = C_t . h_t + D * u_t;   y_t *= silu(z_t) when z is given
// Output y [B, T, E]. fp32, sequential in time.
#pragma once
#include "tensor.hpp"

namespace tri {

// Fused kernel: forward keeps h in registers, saving it every `chunk` steps; backward
// recomputes each chunk's states from its checkpoint and runs the adjoint recurrence.
Tensor selective_scan(const Tensor& u, const Tensor& delta, const Tensor& A, const Tensor& Bm,
                      const Tensor& Cm, const Tensor& D, const Tensor& z,
                      const Tensor& delta_bias, bool delta_softplus);

// Naive reference, a port of mamba_ssm's selective_scan_ref built from ops (differentiable).
Tensor selective_scan_naive(const Tensor& u, const Tensor& delta, const Tensor& A,
                            const Tensor& Bm, const Tensor& Cm, const Tensor& D, const Tensor& z,
                            const Tensor& delta_bias, bool delta_softplus);

// One recurrent step (no grad): u, delta, z [B, 1, E]; Bm, Cm [B, 1, N] or [E, N];
// h [B, E, N] updated in place; returns y [B, 1, E].
Tensor selective_scan_step(const Tensor& u, const Tensor& delta, const Tensor& A,
                           const Tensor& Bm, const Tensor& Cm, const Tensor& D, const Tensor& z,
                           const Tensor& delta_bias, bool delta_softplus, Tensor& h);

// ---- time-invariant SSM with a dense state matrix (the book's HiPPO-LegS ablation) ---------
// HiPPO-LegS (book §9.2): A[n][k] = -sqrt((2n+1)(2k+1)) for n > k, -(n+1) for n = k, 0 above.
Tensor hippo_legs(int64_t N);
// Bilinear discretisation with a fixed step per channel, dt [E]:
//   Ad_e = (I - dt_e/2 A)^-1 (I + dt_e/2 A),   Bd_e = (I - dt_e/2 A)^-1 dt_e   (both [E, N, N])
// so that the discrete input matrix is Bd_e @ B_e for a learned B_e [N]. No grad.
void bilinear_discretise(const Tensor& A, const Tensor& dt, Tensor& Ad, Tensor& Bd);
// h_t = Ad_e h_{t-1} + Bbar_e u_t, y_t = C_e . h_t   (per channel e; u [B, T, E], Ad [E, N, N]
// constant, Bbar, C [E, N] differentiable). Output y [B, T, E]. Forward and reverse scans.
Tensor dense_lti_scan(const Tensor& u, const Tensor& Ad, const Tensor& Bbar, const Tensor& C);
// One recurrent step (no grad) of the same: u [B, 1, E], h [B, E, N] in place.
Tensor dense_lti_step(const Tensor& u, const Tensor& Ad, const Tensor& Bbar, const Tensor& C, Tensor& h);

}  // namespace tri
