// silu(causal_conv1d(x, weight, bias)) as one op (Mamba's x branch). Fused, it writes one
// [B, T, C] tensor forward instead of two, reads x and the incoming gradient once backward, and
// takes SiLU's exponential from exp_approx (vectorised) rather than libm's expf.
// The pre-activation is not kept: the backward recomputes it (K multiply-adds per element) in
// the same order as causal_conv1d (bias, then the taps oldest to newest), so it has the same
// bits as causal_conv1d's output.
// Threads: forward and d x split the rows; d weight and d bias split the channels, each channel
// summed over (batch, time) in row order by one thread. The bits do not depend on the thread
// count.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/ops/ops.hpp"
#include "framework/simd/lanes.hpp"
#include "framework/simd/vec_math.hpp"

namespace tri {

namespace {

constexpr int64_t kChannelBlock = 64;  // channels per work item of d weight, d bias

struct Conv {
  int64_t B, T, C, K;
  const float* x;
  std::vector<float> wt;  // weight transposed to [K][C]: a tap reads a contiguous row
  const float* bias;      // or null

  Conv(const Tensor& xs, const Tensor& weight, const Tensor& b)
      : B(xs.size(0)), T(xs.size(1)), C(xs.size(2)), K(weight.size(2)), x(xs.data()),
        wt(size_t(K * C)), bias(b.defined() ? b.data() : nullptr) {
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < K; ++k) wt[size_t(k * C + c)] = weight.data()[c * K + k];
  }

  // The pre-activation of row (bi, t) into z[0, C): each 16 channels summed in a register, the
  // rest in z (the same operations in the same order).
  void row(int64_t bi, int64_t t, float* __restrict z) const {
    using namespace lanes;
    const int64_t first = std::max<int64_t>(0, K - 1 - t);  // the first tap inside the sequence
    const int64_t row0 = bi * T + t - K + 1;                 // tap k reads row row0 + k
    int64_t c0 = 0;
    for (; c0 + kLanes <= C; c0 += kLanes) {
      Lanes acc = bias ? ld(bias + c0) : Lanes{};
      for (int64_t k = first; k < K; ++k) acc = acc + ld(wt.data() + k * C + c0) * ld(x + (row0 + k) * C + c0);
      st(z + c0, acc);
    }
    if (c0 == C) return;
    for (int64_t c = c0; c < C; ++c) z[c] = bias ? bias[c] : 0.f;
    for (int64_t k = first; k < K; ++k) {
      const float *xr = x + (row0 + k) * C, *w = wt.data() + k * C;
      for (int64_t c = c0; c < C; ++c) z[c] += w[c] * xr[c];
    }
  }
};

// d weight and d bias of the 16 channels from c1, with KC taps, their sums in registers through
// the rows.
template <int KC>
void register_sums(const Conv& cv, const float* gz, int64_t c1, float* gw, float* gb) {
  using namespace lanes;
  const int64_t T = cv.T, C = cv.C, rows = cv.B * cv.T;
  Lanes acc[KC] = {}, sb = {};
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    const Lanes d = ld(gz + r * C + c1);
    sb += d;
    for (int64_t k = 0; k < KC; ++k)
      if (t - KC + 1 + k >= 0) acc[k] += d * ld(cv.x + (r - KC + 1 + k) * C + c1);
  }
  for (int l = 0; l < kLanes; ++l) {
    if (gb) gb[c1 + l] += sb[l];
    if (gw)
      for (int64_t k = 0; k < KC; ++k) gw[(c1 + l) * KC + k] += acc[k][l];
  }
}

// d weight and d bias of channels [c0, c0 + nc), given d pre-activation gz: each channel's sums
// over the rows (batch, time) in row order. KC: the number of taps when known at compile time;
// then the sums of each 16 channels stay in registers (register_sums: the same operations in the
// same order as the plain loops below, which keep them in memory, a store and a reload per row).
template <int KC>
void weight_sums(const Conv& cv, const float* gz, int64_t c0, int64_t nc, float* gw, float* gb) {
  const int64_t T = cv.T, C = cv.C, K = KC ? KC : cv.K, rows = cv.B * cv.T;
  int64_t done = 0;
  if constexpr (KC > 0)
    for (; done + lanes::kLanes <= nc; done += lanes::kLanes)
      register_sums<KC>(cv, gz, c0 + done, gw, gb);
  const int64_t n = nc - done, cr = c0 + done;  // the channels left: plain loops
  if (n == 0) return;
  std::vector<float> acc(size_t(K * n), 0.f), sb(size_t(n), 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    const float* dr = gz + r * C + cr;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) sb[c] += dr[c];
    for (int64_t k = 0; k < K; ++k) {
      const int64_t ts = t - K + 1 + k;
      if (ts < 0) continue;
      const float* xr = cv.x + (r - t + ts) * C + cr;
      float* a = acc.data() + k * n;
#pragma omp simd
      for (int64_t c = 0; c < n; ++c) a[c] += dr[c] * xr[c];
    }
  }
  for (int64_t c = 0; c < n; ++c) {
    if (gb) gb[cr + c] += sb[c];
    if (gw)
      for (int64_t k = 0; k < K; ++k) gw[(cr + c) * K + k] += acc[k * n + c];
  }
}

// The backward in one pass, when the channels come in whole vectors and K is known (KC): the
// rows in order, each recomputing d z (the first pass's operations, below), adding to d weight and
// d bias (register_sums' operations, its sums kept in L1) and writing d x K-1 rows behind (the d x
// pass'), from d z's last K rows kept in a ring. It reads x and g once and writes d x, where the
// passes below also write d z whole and read it twice. Whole rows, not a 16-channel column down
// all rows: each row's channels are contiguous, so the reads stream, where a column read one
// cache line per row and page. Threads split the channels into contiguous ranges, so each
// channel's sums run over the rows in order on one thread: the passes' bits at any thread count.
template <int KC>
void backward_rows(const Conv& cv, const float* g, float* gx, bool gx_fresh, float* gw, float* gb,
                   int64_t c0, int64_t c1) {
  using namespace lanes;
  const int64_t T = cv.T, C = cv.C, n = c1 - c0;
  if (n <= 0) return;
  std::vector<float> buf(size_t((2 * KC + 1) * n), 0.f);
  float *acc = buf.data(), *ring = acc + KC * n, *sb = ring + KC * n;  // acc[k][c]; d z of row t at ring[t % KC]
  const float *x = cv.x + c0, *wt = cv.wt.data() + c0, *bias = cv.bias ? cv.bias + c0 : nullptr;
  for (int64_t b = 0; b < cv.B; ++b)
    for (int64_t t = 0; t < T + KC - 1; ++t) {
      if (t < T) {  // d z of row t
        const int64_t r = b * T + t, first = std::max<int64_t>(0, KC - 1 - t);
        float* d = ring + (t % KC) * n;
        for (int64_t c = 0; c < n; c += kLanes) {
          Lanes z = bias ? ld(bias + c) : Lanes{};
          for (int64_t k = first; k < KC; ++k) z = z + ld(wt + k * C + c) * ld(x + (r - KC + 1 + k) * C + c);
          st(d + c, z);
        }
        const float* gr = g + r * C + c0;
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) {
          const float zc = d[c], s = sigmoid_approx(zc);
          d[c] = gr[c] * (s * (1.f + zc * (1.f - s)));
        }
        for (int64_t c = 0; c < n; c += kLanes) {
          const Lanes dz = ld(d + c);
          st(sb + c, ld(sb + c) + dz);
          for (int64_t k = first; k < KC; ++k) {
            Lanes a = ld(acc + k * n + c);
            a += dz * ld(x + (r - KC + 1 + k) * C + c);
            st(acc + k * n + c, a);
          }
        }
      }
      const int64_t ts = t - (KC - 1);  // d x of row ts, from d z of rows ts .. ts + K - 1
      if (gx && ts >= 0) {
        float* gxr = gx + (b * T + ts) * C + c0;
        const int64_t first = std::max<int64_t>(0, ts + KC - T);
        for (int64_t c = 0; c < n; c += kLanes) {
          Lanes a = gx_fresh ? Lanes{} : ld(gxr + c);
          for (int64_t k = first; k < KC; ++k) a = a + ld(wt + k * C + c) * ld(ring + ((ts + KC - 1 - k) % KC) * n + c);
          st(gxr + c, a);
        }
      }
    }
  for (int64_t c = 0; c < n; ++c) {
    if (gb) gb[c0 + c] += sb[c];
    if (gw)
      for (int64_t k = 0; k < KC; ++k) gw[(c0 + c) * KC + k] += acc[k * n + c];
  }
}

template <int KC>
void backward_by_rows(const Conv& cv, const float* g, float* gx, bool gx_fresh, float* gw, float* gb) {
  const int64_t nv = cv.C / lanes::kLanes;
  const bool parallel = cv.B * cv.T * cv.C > kParallelMin;
  parallel_if(parallel, [&] {
    const int64_t nt = parallel ? omp_get_num_threads() : 1, id = parallel ? omp_get_thread_num() : 0;
    const int64_t v0 = nv * id / nt, v1 = nv * (id + 1) / nt;
    backward_rows<KC>(cv, g, gx, gx_fresh, gw, gb, v0 * lanes::kLanes, v1 * lanes::kLanes);
  });
}

}  // namespace

Tensor causal_conv1d_silu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (x.dim() != 3) throw Error("causal_conv1d_silu: input must be [B, T, C], got " + x.shape().str());
  const int64_t C = x.size(2);
  if (weight.dim() != 3 || weight.size(0) != C || weight.size(1) != 1)
    throw Error("causal_conv1d_silu: weight " + weight.shape().str() + " does not match input " +
                x.shape().str() + " (expected [" + std::to_string(C) + ", 1, K])");
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != C))
    throw Error("causal_conv1d_silu: bias " + bias.shape().str() + " must be [" + std::to_string(C) + "]");
  auto conv = std::make_shared<const Conv>(x, weight, bias);
  const int64_t rows = conv->B * conv->T;
  Tensor out = Tensor::empty(x.shape());
  float* po = out.data();
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* y = po + r * C;
    conv->row(r / conv->T, r % conv->T, y);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) y[c] *= sigmoid_approx(y[c]);
  }
  if (!needs_grad({x, weight, bias})) return out;
  std::vector<Tensor> saved{x, weight};
  if (bias.defined()) saved.push_back(bias);
  record("causal_conv1d_silu", out, saved, [x, weight, bias, conv, rows](const float* g) {
    const int64_t T = conv->T, C = conv->C, K = conv->K;
    bool gx_fresh;
    float *gx = grad_for_write(x, &gx_fresh), *gw = grad_of(weight), *gb = grad_of(bias);
    if (C % lanes::kLanes == 0 && K == 4) {  // Mamba's d_conv
      backward_by_rows<4>(*conv, g, gx, gx_fresh, gw, gb);
      return;
    }
    // d pre-activation = g silu'(z), silu'(z) = s (1 + z (1 - s)), s = sigmoid(z).
    Tensor gz_t = Tensor::empty(x.shape());
    float* gz = gz_t.data();
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
    for (int64_t r = 0; r < rows; ++r) {
      float* d = gz + r * C;
      conv->row(r / T, r % T, d);
      const float* gr = g + r * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float z = d[c], s = sigmoid_approx(z);
        d[c] = gr[c] * (s * (1.f + z * (1.f - s)));
      }
    }
    if (gx) {  // x[ts] feeds z[ts + K-1-k] through tap k
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t ts = r % T;
        float* gxr = gx + r * C;
        const int64_t first = std::max<int64_t>(0, ts + K - T);  // taps k >= first reach a row inside the sequence
        const int64_t zr = r - ts + K - 1;                  // tap k reads d z's row zr + ts - k
        int64_t c0 = 0;
        for (; c0 + lanes::kLanes <= C; c0 += lanes::kLanes) {  // in a register, as Conv::row
          lanes::Lanes acc = gx_fresh ? lanes::Lanes{} : lanes::ld(gxr + c0);
          for (int64_t k = first; k < K; ++k)
            acc = acc + lanes::ld(conv->wt.data() + k * C + c0) * lanes::ld(gz + (zr + ts - k) * C + c0);
          lanes::st(gxr + c0, acc);
        }
        if (gx_fresh) std::fill(gxr + c0, gxr + C, 0.f);
        for (int64_t k = first; k < K && c0 < C; ++k) {
          const float *dr = gz + (zr + ts - k) * C, *w = conv->wt.data() + k * C;
          for (int64_t c = c0; c < C; ++c) gxr[c] += w[c] * dr[c];
        }
      }
    }
    if (!gw && !gb) return;
    const int64_t nblk = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static) if (x.numel() > kParallelMin)
    for (int64_t blk = 0; blk < nblk; ++blk) {
      const int64_t c0 = blk * kChannelBlock, nc = std::min(kChannelBlock, C - c0);
      if (K == 4) weight_sums<4>(*conv, gz, c0, nc, gw, gb);  // Mamba's d_conv
      else weight_sums<0>(*conv, gz, c0, nc, gw, gb);
    }
  });
  return out;
}

}  // namespace tri
