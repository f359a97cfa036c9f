// The time-invariant SSM with a dense state matrix (the HiPPO-LegS ablation): the LegS matrix,
// its bilinear discretisation per channel, and the scan
//   h_t = Ad_e h_{t-1} + Bbar_e u_t,   y_t = C_e . h_t          (per channel e, h [N])
// Shapes: B batch, T time, E channels, N state size.
// The scan runs per channel (channels are independent and own their gradients, so there is
// nothing to reduce across threads). Its backward is the reverse scan
//   dh_t = C_e dy_t + Ad_e^T dh_{t+1},  dBbar_e += u_t dh_t,  du_t = Bbar_e . dh_t,
// plus dC_e = sum_t dy_t h_t from a forward re-scan: nothing is stored between the passes.
#include <cmath>
#include <string>
#include <vector>

#include <omp.h>

#include "autograd.hpp"
#include "selective_scan.hpp"

namespace tri {

Tensor hippo_legs(int64_t N) {
  if (N < 1) throw Error("hippo_legs: N = " + std::to_string(N) + " must be >= 1");
  Tensor A = Tensor::zeros(Shape{N, N});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k <= n; ++k)
      A.data()[n * N + k] = n > k ? -float(std::sqrt(double(2 * n + 1) * double(2 * k + 1)))
                                  : -float(n + 1);
  return A;
}

void bilinear_discretise(const Tensor& A, const Tensor& dt, Tensor& Ad, Tensor& Bd) {
  if (!A.defined() || A.dim() != 2 || A.size(0) != A.size(1))
    throw Error("bilinear_discretise: A " + (A.defined() ? A.shape().str() : std::string("undefined")) +
                " must be square [N, N]");
  if (!dt.defined() || dt.dim() != 1)
    throw Error("bilinear_discretise: dt " + (dt.defined() ? dt.shape().str() : std::string("undefined")) +
                " must be [E]");
  const int64_t N = A.size(0), E = dt.size(0), W = 2 * N;
  Ad = Tensor::empty(Shape{E, N, N});
  Bd = Tensor::empty(Shape{E, N, N});
  std::vector<double> M(N * N), R(size_t(N * W));  // solve M [Ad | Bd] = R
  for (int64_t e = 0; e < E; ++e) {
    const double h = 0.5 * double(dt.data()[e]);
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < N; ++c) {
        const double a = double(A.data()[r * N + c]), id = r == c ? 1.0 : 0.0;
        M[size_t(r * N + c)] = id - h * a;
        R[size_t(r * W + c)] = id + h * a;
        R[size_t(r * W + N + c)] = id * double(dt.data()[e]);
      }
    // Gaussian elimination with partial pivoting, then back substitution (in place in R).
    for (int64_t k = 0; k < N; ++k) {
      int64_t piv = k;
      for (int64_t r = k + 1; r < N; ++r)
        if (std::fabs(M[size_t(r * N + k)]) > std::fabs(M[size_t(piv * N + k)])) piv = r;
      if (!(std::fabs(M[size_t(piv * N + k)]) > 1e-300))
        throw Error("bilinear_discretise: I - dt/2 A is singular for channel " + std::to_string(e) +
                    " (dt = " + std::to_string(dt.data()[e]) + ")");
      if (piv != k) {
        for (int64_t c = 0; c < N; ++c) std::swap(M[size_t(k * N + c)], M[size_t(piv * N + c)]);
        for (int64_t c = 0; c < W; ++c) std::swap(R[size_t(k * W + c)], R[size_t(piv * W + c)]);
      }
      for (int64_t r = k + 1; r < N; ++r) {
        const double f = M[size_t(r * N + k)] / M[size_t(k * N + k)];
        if (f == 0.0) continue;
        for (int64_t c = k; c < N; ++c) M[size_t(r * N + c)] -= f * M[size_t(k * N + c)];
        for (int64_t c = 0; c < W; ++c) R[size_t(r * W + c)] -= f * R[size_t(k * W + c)];
      }
    }
    for (int64_t r = N - 1; r >= 0; --r)
      for (int64_t c = 0; c < W; ++c) {
        double s = R[size_t(r * W + c)];
        for (int64_t k = r + 1; k < N; ++k) s -= M[size_t(r * N + k)] * R[size_t(k * W + c)];
        R[size_t(r * W + c)] = s / M[size_t(r * N + r)];
      }
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < N; ++c) {
        Ad.data()[(e * N + r) * N + c] = float(R[size_t(r * W + c)]);
        Bd.data()[(e * N + r) * N + c] = float(R[size_t(r * W + N + c)]);
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
    throw Error(o + ": u " + (u.defined() ? u.shape().str() : std::string("undefined")) + " must be [B, T, E]");
  DenseArgs a{u.size(0), u.size(1), u.size(2), 0};
  if (!Ad.defined() || Ad.dim() != 3 || Ad.size(0) != a.E || Ad.size(1) != Ad.size(2))
    throw Error(o + ": Ad " + (Ad.defined() ? Ad.shape().str() : std::string("undefined")) +
                " must be [E, N, N] with E = " + std::to_string(a.E));
  a.N = Ad.size(1);
  const Shape en{a.E, a.N};
  if (!Bbar.defined() || Bbar.shape() != en)
    throw Error(o + ": Bbar " + (Bbar.defined() ? Bbar.shape().str() : std::string("undefined")) + " must be " + en.str());
  if (!C.defined() || C.shape() != en)
    throw Error(o + ": C " + (C.defined() ? C.shape().str() : std::string("undefined")) + " must be " + en.str());
  return a;
}

// Ad [N][N] transposed, so that the matrix-vector product runs along contiguous columns.
inline void transpose_into(int64_t N, const float* Ad, float* AdT) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < N; ++k) AdT[k * N + n] = Ad[n * N + k];
}

// hout = Ad h + bbar u for one channel, given AdT = Ad^T; hout must not be h. Vectorised over
// n: column k of Ad scaled by h[k] is added for k = 0, 1, ... (a fixed order).
inline void dense_step(int64_t N, const float* AdT, const float* bbar, float u, const float* h,
                       float* __restrict hout) {
#pragma omp simd
  for (int64_t n = 0; n < N; ++n) hout[n] = bbar[n] * u;
  for (int64_t k = 0; k < N; ++k) {
    const float hk = h[k], *col = AdT + k * N;
#pragma omp simd
    for (int64_t n = 0; n < N; ++n) hout[n] += col[n] * hk;
  }
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
    std::vector<float> h0(N), h1(N), AdT(N * N);
#pragma omp for schedule(static)
    for (int64_t e = 0; e < E; ++e) {
      const float *Be = pB + e * N, *Ce = pC + e * N;
      transpose_into(N, pA + e * N * N, AdT.data());
      for (int64_t b = 0; b < batch; ++b) {
        float *h = h0.data(), *hn = h1.data();
        std::fill(h, h + N, 0.f);
        for (int64_t t = 0; t < T; ++t) {
          const int64_t i = (b * T + t) * E + e;
          dense_step(N, AdT.data(), Be, pu[i], h, hn);
          py[i] = dot(N, Ce, hn);
          std::swap(h, hn);
        }
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
      std::vector<float> h0(N), h1(N), dh(N), carry(N),
          accB(N), accC(N), AdT(N * N);
#pragma omp for schedule(static)
      for (int64_t e = 0; e < E; ++e) {
        const float *Ae = pA + e * N * N, *Be = pB + e * N, *Ce = pC + e * N;
        if (gC) transpose_into(N, Ae, AdT.data());
        std::fill(accB.begin(), accB.end(), 0.f);
        std::fill(accC.begin(), accC.end(), 0.f);
        for (int64_t b = 0; b < batch; ++b) {
          if (gC) {  // dC_e = sum_t dy_t h_t, re-running the forward scan
            float *h = h0.data(), *hn = h1.data();
            std::fill(h, h + N, 0.f);
            for (int64_t t = 0; t < T; ++t) {
              const int64_t i = (b * T + t) * E + e;
              dense_step(N, AdT.data(), Be, pu[i], h, hn);
              for (int64_t n = 0; n < N; ++n) accC[size_t(n)] += gy[i] * hn[n];
              std::swap(h, hn);
            }
          }
          if (!gu && !gB) continue;
          std::fill(carry.begin(), carry.end(), 0.f);  // Ad^T dh_{t+1}
          for (int64_t t = T - 1; t >= 0; --t) {
            const int64_t i = (b * T + t) * E + e;
            for (int64_t n = 0; n < N; ++n) dh[size_t(n)] = Ce[n] * gy[i] + carry[size_t(n)];
            for (int64_t n = 0; n < N; ++n) accB[size_t(n)] += pu[i] * dh[size_t(n)];
            if (gu) gu[i] += dot(N, Be, dh.data());
            std::fill(carry.begin(), carry.end(), 0.f);
            for (int64_t n = 0; n < N; ++n) {
              const float d = dh[size_t(n)];
              const float* row = Ae + n * N;
              for (int64_t k = 0; k < N; ++k) carry[size_t(k)] += row[k] * d;
            }
          }
        }
        for (int64_t n = 0; n < N; ++n) {
          if (gB) gB[e * N + n] += accB[size_t(n)];
          if (gC) gC[e * N + n] += accC[size_t(n)];
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
    throw Error("dense_lti_step: state h " + (h.defined() ? h.shape().str() : std::string("undefined")) +
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
