// The selective scan of Mamba (Gu & Dao 2023), with the official argument set of
// mamba_ssm's selective_scan_fn, in channels-last layout (ours: [B, T, E]; theirs: [B, E, T]).
//   u, delta [B, T, E];  A [E, N];  Bm, Cm [B, T, N] (selective) or [E, N] (time-invariant);
//   D [E] or undefined;  z [B, T, E] or undefined;  delta_bias [E] or undefined.
//   dt = delta + delta_bias, then softplus(dt) when delta_softplus
//   h_t = exp(dt_t A) * h_{t-1} + dt_t * B_t * u_t        (per channel e: h is [N])
//   y_t = C_t . h_t + D * u_t;   y_t *= silu(z_t) when z is given
// Output y [B, T, E]. fp32, sequential in time.
#pragma once
#include "framework/core/tensor.hpp"

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

}  // namespace tri
