// The time-invariant SSM with a dense state matrix (the book's HiPPO-LegS ablation, and
// S4D-Lin's complex diagonal written as real 2x2 blocks): the state matrices, their bilinear
// discretisation per channel, and the scan (ssm_dense.cpp).
#pragma once
#include <cstdint>

#include "framework/core/tensor.hpp"

namespace tri {

// HiPPO-LegS (book §9.2): A[n][k] = -sqrt((2n+1)(2k+1)) for n > k, -(n+1) for n = k, 0 above.
Tensor hippo_legs(int64_t N);
// S4D-Lin's N/2 complex modes A_m = -1/2 + i pi m as real 2x2 blocks
// [[-1/2, -pi m], [pi m, -1/2]] on the coordinates (2m, 2m+1); N even.
Tensor s4d_lin_matrix(int64_t N);
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
