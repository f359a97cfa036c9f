// The SSD scan in its chunkwise (matrix-product) form (Dao & Gu 2024, section 6: the block
// decomposition of the semiseparable matrix), written with ops and differentiated by the tape
// (ssd_scan.hpp). Per chunk of C steps and head, with H the state before it and l_t = dt_t A_h
// (the log decay), L_t = l_1 + ... + l_t inside the chunk:
//   Y   = ((C B^T) (.) E) (dt x) + exp(L) (C H^T)      E_ti = exp(L_t - L_i) for i <= t, else 0
//   H'  = exp(L_C) H + (exp(L_C - L) dt x)^T B
// then y = Y + D x over the whole sequence. The diagonal blocks are the quadratic (attention-like)
// form, the state carries the rest; the chunks run in turn.
#include <string>

#include "framework/kernels/chunks.hpp"
#include "framework/kernels/ssd_scan.hpp"

namespace tri {

namespace {

// Bm [B, T, G, N] as [B, T, H, N]: head h reads group h / (H / G).
Tensor per_head(const Tensor& Bm, int64_t H) {
  const int64_t G = Bm.size(2);
  if (G == H) return Bm;
  const Tensor groups = permute(Bm, {2, 0, 1, 3});  // [G, B, T, N]: a group is a slice
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < H; ++h) heads.push_back(slice(groups, 0, h / (H / G), h / (H / G) + 1));
  return permute(concat(heads, 0), {1, 2, 0, 3});
}

}  // namespace

Tensor ssd_scan_chunked(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                        const Tensor& D, int64_t C) {
  if (C < 1) throw Error("ssd_scan_chunked: chunk " + std::to_string(C) + " must be at least 1");
  ssd_scan_check("ssd_scan_chunked", x, dt, A, Bm, Cm, D);
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), P = x.size(3), N = Bm.size(3);
  const int64_t n = (T + C - 1) / C;
  const Tensor dt4 = reshape(dt, Shape{B, T, H, 1});
  const Tensor Xc = chunks::split(mul(x, dt4), C, n);                          // dt x, [n, B, H, C, P]
  const Tensor lc = chunks::split(mul(dt4, reshape(A, Shape{H, 1})), C, n);    // l = dt A, [n, B, H, C, 1]
  const Tensor Bc = chunks::split(per_head(Bm, H), C, n), Cc = chunks::split(per_head(Cm, H), C, n);
  const chunks::DecayMasks masks(C);
  Tensor state = Tensor::zeros(Shape{B, H, P, N});
  std::vector<Tensor> outs;
  for (int64_t c = 0; c < n; ++c) {
    const Tensor X = chunks::at(Xc, c), Bs = chunks::at(Bc, c), Cs = chunks::at(Cc, c);
    const chunks::Decay decay(chunks::at(lc, c), masks);
    const Tensor scores = mul(matmul(Cs, Bs, false, true), decay.within);  // [B, H, C, C]
    outs.push_back(add(matmul(scores, X), mul(matmul(Cs, state, false, true), decay.from_start)));
    state = add(mul(state, decay.whole), matmul(mul(X, decay.to_end), Bs, true, false));
  }
  const Tensor y = chunks::join(outs, T);
  return D.defined() ? add(y, mul(x, reshape(D, Shape{H, 1}))) : y;
}

}  // namespace tri
