// The time-invariant SSM with a dense state matrix (the HiPPO-LegS and S4D-Lin ablations): the
// state matrices, their bilinear discretisation per channel, and the scan
//   h_t = Ad_e h_{t-1} + Bbar_e u_t,   y_t = C_e . h_t          (per channel e, h [N])
// Shapes: B batch, T time, E channels, N state size.
// The scan runs per channel (channels are independent and own their gradients, so there is
// nothing to reduce across threads). Its backward is the reverse scan
//   dh_t = C_e dy_t + Ad_e^T dh_{t+1},  dBbar_e += u_t dh_t,  du_t = Bbar_e . dh_t,
// plus dC_e = sum_t dy_t h_t from a forward re-scan: nothing is stored between the passes.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <omp.h>

#include "framework/core/autograd.hpp"
#include "framework/kernels/ssm_dense.hpp"

namespace tri {

namespace {
}  // namespace

Tensor hippo_legs(int64_t N) {
  if (N < 1) throw Error("hippo_legs: N = " + std::to_string(N) + " must be >= 1");
  Tensor A = Tensor::zeros(Shape{N, N});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k <= n; ++k)
      A.data()[n * N + k] = n > k ? -float(std::sqrt(double(2 * n + 1) * double(2 * k + 1)))
                                  : -float(n + 1);
  return A;
}

Tensor s4d_lin_matrix(int64_t N) {
  if (N < 2 || N % 2 != 0) throw Error("s4d_lin_matrix: N = " + std::to_string(N) + " must be even and >= 2");
  Tensor A = Tensor::zeros(Shape{N, N});
  float* a = A.data();
  for (int64_t m = 0; m < N / 2; ++m) {
    const int64_t p = 2 * m, q = 2 * m + 1;
    const float w = float(std::numbers::pi * double(m));
    a[p * N + p] = -0.5f;
    a[q * N + q] = -0.5f;
    a[p * N + q] = -w;
    a[q * N + p] = w;
  }
  return A;
}

void bilinear_discretise(const Tensor& A, const Tensor& dt, Tensor& Ad, Tensor& Bd) {
  if (!A.defined() || A.dim() != 2 || A.size(0) != A.size(1))
    throw Error("bilinear_discretise: A " + shape_of(A) +
                " must be square [N, N]");
  if (!dt.defined() || dt.dim() != 1)
    throw Error("bilinear_discretise: dt " + shape_of(dt) +
                " must be [E]");
  const int64_t N = A.size(0), E = dt.size(0), W = 2 * N;
  Ad = Tensor::empty(Shape{E, N, N});
  Bd = Tensor::empty(Shape{E, N, N});
  std::vector<double> Mbuf(N * N), Rbuf(N * W);
  double *M = Mbuf.data(), *R = Rbuf.data();  // solve M [Ad | Bd] = R, R becomes [Ad | Bd]
  for (int64_t e = 0; e < E; ++e) {
    const double step = double(dt.data()[e]), h = 0.5 * step;
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < N; ++c) {
        const double a = double(A.data()[r * N + c]), id = r == c ? 1.0 : 0.0;
        M[r * N + c] = id - h * a;
        R[r * W + c] = id + h * a;
        R[r * W + N + c] = id * step;
      }
    // Gaussian elimination with partial pivoting, then back substitution.
    for (int64_t k = 0; k < N; ++k) {
      int64_t piv = k;
      for (int64_t r = k + 1; r < N; ++r)
        if (std::fabs(M[r * N + k]) > std::fabs(M[piv * N + k])) piv = r;
      if (!(std::fabs(M[piv * N + k]) > 1e-300))
        throw Error("bilinear_discretise: I - dt/2 A is singular for channel " + std::to_string(e) +
                    " (dt = " + std::to_string(step) + ")");
      if (piv != k) {
        std::swap_ranges(M + k * N, M + (k + 1) * N, M + piv * N);
        std::swap_ranges(R + k * W, R + (k + 1) * W, R + piv * W);
      }
      for (int64_t r = k + 1; r < N; ++r) {
        const double f = M[r * N + k] / M[k * N + k];
        if (f == 0.0) continue;
        for (int64_t c = k; c < N; ++c) M[r * N + c] -= f * M[k * N + c];
        for (int64_t c = 0; c < W; ++c) R[r * W + c] -= f * R[k * W + c];
      }
    }
    for (int64_t r = N - 1; r >= 0; --r)
      for (int64_t c = 0; c < W; ++c) {
        double s = R[r * W + c];
        for (int64_t k = r + 1; k < N; ++k) s -= M[r * N + k] * R[k * W + c];
        R[r * W + c] = s / M[r * N + r];
      }
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < N; ++c) {
        Ad.data()[(e * N + r) * N + c] = float(R[r * W + c]);
        Bd.data()[(e * N + r) * N + c] = float(R[r * W + N + c]);
      }
  }
}

namespace {

struct DenseArgs {
  int64_t batch, T, E, N;
};

DenseArgs dense_args(const char* op, const Tensor& u, const Tensor& Ad, const Tensor& Bbar,
                     const Tensor& C) {
  const std::string o(op);
  if (!u.defined() || u.dim() != 3)
    throw Error(o + ": u " + shape_of(u) + " must be [B, T, E]");
  DenseArgs a{u.size(0), u.size(1), u.size(2), 0};
  if (!Ad.defined() || Ad.dim() != 3 || Ad.size(0) != a.E || Ad.size(1) != Ad.size(2))
    throw Error(o + ": Ad " + shape_of(Ad) +
                " must be [E, N, N] with E = " + std::to_string(a.E));
  a.N = Ad.size(1);
  const Shape en{a.E, a.N};
  if (!Bbar.defined() || Bbar.shape() != en)
    throw Error(o + ": Bbar " + shape_of(Bbar) + " must be " + en.str());
  if (!C.defined() || C.shape() != en)
    throw Error(o + ": C " + shape_of(C) + " must be " + en.str());
  return a;
}

// Ad [N][N] transposed, so that the matrix-vector product runs along contiguous columns.
inline void transpose_into(int64_t N, const float* Ad, float* AdT) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < N; ++k) AdT[k * N + n] = Ad[n * N + k];
}

// out[n] += sum_k M[k][n] v[k] for a row-major [N][N] M: vectorised over n, adding four rows
// of M (scaled by v[k..k+3]) per pass over out, so the dependency chain through out is short.
// The order of the sums is fixed (the scan and the step share this function).
inline void add_rows_times(int64_t N, const float* M, const float* v, float* __restrict out) {
  int64_t k = 0;
  for (; k + 4 <= N; k += 4) {
    const float v0 = v[k], v1 = v[k + 1], v2 = v[k + 2], v3 = v[k + 3];
    const float *m0 = M + k * N, *m1 = m0 + N, *m2 = m1 + N, *m3 = m2 + N;
#pragma omp simd
    for (int64_t n = 0; n < N; ++n) out[n] += (m0[n] * v0 + m1[n] * v1) + (m2[n] * v2 + m3[n] * v3);
  }
  for (; k < N; ++k) {
    const float vk = v[k], *mk = M + k * N;
#pragma omp simd
    for (int64_t n = 0; n < N; ++n) out[n] += mk[n] * vk;
  }
}

// hout = Ad h + bbar u for one channel, given AdT = Ad^T; hout must not be h.
inline void dense_step(int64_t N, const float* AdT, const float* bbar, float u, const float* h,
                       float* __restrict hout) {
#pragma omp simd
  for (int64_t n = 0; n < N; ++n) hout[n] = bbar[n] * u;
  add_rows_times(N, AdT, h, hout);
}

inline float dot(int64_t N, const float* x, const float* y) {
  float s = 0.f;
  for (int64_t n = 0; n < N; ++n) s += x[n] * y[n];
  return s;
}

}  // namespace

Tensor dense_lti_scan(const Tensor& u, const Tensor& Ad, const Tensor& Bbar, const Tensor& C) {
  const DenseArgs a = dense_args("dense_lti_scan", u, Ad, Bbar, C);
  if (needs_grad({Ad}))
    throw Error("dense_lti_scan: Ad gets no gradient; pass a constant (bilinear_discretise's output)");
  const int64_t batch = a.batch, T = a.T, E = a.E, N = a.N;
  Tensor out = Tensor::empty(u.shape());
  const float *pu = u.data(), *pA = Ad.data(), *pB = Bbar.data(), *pC = C.data();
  float* py = out.data();
#pragma omp parallel
  {
    std::vector<float> AdT(N * N), h0(batch * N), h1(batch * N);
#pragma omp for schedule(static)
    for (int64_t e = 0; e < E; ++e) {
      const float *Be = pB + e * N, *Ce = pC + e * N;
      transpose_into(N, pA + e * N * N, AdT.data());
      float *h = h0.data(), *hn = h1.data();  // [batch][N]: the rows' chains interleave
      std::fill(h, h + batch * N, 0.f);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t i = (b * T + t) * E + e;
          dense_step(N, AdT.data(), Be, pu[i], h + b * N, hn + b * N);
          py[i] = dot(N, Ce, hn + b * N);
        }
        std::swap(h, hn);
      }
    }
  }
  if (!needs_grad({u, Bbar, C})) return out;
  record("dense_lti_scan", out, {u, Ad, Bbar, C}, [u, Ad, Bbar, C, a](const float* gy) {
    const int64_t batch = a.batch, T = a.T, E = a.E, N = a.N;
    const float *pu = u.data(), *pA = Ad.data(), *pB = Bbar.data(), *pC = C.data();
    float *gu = grad_of(u), *gB = grad_of(Bbar), *gC = grad_of(C);
#pragma omp parallel
    {
        std::vector<float> scratch(3 * N + N * N + 3 * batch * N);
      float *dh = scratch.data(), *accB = dh + N, *accC = accB + N, *AdT = accC + N;
      float *h = AdT + N * N, *hn = h + batch * N, *carry = hn + batch * N;  // [batch][N] each
#pragma omp for schedule(static)
      for (int64_t e = 0; e < E; ++e) {
        const float *Ae = pA + e * N * N, *Be = pB + e * N, *Ce = pC + e * N;
        std::fill(accB, accB + N, 0.f);
        std::fill(accC, accC + N, 0.f);
        if (gC) {  // dC_e = sum_t dy_t h_t, re-running the forward scan
          transpose_into(N, Ae, AdT);
          std::fill(h, h + batch * N, 0.f);
          for (int64_t t = 0; t < T; ++t) {
            for (int64_t b = 0; b < batch; ++b) {
              const int64_t i = (b * T + t) * E + e;
              float* hb = hn + b * N;
              dense_step(N, AdT, Be, pu[i], h + b * N, hb);
              for (int64_t n = 0; n < N; ++n) accC[n] += gy[i] * hb[n];
            }
            std::swap(h, hn);
          }
        }
        if (gu || gB) {  // the reverse scan; carry_b = Ad^T dh_{t+1}
          std::fill(carry, carry + batch * N, 0.f);
          for (int64_t t = T - 1; t >= 0; --t)
            for (int64_t b = 0; b < batch; ++b) {
              const int64_t i = (b * T + t) * E + e;
              float* cb = carry + b * N;
              for (int64_t n = 0; n < N; ++n) dh[n] = Ce[n] * gy[i] + cb[n];
              for (int64_t n = 0; n < N; ++n) accB[n] += pu[i] * dh[n];
              if (gu) gu[i] += dot(N, Be, dh);
              std::fill(cb, cb + N, 0.f);
              add_rows_times(N, Ae, dh, cb);  // Ad^T dh
            }
        }
        for (int64_t n = 0; n < N; ++n) {
          if (gB) gB[e * N + n] += accB[n];
          if (gC) gC[e * N + n] += accC[n];
        }
      }
    }
  });
  return out;
}

Tensor dense_lti_step(const Tensor& u, const Tensor& Ad, const Tensor& Bbar, const Tensor& C,
                      Tensor& h) {
  const DenseArgs a = dense_args("dense_lti_step", u, Ad, Bbar, C);
  if (a.T != 1) throw Error("dense_lti_step: u " + u.shape().str() + " must hold one step [B, 1, E]");
  const int64_t batch = a.batch, E = a.E, N = a.N;
  if (!h.defined() || h.shape() != Shape{batch, E, N})
    throw Error("dense_lti_step: state h " + shape_of(h) +
                " must be " + Shape{batch, E, N}.str());
  Tensor out = Tensor::empty(u.shape());
  const float *pu = u.data(), *pA = Ad.data(), *pB = Bbar.data(), *pC = C.data();
  float *ph = h.data(), *py = out.data();
#pragma omp parallel
  {
    std::vector<float> hn(N), AdT(N * N);
#pragma omp for schedule(static)
    for (int64_t e = 0; e < E; ++e) {
      transpose_into(N, pA + e * N * N, AdT.data());
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t be = b * E + e;
        dense_step(N, AdT.data(), pB + e * N, pu[be], ph + be * N, hn.data());
        std::copy(hn.begin(), hn.end(), ph + be * N);
        py[be] = dot(N, pC + e * N, hn.data());
      }
    }
  }
  h.bump_version();
  return out;
}

}  // namespace tri
