// The selective scan's naive reference: a port of mamba_ssm's selective_scan_ref built from ops
// (so differentiable by the tape), beside the fused kernel (selective_scan.cpp) and the step
// (selective_scan_step.cpp). See selective_scan.hpp for the shapes.
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/kernels/scan_args.hpp"
#include "framework/kernels/selective_scan.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

using namespace scan_detail;

Tensor selective_scan_naive(const Tensor& u, const Tensor& delta, const Tensor& A,
                            const Tensor& Bm, const Tensor& Cm, const Tensor& D, const Tensor& z,
                            const Tensor& delta_bias, bool delta_softplus) {
  const ScanArgs a = scan_args("selective_scan_naive", u, delta, A, Bm, Cm, D, z, delta_bias, delta_softplus);
  const int64_t batch = a.batch, T = a.T, E = a.E, N = a.N;
  Tensor dt = delta_bias.defined() ? add(delta, delta_bias) : delta;
  if (delta_softplus) dt = softplus(dt);
  // deltaA = exp(einsum('bdl,dn->bdln')), deltaB_u = einsum('bdl,bnl,bdl->bdln'), here [B, T, E, N]
  const Tensor deltaA = exp(mul(reshape(dt, Shape{batch, T, E, 1}), A));
  const Tensor dtu = reshape(mul(dt, u), Shape{batch, T, E, 1});
  const Tensor deltaB_u = a.var_B ? mul(dtu, reshape(Bm, Shape{batch, T, 1, N})) : mul(dtu, Bm);
  // Time-major copies, so that each step is a view.
  const Tensor dA_t = permute(deltaA, {1, 0, 2, 3}), dBu_t = permute(deltaB_u, {1, 0, 2, 3});
  const Tensor C_t = a.var_C ? permute(reshape(Cm, Shape{batch, T, 1, N}), {1, 0, 2, 3}) : Tensor();
  Tensor x = Tensor::zeros(Shape{batch, E, N});
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < T; ++t) {
    x = add(mul(reshape(slice(dA_t, 0, t, t + 1), Shape{batch, E, N}), x),
            reshape(slice(dBu_t, 0, t, t + 1), Shape{batch, E, N}));
    const Tensor c = a.var_C ? reshape(slice(C_t, 0, t, t + 1), Shape{batch, 1, N}) : Cm;
    ys.push_back(reshape(sum(mul(x, c), {-1}), Shape{1, batch, E}));
  }
  Tensor y = permute(concat(ys, 0), {1, 0, 2});  // [B, T, E]
  if (D.defined()) y = add(y, mul(u, D));
  if (z.defined()) y = mul(y, silu(z));
  return y;
}

}  // namespace tri
