// Cross-entropy over masked positions, fused with its log-softmax: one pass computes the
// per-row log-sum-exp, backward writes (softmax - onehot) / count without a [N, V] temporary.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

IntTensor masked_targets(const IntTensor& targets, const std::vector<uint8_t>& mask) {
  if (int64_t(mask.size()) != targets.numel())
    throw Error("masked_targets: mask has " + std::to_string(mask.size()) + " entries, targets " +
                targets.shape().str());
  IntTensor out = targets;
  for (size_t i = 0; i < mask.size(); ++i)
    if (!mask[i]) out.data()[i] = kIgnoreIndex;
  return out;
}

Tensor cross_entropy(const Tensor& logits, const IntTensor& targets) {
  if (logits.dim() < 1) throw Error("cross_entropy: logits must have at least 1 dim");
  const int64_t V = logits.size(-1), rows = logits.numel() / V;
  if (targets.numel() != rows)
    throw Error("cross_entropy: logits " + logits.shape().str() + " need " + std::to_string(rows) +
                " targets, got shape " + targets.shape().str());
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets.data()[r];
    if (t == kIgnoreIndex) continue;
    if (t < 0 || t >= V)
      throw Error("cross_entropy: target " + std::to_string(t) + " out of range [0, " +
                  std::to_string(V) + ") (use " + std::to_string(kIgnoreIndex) + " to skip)");
    ++count;
  }
  if (count == 0) throw Error("cross_entropy: every position is masked out; nothing to score");
  Tensor lse = Tensor::empty(Shape{rows});  // saved for backward
  const float* px = logits.data();
  float* pl = lse.data();
  // Per-row losses summed in row order afterwards: bit-identical at any thread count.
  std::vector<double> row_loss(size_t(rows), 0.0);
#pragma omp parallel for schedule(static) if (logits.numel() > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    if (targets.data()[r] == kIgnoreIndex) continue;
    const float* xr = px + r * V;
    float mx = -INFINITY;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, xr[j]);
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(double(xr[j] - mx));
    pl[r] = mx + float(std::log(s));
    row_loss[size_t(r)] = double(pl[r]) - xr[targets.data()[r]];
  }
  double total = 0;
  for (double l : row_loss) total += l;
  Tensor out = Tensor::scalar(float(total / double(count)));
  if (!needs_grad({logits})) return out;
  record("cross_entropy", out, {logits}, [logits, targets, lse, V, rows, count](const float* g) {
    const float *px = logits.data(), *pl = lse.data();
    // A fresh gradient is written, not zeroed and added to: the logits' gradient is the size of
    // the logits, and with MQAR's or the needle's sparse targets most of its rows are zeros.
    bool fresh;
    float* gx = grad_for_write(logits, &fresh);
    const float scale = g[0] / float(count);
    const int32_t* tg = targets.data();
#pragma omp parallel if (logits.numel() > kParallelMin)
    {
      const int64_t n = omp_get_num_threads(), k = omp_get_thread_num();
      const int64_t end = rows * (k + 1) / n;  // contiguous rows per thread
      for (int64_t r = rows * k / n; r < end;) {
        if (tg[r] == kIgnoreIndex) {  // a run of unscored rows: zeros in one fill (a long fill
          int64_t last = r + 1;       // writes whole cache lines without reading them first)
          while (last < end && tg[last] == kIgnoreIndex) ++last;
          if (fresh) std::memset(gx + r * V, 0, sizeof(float) * size_t((last - r) * V));
          r = last;
          continue;
        }
        const float *xr = px + r * V, l = pl[r];
        float* gr = gx + r * V;
        for (int64_t j = 0; j < V; ++j) gr[j] = (fresh ? 0.f : gr[j]) + scale * std::exp(xr[j] - l);
        gr[tg[r]] -= scale;
        ++r;
      }
    }
  });
  return out;
}

}  // namespace tri
