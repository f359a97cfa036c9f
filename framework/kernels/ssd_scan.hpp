// The state space duality (SSD) scan of Mamba 2 (Dao & Gu 2024, "Transformers are SSMs"), in its
// recurrent form, per (batch, head h) with a scalar decay per head:
//   a_t = exp(dt_t A_h)                                   (A_h < 0, dt_t > 0: a_t in (0, 1))
//   H_t = a_t H_{t-1} + dt_t x_t B_t^T                    H is P x N (head_dim x d_state), H_0 = 0
//   y_t = H_t C_t + D_h x_t
// B and C come in G groups shared by the heads: head h reads group h / (H / G) (mamba_ssm's
// "b l g n -> b l (g h) n"). The chunked (matmul) form of the paper computes the same y; on a CPU
// the recurrence is O(T P N) per head and needs no T x T blocks.
// Layout: x [B, T, H, P], dt [B, T, H] (already positive: softplus is the caller's), A [H],
// Bm and Cm [B, T, G, N], D [H] or undefined; output y [B, T, H, P]. The state is kept as rows of
// N values (vector lanes over N), one row per p.
#pragma once
#include "framework/core/tensor.hpp"

namespace tri {

// Fused kernel: one pass over time per (batch, head), O(T P N), saving the state every 32 steps
// for backward. When P and N fill whole 16-float vectors the backward runs each 32 steps from
// their saved state as products of small matrices, a group's heads together
// (ssd_scan_chunks.cpp); otherwise it recomputes each 32 steps' states (the forward's arithmetic)
// and runs the adjoint recurrence over them in reverse (ssd_scan.cpp's header). Differentiable in
// x, dt, A, Bm, Cm and D; the sums over heads, batch rows and time are taken in a fixed order, so
// results repeat bit for bit at any thread count.
Tensor ssd_scan(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                const Tensor& D = Tensor());

// While alive, ssd_scan's backward runs the recurrence (ssd_scan.cpp) where it would run the
// chunks (ssd_scan_chunks.cpp): tests compare the two. Not thread-safe: for a test's main thread.
class RecurrentSsdBackward {
 public:
  RecurrentSsdBackward();
  ~RecurrentSsdBackward();
  RecurrentSsdBackward(const RecurrentSsdBackward&) = delete;
  RecurrentSsdBackward& operator=(const RecurrentSsdBackward&) = delete;
};

// Naive reference: the recurrence written with ops (broadcast products and sums, one step at a
// time), differentiated by the tape.
Tensor ssd_scan_naive(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                      const Tensor& D = Tensor());

// The chunkwise (matrix-product) form (ssd_scan_chunked.cpp: the paper's block decomposition per
// chunk of C steps, the chunks in turn), written with ops and differentiated by the tape. It
// equals the fused kernel to float32 rounding; docs/ARCHITECTURE.md measures both forms.
Tensor ssd_scan_chunked(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                        const Tensor& D = Tensor(), int64_t chunk = 64);

// Throws the one-line error of `op` when the shapes are not the layout's.
void ssd_scan_check(const char* op, const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm,
                    const Tensor& Cm, const Tensor& D);

// One recurrent step (no grad): x [B, 1, H, P], dt [B, 1, H], Bm and Cm [B, 1, G, N]; updates
// the state [B, H, P, N] in place and returns y [B, 1, H, P], with the fused forward's arithmetic:
// stepping token by token gives its bits.
Tensor ssd_scan_step(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                     const Tensor& D, Tensor& state);

}  // namespace tri
