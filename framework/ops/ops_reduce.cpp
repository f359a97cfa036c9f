// sum and mean over axes. A reduction is broadcasting run backwards: the input reads the
// reduced tensor (kept dims of size 1) with stride 0 along the reduced axes.
#include <algorithm>
#include <set>

#include "framework/core/autograd.hpp"
#include "framework/core/broadcast.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

namespace {
// The reduced shape with kept dims (size 1 where reduced), and the output shape.
void reduced_shapes(const char* op, const Shape& in, std::vector<int> axes, bool keepdim,
                    Shape& kept, Shape& out) {
  std::set<int> ax;
  if (axes.empty())
    for (int i = 0; i < in.nd; ++i) ax.insert(i);
  for (int a : axes) {
    int n = a < 0 ? a + in.nd : a;
    if (n < 0 || n >= in.nd)
      throw Error(std::string(op) + ": axis " + std::to_string(a) + " out of range for shape " +
                  in.str() + " (allowed: " + std::to_string(-in.nd) + ".." +
                  std::to_string(in.nd - 1) + ")");
    ax.insert(n);
  }
  kept = in;
  std::vector<int64_t> o;
  for (int i = 0; i < in.nd; ++i) {
    if (ax.count(i)) {
      kept.d[i] = 1;
      if (keepdim) o.push_back(1);
    } else {
      o.push_back(in.d[i]);
    }
  }
  out = Shape(o);
}

Tensor reduce_sum(const char* op, const Tensor& x, std::vector<int> axes, bool keepdim, float scale) {
  Shape kept, os;
  reduced_shapes(op, x.shape(), std::move(axes), keepdim, kept, os);
  Broadcast bc = broadcast(op, x.shape(), kept);
  Tensor out = Tensor::zeros(os);
  const float* px = x.data();
  float* po = out.data();
  const int64_t inner = x.dim() ? x.size(-1) : 1;
  if (kept.numel() == x.numel()) {
    for (int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] * scale;
  } else if (kept.numel() == 1) {
    // A full reduction in double over fixed-size blocks, the blocks then summed in order:
    // the same bits at any thread count (an OpenMP reduction clause combines in any order).
    const int64_t n = x.numel(), block = 4096, nb = (n + block - 1) / block;
    std::vector<double> part(size_t(nb), 0.0);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t b = 0; b < nb; ++b) {
      double acc = 0;
      for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) acc += px[i];
      part[size_t(b)] = acc;
    }
    double acc = 0;
    for (double v : part) acc += v;
    po[0] = float(acc * scale);
  } else if (x.dim() && kept[-1] == 1 && kept.numel() == x.numel() / inner) {
    // Reducing only the last axis: one contiguous row per output value.
#pragma omp parallel for schedule(static) if (x.numel() > (1 << 16))
    for (int64_t r = 0; r < kept.numel(); ++r) {
      double acc = 0;
      for (int64_t j = 0; j < inner; ++j) acc += px[r * inner + j];
      po[r] = float(acc * scale);
    }
  } else {
    for_each_broadcast(bc, [&](int64_t i, int64_t, int64_t ib) { po[ib] += px[i] * scale; });
  }
  if (!needs_grad({x})) return out;
  record(op, out, {}, [x, bc, scale](const float* g) {
    float* gx = grad_of(x);
    for_each_broadcast(bc, [&](int64_t i, int64_t, int64_t ib) { gx[i] += g[ib] * scale; });
  });
  return out;
}
}  // namespace

Tensor sum(const Tensor& x, std::vector<int> axes, bool keepdim) {
  return reduce_sum("sum", x, std::move(axes), keepdim, 1.f);
}

Tensor mean(const Tensor& x, std::vector<int> axes, bool keepdim) {
  Shape kept, os;
  reduced_shapes("mean", x.shape(), axes, keepdim, kept, os);
  int64_t count = kept.numel() ? x.numel() / kept.numel() : 0;
  if (count == 0) throw Error("mean: reducing an empty tensor of shape " + x.shape().str());
  return reduce_sum("mean", x, std::move(axes), keepdim, 1.f / float(count));
}

}  // namespace tri
