// matmul, linear and gelu_linear: GEMM on the selected backend (runtime.hpp), backward as two
// more GEMMs.
#include <omp.h>

#include <algorithm>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/simd/vec_math.hpp"

namespace tri {

namespace {
struct MatmulDims {
  int64_t batch, m, n, k;
  bool b_shared;  // b is 2-D and reused for every batch of a
};

MatmulDims matmul_dims(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  auto fail = [&](const std::string& why) {
    return Error("matmul: shapes " + a.shape().str() + (ta ? "^T" : "") + " and " +
                 b.shape().str() + (tb ? "^T" : "") + " " + why);
  };
  if (a.dim() < 2 || b.dim() < 2) throw fail("need at least 2 dims each");
  MatmulDims d{};
  d.m = ta ? a.size(-1) : a.size(-2);
  int64_t ka = ta ? a.size(-2) : a.size(-1);
  int64_t kb = tb ? b.size(-1) : b.size(-2);
  d.n = tb ? b.size(-2) : b.size(-1);
  if (ka != kb)
    throw fail("do not match (inner dims " + std::to_string(ka) + " vs " + std::to_string(kb) + ")");
  d.k = ka;
  d.batch = a.numel() / (a.size(-1) * a.size(-2));
  d.b_shared = b.dim() == 2;
  if (!d.b_shared) {
    if (b.dim() != a.dim()) throw fail("have different batch dims");
    for (int i = 0; i < a.dim() - 2; ++i)
      if (a.size(i) != b.size(i)) throw fail("have different batch dims");
  }
  return d;
}

// Runs fn(i) for each batch item: in parallel with single-threaded GEMMs when the items are
// small, so per-call overhead does not dominate; otherwise one threaded GEMM after another.
template <class F>
void for_each_batch(int64_t batch, int64_t flops_per_item, F fn) {
  bool split = batch >= 2 && flops_per_item < (int64_t(1) << 22);
  if (split) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) fn(i);
  } else {
    for (int64_t i = 0; i < batch; ++i) fn(i);
  }
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  MatmulDims d = matmul_dims(a, b, ta, tb);
  Shape os = a.shape();
  os[-2] = d.m;
  os[-1] = d.n;
  Tensor out = Tensor::empty(os);
  const int64_t lda = a.size(-1), ldb = b.size(-1);
  const int64_t sa = d.m * d.k, sb = d.b_shared ? 0 : d.k * d.n, sc = d.m * d.n;
  // With a shared b and no transpose on a, the batch folds into one tall GEMM.
  const bool fold = d.b_shared && !ta;
  if (fold) {
    sgemm(false, tb, d.batch * d.m, d.n, d.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, out.data(), d.n);
  } else {
    for_each_batch(d.batch, d.m * d.n * d.k, [&](int64_t i) {
      sgemm(ta, tb, d.m, d.n, d.k, 1.f, a.data() + i * sa, lda, b.data() + i * sb, ldb, 0.f,
            out.data() + i * sc, d.n);
    });
  }
  if (!needs_grad({a, b})) return out;
  record("matmul", out, {a, b}, [a, b, d, ta, tb, fold, lda, ldb, sa, sb, sc](const float* g) {
    if (float* ga = grad_of(a)) {
      // dA = dC op(B)^T, or stored transposed when ta: dA^T = op(B) dC^T.
      if (fold) {
        sgemm(false, !tb, d.batch * d.m, d.k, d.n, 1.f, g, d.n, b.data(), ldb, 1.f, ga, lda);
      } else {
        for_each_batch(d.batch, d.m * d.n * d.k, [&](int64_t i) {
          if (!ta)
            sgemm(false, !tb, d.m, d.k, d.n, 1.f, g + i * sc, d.n, b.data() + i * sb, ldb, 1.f,
                  ga + i * sa, lda);
          else
            sgemm(tb, true, d.k, d.m, d.n, 1.f, b.data() + i * sb, ldb, g + i * sc, d.n, 1.f,
                  ga + i * sa, lda);
        });
      }
    }
    if (float* gb = grad_of(b)) {
      // dB = op(A)^T dC, or stored transposed when tb: dB^T = dC^T op(A).
      auto one = [&](int64_t m, const float* ai, const float* gi, float* gbi) {
        if (!tb)
          sgemm(!ta, false, d.k, d.n, m, 1.f, ai, lda, gi, d.n, 1.f, gbi, ldb);
        else
          sgemm(true, ta, d.n, d.k, m, 1.f, gi, d.n, ai, lda, 1.f, gbi, ldb);
      };
      if (fold) {
        one(d.batch * d.m, a.data(), g, gb);
      } else if (d.b_shared) {
        for (int64_t i = 0; i < d.batch; ++i) one(d.m, a.data() + i * sa, g + i * sc, gb);
      } else {
        for_each_batch(d.batch, d.m * d.n * d.k,
                       [&](int64_t i) { one(d.m, a.data() + i * sa, g + i * sc, gb + i * sb); });
      }
    }
  });
  return out;
}

namespace {

// The checked sizes of x [..., in] @ w[out, in]^T + bias[out].
struct LinearDims {
  int64_t in, outf, rows;
};

LinearDims linear_dims(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias) {
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1))
    throw Error(std::string(op) + ": input " + x.shape().str() + " does not match weight " + w.shape().str() +
                " (weight is [out, in], input's last dim must equal in)");
  const LinearDims d{w.size(1), w.size(0), x.numel() / w.size(1)};
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != d.outf))
    throw Error(std::string(op) + ": bias " + bias.shape().str() + " does not match weight " + w.shape().str());
  return d;
}

// residual must be undefined or shaped like the output (x's leading dims, out features).
void check_residual(const char* op, const Tensor& x, const LinearDims& d, const Tensor& residual) {
  if (!residual.defined()) return;
  Shape os = x.shape();
  os[-1] = d.outf;
  if (residual.shape() != os)
    throw Error(std::string(op) + ": residual " + residual.shape().str() + " must have the output's shape " + os.str());
}

// out = x w^T + bias (+ residual), x [rows, in] as a pointer; out has x's leading dims.
Tensor linear_forward(const float* x, const Shape& x_shape, const LinearDims& d, const Tensor& w,
                      const Tensor& bias, const Tensor& residual) {
  Shape os = x_shape;
  os[-1] = d.outf;
  Tensor out = Tensor::empty(os);
  sgemm_add(true, d.rows, d.outf, d.in, x, d.in, w.data(), d.in, bias.defined() ? bias.data() : nullptr,
            residual.defined() ? residual.data() : nullptr, out.data());
  return out;
}

// d residual += g, as add's backward: a residual without a gradient yet takes g's buffer
// (view_backward), unless it is also the input x, whose gradient the GEMMs add to while
// reading g.
void residual_backward(const float* g, const LinearDims& d, const Tensor& residual, const Tensor& x,
                       const std::weak_ptr<TensorImpl>& out) {
  if (!residual.same(x)) return view_backward(residual, Tensor(out.lock()));
  bool fresh;
  if (float* gr = grad_for_write(residual, &fresh))
    set_or_add_grad(gr, fresh, d.rows * d.outf, [g](int64_t i) { return g[i]; });
}

// d bias += the column sums of g [rows, outf].
void bias_backward(const float* g, const LinearDims& d, float* gb) {
  // Columns in blocks of 16 across threads, rows in order within each: the same sums at
  // any thread count.
  // Sums in registers, added to gb once (onto a zero gb: the same bits as adding row by row).
  const int64_t blocks = (d.outf + 15) / 16;
#pragma omp parallel for schedule(static) if (d.rows * d.outf > 65536)
  for (int64_t jb = 0; jb < blocks; ++jb) {
    const int64_t j0 = jb * 16, width = std::min<int64_t>(16, d.outf - j0);
    float acc[16] = {};
    if (width == 16) {
      for (int64_t r = 0; r < d.rows; ++r) {
        const float* gr = g + r * d.outf + j0;
#pragma omp simd
        for (int64_t j = 0; j < 16; ++j) acc[j] += gr[j];
      }
    } else {
      for (int64_t r = 0; r < d.rows; ++r)
        for (int64_t j = 0; j < width; ++j) acc[j] += g[r * d.outf + j0 + j];
    }
    for (int64_t j = 0; j < width; ++j) gb[j0 + j] += acc[j];
  }
}

// Adds d x (when gx), d w and d bias (when theirs are wanted) of out = x w^T + bias, given g.
// gx_fresh: gx is uninitialised (grad_for_write), so the GEMM sets it (beta 0).
void linear_backward(const float* g, const float* x, const LinearDims& d, const Tensor& w, const Tensor& bias,
                     float* gx, bool gx_fresh = false) {
  if (gx) sgemm(false, false, d.rows, d.in, d.outf, 1.f, g, d.outf, w.data(), d.in, gx_fresh ? 0.f : 1.f, gx, d.in);
  if (float* gw = grad_of(w)) sgemm(true, false, d.outf, d.in, d.rows, 1.f, g, d.outf, x, d.in, 1.f, gw, d.in);
  if (float* gb = grad_of(bias)) bias_backward(g, d, gb);
}

// gelu(h) as a tensor of h's shape, not recorded.
Tensor gelu_values(const Tensor& h) {
  Tensor a = Tensor::empty(h.shape());
  const float* ph = h.data();
  float* pa = a.data();
  const int64_t n = h.numel();
#pragma omp parallel for simd schedule(static) if (n > kParallelSimdMin)
  for (int64_t i = 0; i < n; ++i) pa[i] = gelu_value(ph[i]);
  return a;
}

// gelu_linear's backward, over blocks of rows: d w += g^T gelu(h) and d h += (g w) * gelu'(h),
// with gelu and gelu' from one erf per element, and only a block of gelu(h) held at a time (the
// step's peak memory is in this backward, with d h). Blocks of a fixed row count: the same sums
// at any thread count.
void gelu_linear_backward(const float* g, const Tensor& h, const LinearDims& d, const Tensor& w,
                          const Tensor& bias) {
  if (float* gb = grad_of(bias)) bias_backward(g, d, gb);
  float* gw = grad_of(w);
  bool fresh;
  float* gh = grad_for_write(h, &fresh);
  if (!gw && !gh) return;
  const int64_t block = std::min(d.rows, std::max<int64_t>(64, (int64_t(1) << 20) / d.in));
  Tensor value = Tensor::empty(Shape{block, d.in});
  Tensor slope = gh && !fresh ? Tensor::empty(Shape{block, d.in}) : Tensor();
  for (int64_t r0 = 0; r0 < d.rows; r0 += block) {
    const int64_t n = std::min(block, d.rows - r0) * d.in;
    const float *hb = h.data() + r0 * d.in, *g_rows = g + r0 * d.outf;
    float *vb = value.data(), *sb = !gh ? nullptr : fresh ? gh + r0 * d.in : slope.data();
    if (sb) {
#pragma omp parallel for simd schedule(static) if (n > kParallelSimdMin)
      for (int64_t i = 0; i < n; ++i) gelu_value_and_derivative(hb[i], vb[i], sb[i]);
    } else {
#pragma omp parallel for simd schedule(static) if (n > kParallelSimdMin)
      for (int64_t i = 0; i < n; ++i) vb[i] = gelu_value(hb[i]);
    }
    const int64_t rows = n / d.in;
    if (gw) sgemm(true, false, d.outf, d.in, rows, 1.f, g_rows, d.outf, vb, d.in, 1.f, gw, d.in);
    if (!gh) continue;
    sgemm(false, false, rows, d.in, d.outf, 1.f, g_rows, d.outf, w.data(), d.in, 0.f, vb, d.in);  // d gelu(h)
    float* ghb = gh + r0 * d.in;
    set_or_add_grad(ghb, fresh, n, [vb, sb](int64_t i) { return vb[i] * sb[i]; });
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& residual) {
  const LinearDims d = linear_dims("linear", x, w, bias);
  check_residual("linear", x, d, residual);
  Tensor out = linear_forward(x.data(), x.shape(), d, w, bias, residual);
  if (!needs_grad({x, w, bias, residual})) return out;
  // The closure holds out weakly: the tape's node owns it.
  record("linear", out, {x, w}, [x, w, bias, residual, d, o = std::weak_ptr<TensorImpl>(out.ptr())](const float* g) {
    residual_backward(g, d, residual, x, o);
    bool fresh;
    float* gx = grad_for_write(x, &fresh);
    linear_backward(g, x.data(), d, w, bias, gx, fresh);
  });
  return out;
}

std::vector<Tensor> linear_parts(const Tensor& x, const Tensor& w, const std::vector<int64_t>& widths) {
  const LinearDims d = linear_dims("linear_parts", x, w, Tensor());
  int64_t total = 0;
  for (int64_t width : widths) {
    if (width < 1) throw Error("linear_parts: part width " + std::to_string(width) + " must be at least 1");
    total += width;
  }
  if (widths.empty() || total != d.outf)
    throw Error("linear_parts: the widths sum to " + std::to_string(total) + ", the weight has " +
                std::to_string(d.outf) + " rows");
  std::vector<Tensor> parts;
  for (int64_t width : widths) {
    Shape os = x.shape();
    os[-1] = width;
    parts.push_back(Tensor::empty(os));
  }
  // A part narrower than kNarrowPart is computed with the part before it, in one GEMM into a
  // buffer, then copied out: a GEMM of one column is a GEMV, whose sums round apart from the
  // whole GEMM's (oneDNN), and a narrow copy costs little.
  constexpr int64_t kNarrowPart = 16;
  int64_t row0 = 0;
  for (size_t i = 0; i < widths.size(); ++i) {
    const bool merge = i + 1 < widths.size() && widths[i + 1] < kNarrowPart;
    const int64_t n = merge ? widths[i] + widths[i + 1] : widths[i];
    const float* wr = w.data() + row0 * d.in;
    if (!merge) {
      sgemm(false, true, d.rows, n, d.in, 1.f, x.data(), d.in, wr, d.in, 0.f, parts[i].data(), n);
    } else {
      const Tensor both = Tensor::empty(Shape{d.rows, n});  // cached storage: no page faults a step
      sgemm(false, true, d.rows, n, d.in, 1.f, x.data(), d.in, wr, d.in, 0.f, both.data(), n);
      for (int64_t r = 0; r < d.rows; ++r) {
        const float* src = both.data() + r * n;
        std::copy(src, src + widths[i], parts[i].data() + r * widths[i]);
        std::copy(src + widths[i], src + n, parts[i + 1].data() + r * widths[i + 1]);
      }
      ++i;
    }
    row0 += n;
  }
  if (!needs_grad({x, w})) return parts;
  std::vector<std::weak_ptr<TensorImpl>> held;  // weakly, as linear's out: the tape's node owns them
  for (const Tensor& p : parts) held.push_back(p.ptr());
  record_parts("linear_parts", parts, {x, w}, [x, w, d, held, widths](const float*) {
    // d out = 0 + d part, column block by block (the bits slice's backward writes), 0 where none.
    Tensor g = Tensor::empty(Shape{d.rows, d.outf});
    int64_t col0 = 0;
    for (size_t i = 0; i < held.size(); ++i) {
      const Tensor gp = Tensor(held[i].lock()).grad();
      const float* src = gp.defined() ? gp.data() : nullptr;
      const int64_t width = widths[i];
      float* dst = g.data() + col0;
#pragma omp parallel for schedule(static) if (d.rows * width > kParallelMin)
      for (int64_t r = 0; r < d.rows; ++r) {
        float* out = dst + r * d.outf;
        if (!src) {
          std::fill(out, out + width, 0.f);
          continue;
        }
        const float* in = src + r * width;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) out[j] = 0.f + in[j];
      }
      col0 += width;
    }
    bool fresh;
    float* gx = grad_for_write(x, &fresh);
    linear_backward(g.data(), x.data(), d, w, Tensor(), gx, fresh);
  });
  return parts;
}

Tensor gelu_linear(const Tensor& h, const Tensor& w, const Tensor& bias, const Tensor& residual) {
  const LinearDims d = linear_dims("gelu_linear", h, w, bias);
  check_residual("gelu_linear", h, d, residual);
  Tensor out = linear_forward(gelu_values(h).data(), h.shape(), d, w, bias, residual);
  if (!needs_grad({h, w, bias, residual})) return out;
  record("gelu_linear", out, {h, w}, [h, w, bias, residual, d, o = std::weak_ptr<TensorImpl>(out.ptr())](const float* g) {
    residual_backward(g, d, residual, h, o);
    gelu_linear_backward(g, h, d, w, bias);
  });
  return out;
}

}  // namespace tri
