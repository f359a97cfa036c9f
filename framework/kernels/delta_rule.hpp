// The delta rule (Widrow & Hoff 1960; DeltaNet: Schlag et al. 2021, Yang et al. 2024) and its
// gated form (Gated DeltaNet: Yang, Kautz & Hatamizadeh 2025), per (batch, head):
//   S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,    o_t = scale S_t q_t
// S is Dv x Dk, S_0 = 0, alpha_t = exp(g_t) (g undefined: alpha = 1, DeltaNet). Read as a
// memory: with P = alpha_t S_{t-1} the decayed state,
//   u_t = P k_t                 what the memory returns for the key k_t
//   w_t = beta_t (v_t - u_t)    the correction: beta_t of the way from u_t to v_t
//   S_t = P + w_t k_t^T         (for a unit k_t and beta_t = 1, S_t k_t = v_t exactly: the old
//                               value at k_t is replaced, not added to as linear attention does)
// Layout: q, k [B, T, H, Dk], v [B, T, H, Dv], beta and g [B, T, H]; output [B, T, H, Dv]. The
// state is kept transposed, as linear attention's: M = S^T [B, H, Dk, Dv], row j over the values,
// so that every operation of a step is a row of Dv values times a scalar (vector lanes over Dv,
// columns independent of each other).
#pragma once
#include "framework/core/tensor.hpp"

namespace tri {

// Fused kernel: one pass over time per (batch, head) with the state in a Dk x Dv buffer, O(T Dk
// Dv) time, saving the state every 64 steps for backward. Backward recomputes each 64 steps'
// states from their checkpoint (the forward's arithmetic: the same bits) and runs the adjoint
// recurrence over them in reverse (delta_rule.cpp's header). Differentiable in q, k, v, beta, g.
// A head of 16 keys and up to 16 values keeps its state in registers; registers = false runs the
// general loop instead, with the same bits (for tests and measurements).
Tensor delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                  const Tensor& g = Tensor(), float scale = 1.f, bool registers = true);

// Naive reference: the recurrence written with ops (broadcast products and sums over the
// state, one step at a time), differentiated by the tape.
Tensor delta_rule_naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                        const Tensor& g = Tensor(), float scale = 1.f);

// The chunkwise form (delta_rule_chunked.cpp: the UT transform per chunk of C steps, the chunks
// in turn), written with ops and differentiated by the tape: the paper's parallel algorithm, as
// this CPU's GEMMs run it. It equals the fused kernel to float32 rounding; it is faster from head
// width 128, slower below (docs/ARCHITECTURE.md measures both).
Tensor delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                          const Tensor& g = Tensor(), float scale = 1.f, int64_t chunk = 64);

// Throws the one-line error of `op` when the shapes are not the layout's.
void delta_rule_check(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                      const Tensor& g);

// One recurrent step (no grad): q, k [B, 1, H, Dk], v [B, 1, H, Dv], beta and g [B, 1, H] (g
// may be undefined); updates the state M = S^T [B, H, Dk, Dv] in place and returns o [B, 1, H,
// Dv], with the fused forward's arithmetic: stepping token by token gives its bits.
Tensor delta_rule_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                       const Tensor& g, Tensor& M, float scale = 1.f);

}  // namespace tri
