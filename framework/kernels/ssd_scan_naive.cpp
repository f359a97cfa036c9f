// The SSD scan's naive reference (ssd_scan.hpp): the recurrence written with ops, one step at a
// time, differentiated by the tape.
#include "framework/kernels/ssd_rows.hpp"
#include "framework/kernels/ssd_scan.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

using namespace ssd_detail;

Tensor ssd_scan_naive(const Tensor& x, const Tensor& dt, const Tensor& A, const Tensor& Bm, const Tensor& Cm,
                      const Tensor& D) {
  const Dims d = check_inputs("ssd_scan_naive", x, dt, A, Bm, Cm, D);
  const int64_t B = d.B, G = d.G, hg = d.hg, P = d.P, N = d.N;
  // Heads as [G, hg] so that a group's B and C broadcast over its heads; time-major for views.
  const Tensor xt = permute(x, {1, 0, 2, 3}), dtt = permute(dt, {1, 0, 2});
  const Tensor Bt = permute(Bm, {1, 0, 2, 3}), Ct = permute(Cm, {1, 0, 2, 3});
  const Tensor Ah = reshape(A, Shape{1, G, hg, 1, 1});
  Tensor S = Tensor::zeros(Shape{B, G, hg, P, N});
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < d.T; ++t) {
    const Tensor xs = reshape(slice(xt, 0, t, t + 1), Shape{B, G, hg, P, 1});
    const Tensor ds = reshape(slice(dtt, 0, t, t + 1), Shape{B, G, hg, 1, 1});
    const Tensor bs = reshape(slice(Bt, 0, t, t + 1), Shape{B, G, 1, 1, N});
    const Tensor cs = reshape(slice(Ct, 0, t, t + 1), Shape{B, G, 1, 1, N});
    S = add(mul(S, exp(mul(ds, Ah))), mul(mul(ds, xs), bs));  // a H + dt x B^T
    Tensor y = sum(mul(S, cs), {4});                           // H C: [B, G, hg, P]
    if (D.defined()) y = add(y, mul(reshape(xs, Shape{B, G, hg, P}), reshape(D, Shape{1, G, hg, 1})));
    outs.push_back(reshape(y, Shape{1, B, d.H, P}));
  }
  return permute(concat(outs, 0), {1, 0, 2, 3});
}

}  // namespace tri
