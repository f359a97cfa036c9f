// Shape ops: reshape and first-axis slices are views; permute, other slices and concat copy.
#include <algorithm>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"

namespace tri {

namespace {
int norm_axis(const char* op, int axis, int nd) {
  int a = axis < 0 ? axis + nd : axis;
  if (a < 0 || a >= nd)
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " out of range for " +
                std::to_string(nd) + " dims");
  return a;
}

int64_t prod(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= s.d[i];
  return p;
}
// dst row o = src row o (n floats each) for rows o in [0, rows), rows dst_stride and src_stride
// floats apart: slice's and concat's copies. A loop, not memcpy: rows of a few floats (x_proj's
// dt, B and C parts) cost a call each.
void copy_rows(float* __restrict dst, int64_t dst_stride, const float* __restrict src,
               int64_t src_stride, int64_t rows, int64_t n) {
  for (int64_t o = 0; o < rows; ++o) {
    float* __restrict d = dst + o * dst_stride;
    const float* __restrict r = src + o * src_stride;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) d[j] = r[j];
  }
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& s) {
  if (s.numel() != x.numel())
    throw Error("reshape: cannot reshape " + x.shape().str() + " to " + s.str() +
                " (element counts " + std::to_string(x.numel()) + " vs " +
                std::to_string(s.numel()) + ")");
  Tensor out = x.view(s);
  if (!needs_grad({x})) return out;
  // The closure holds out weakly: the tape's node owns it.
  record("reshape", out, {}, [x, o = std::weak_ptr<TensorImpl>(out.ptr())](const float*) {
    view_backward(x, Tensor(o.lock()));
  });
  return out;
}

Tensor permute(const Tensor& x, std::vector<int> order) {
  const int nd = x.dim();
  if (int(order.size()) != nd)
    throw Error("permute: order has " + std::to_string(order.size()) + " axes, tensor " +
                x.shape().str() + " has " + std::to_string(nd));
  std::vector<bool> seen(nd, false);
  for (int& a : order) {
    a = norm_axis("permute", a, nd);
    if (seen[a]) throw Error("permute: axis " + std::to_string(a) + " repeated in the order");
    seen[a] = true;
  }
  Shape os = x.shape();
  int64_t in_stride[kMaxDims], src_stride[kMaxDims];
  for (int i = nd - 1, k = 1; i >= 0; --i) {
    in_stride[i] = k;
    k *= int(x.size(i));
  }
  for (int i = 0; i < nd; ++i) {
    os.d[i] = x.size(order[i]);
    src_stride[i] = in_stride[order[i]];
  }
  // Output element i reads input offset src; the same walk serves forward and backward.
  auto walk = [os, nd, src_stride](auto fn) {
    int64_t idx[kMaxDims] = {0, 0, 0, 0, 0}, src = 0;
    const int64_t n = os.numel();
    for (int64_t i = 0; i < n; ++i) {
      fn(i, src);
      for (int d = nd - 1; d >= 0; --d) {
        ++idx[d];
        src += src_stride[d];
        if (idx[d] < os.d[d]) break;
        src -= src_stride[d] * idx[d];
        idx[d] = 0;
      }
    }
  };
  Tensor out = Tensor::empty(os);
  const float* px = x.data();
  float* po = out.data();
  walk([&](int64_t i, int64_t src) { po[i] = px[src]; });
  if (!needs_grad({x})) return out;
  record("permute", out, {}, [x, walk](const float* g) {
    float* gx = grad_of(x);
    walk([&](int64_t i, int64_t src) { gx[src] += g[i]; });
  });
  return out;
}

Tensor transpose(const Tensor& x, int a0, int a1) {
  std::vector<int> order(x.dim());
  for (int i = 0; i < x.dim(); ++i) order[i] = i;
  std::swap(order[norm_axis("transpose", a0, x.dim())], order[norm_axis("transpose", a1, x.dim())]);
  return permute(x, order);
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end) {
  const int a = norm_axis("slice", axis, x.dim());
  const int64_t len = x.size(a);
  if (start < 0 || end > len || start > end)
    throw Error("slice: range [" + std::to_string(start) + ", " + std::to_string(end) +
                ") out of bounds for axis " + std::to_string(a) + " of size " + std::to_string(len));
  const int64_t outer = prod(x.shape(), 0, a), inner = prod(x.shape(), a + 1, x.dim());
  const int64_t w = end - start;
  Tensor out;
  if (a == 0) {
    out = x.narrow0(start, w);  // contiguous rows: a view
  } else {
    Shape os = x.shape();
    os.d[a] = w;
    out = Tensor::empty(os);
    copy_rows(out.data(), w * inner, x.data() + start * inner, len * inner, outer, w * inner);
  }
  if (!needs_grad({x})) return out;
  record("slice", out, {}, [x, outer, inner, len, start, w](const float* g) {
    // A fresh gradient of x (the first of its slices to run backward) is written whole: the
    // slice's part as 0 + g, the rest zeros, instead of zeroing it all and adding.
    bool fresh;
    float* gx = grad_for_write(x, &fresh);
    for (int64_t o = 0; o < outer; ++o) {
      float* row = gx + o * len * inner;
      const float* go = g + o * w * inner;
      if (fresh) {
        std::fill(row, row + start * inner, 0.f);
        std::fill(row + (start + w) * inner, row + len * inner, 0.f);
      }
      float* part = row + start * inner;
#pragma omp simd
      for (int64_t j = 0; j < w * inner; ++j) part[j] = (fresh ? 0.f : part[j]) + go[j];
    }
  });
  return out;
}

Tensor concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw Error("concat: no tensors given");
  const Shape& s0 = xs[0].shape();
  const int a = norm_axis("concat", axis, s0.nd);
  Shape os = s0;
  os.d[a] = 0;
  for (const Tensor& t : xs) {
    bool ok = t.dim() == s0.nd;
    for (int i = 0; ok && i < s0.nd; ++i) ok = i == a || t.size(i) == s0.d[i];
    if (!ok)
      throw Error("concat: shape " + t.shape().str() + " does not match " + s0.str() +
                  " outside axis " + std::to_string(a));
    os.d[a] += t.size(a);
  }
  const int64_t outer = prod(s0, 0, a), inner = prod(s0, a + 1, s0.nd), total = os.d[a];
  Tensor out = Tensor::empty(os);
  std::vector<int64_t> offsets;
  int64_t off = 0;
  for (const Tensor& t : xs) {
    const int64_t w = t.size(a);
    copy_rows(out.data() + off * inner, total * inner, t.data(), w * inner, outer, w * inner);
    offsets.push_back(off);
    off += w;
  }
  bool any = false;
  for (const Tensor& t : xs) any = any || needs_grad({t});
  if (!any) return out;
  record("concat", out, {}, [xs, offsets, outer, inner, total, a](const float* g) {
    for (size_t k = 0; k < xs.size(); ++k) {
      float* gx = grad_of(xs[k]);
      if (!gx) continue;
      const int64_t w = xs[k].size(a);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < w * inner; ++j)
          gx[o * w * inner + j] += g[(o * total + offsets[k]) * inner + j];
    }
  });
  return out;
}

}  // namespace tri
