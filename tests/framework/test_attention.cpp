// Softmax attention: the fused kernel against the naive one (forward and every gradient, with
// and without a window), finite differences, exact causality and band, determinism, memory,
// the tiles a window skips; RoPE, the sinusoidal table and the ALiBi slopes against independent
// computations.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/kernels/attention.hpp"
#include "framework/simd/tile_kernels.hpp"
#include "framework/ops/positions.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/runtime/runtime.hpp"
#include "gradcheck.hpp"

using namespace tri;
using namespace trilemma_test;
using gradcheck::param;
using V = std::vector<Tensor>;
using AttentionFn = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;

namespace {


// The output and d(sum(out * gout)) / d(q, k, v) of one attention function.
struct Result {
  Tensor out, gq, gk, gv;
};

Result run(const AttentionFn& f, const V& in, const Tensor& gout) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  for (const Tensor& t : in) t.impl()->grad.reset();
  Tensor out = f(q, k, v);
  backward(sum(mul(out, gout)));
  auto grad = [](const Tensor& t) {
    return t.grad().defined() ? t.grad() : Tensor::zeros(t.shape());
  };
  return {out, grad(q), grad(k), grad(v)};
}

struct Case {
  int64_t B, Tq, Tk, H, Dh;
  bool causal, alibi;
  float scale = 0.f;
  int64_t window = 0;
};

std::string describe(const Case& c) {
  char s[180];
  std::snprintf(s, sizeof s, "B %lld Tq %lld Tk %lld H %lld Dh %lld%s%s scale %g window %lld", (long long)c.B,
                (long long)c.Tq, (long long)c.Tk, (long long)c.H, (long long)c.Dh,
                c.causal ? " causal" : "", c.alibi ? " alibi" : "", c.scale, (long long)c.window);
  return s;
}

AttentionOptions options(const Case& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.scale = c.scale;
  o.window = c.window;
  if (c.alibi) o.alibi_slopes = alibi_slopes(c.H);
  return o;
}

// x [B, T, H, Dh] as a ring buffer whose oldest row is `first`: row (first + t) % T holds x[:, t].
Tensor as_ring(const Tensor& x, int64_t first) {
  const int64_t T = x.size(1), row = x.size(2) * x.size(3);
  Tensor ring = Tensor::empty(x.shape());
  for (int64_t b = 0; b < x.size(0); ++b)
    for (int64_t t = 0; t < T; ++t)
      std::copy_n(x.data() + (b * T + t) * row, row, ring.data() + (b * T + (first + t) % T) * row);
  return ring;
}

// Inputs of a case: q, k, v in [-2, 2) (peaked enough that the softmax is far from uniform).
V inputs(const Case& c, uint64_t seed) {
  return {param({c.B, c.Tq, c.H, c.Dh}, seed, -2, 2),
          param({c.B, c.Tk, c.H, c.Dh}, seed + 1, -2, 2),
          param({c.B, c.Tk, c.H, c.Dh}, seed + 2, -2, 2)};
}

}  // namespace

TEST_CASE("attention: fused matches naive, forward and gradients") {
  const std::vector<Case> cases = {
      {2, 37, 37, 3, 24, true, false},  {2, 37, 37, 3, 24, true, true},
      {2, 37, 37, 3, 24, false, false}, {2, 37, 37, 3, 24, false, true},
      {2, 1, 37, 3, 24, true, true},    {2, 1, 37, 3, 24, false, false},  // one decoding step
      {2, 5, 37, 3, 24, true, true},
      {1, 70, 150, 2, 16, true, true},  {1, 40, 150, 2, 16, false, true},  // Tq < Tk, many tiles
      {1, 130, 130, 2, 32, true, false}, {1, 129, 130, 2, 16, true, true},  // partial last tiles
      {1, 64, 64, 1, 8, true, true},    {1, 67, 67, 2, 80, true, false},   // Dh 8 -> 16; 64 + 16
      {2, 37, 37, 3, 24, true, true, 0.3f},
      // Windows: 1 and 2 keys, one not a multiple of the tile (first rows seeing no key of
      // their first tile), exactly a tile, beyond T; with fewer queries than keys and one step.
      {2, 37, 37, 3, 24, true, false, 0.f, 1}, {2, 37, 37, 3, 24, true, true, 0.f, 2},
      {1, 150, 150, 2, 16, true, true, 0.f, 70}, {1, 200, 200, 2, 32, true, false, 0.f, 5},
      {1, 130, 130, 2, 16, true, true, 0.f, 64}, {1, 67, 67, 2, 80, true, false, 0.f, 67},
      {1, 70, 150, 2, 16, true, true, 0.f, 33}, {1, 129, 130, 2, 16, true, true, 0.f, 100},
      {2, 1, 37, 3, 24, true, true, 0.f, 10},  {2, 37, 37, 3, 24, true, true, 0.f, 1000},
      // One head, Dh a multiple of 16: rows read in place; heads enough for a task per head.
      {9, 64, 64, 1, 64, true, false},  {9, 130, 130, 1, 32, true, true, 0.f, 20},
      {9, 128, 128, 1, 16, false, false},
  };
  uint64_t seed = 10;
  for (const Case& c : cases) {
    INFO(describe(c));
    const AttentionOptions opt = options(c);
    V in = inputs(c, seed += 3);
    const Tensor gout = gradcheck::uniform({c.B, c.Tq, c.H, c.Dh}, seed + 100);
    const Result fused =
        run([&](auto& q, auto& k, auto& v) { return attention(q, k, v, opt); }, in, gout);
    const Result naive =
        run([&](auto& q, auto& k, auto& v) { return attention_naive(q, k, v, opt); }, in, gout);
    CHECK(scaled_err(fused.out, naive.out) < 1e-5);
    CHECK(scaled_err(fused.gq, naive.gq) < 1e-5);
    CHECK(scaled_err(fused.gk, naive.gk) < 1e-5);
    CHECK(scaled_err(fused.gv, naive.gv) < 1e-5);
  }
}

TEST_CASE("attention: gradcheck of the fused kernel and of the naive one") {
  gradcheck::Options go;
  go.eps = 3e-3;  // exp of scores: third derivatives ~10 at these scales
  for (const Case& c : {Case{1, 9, 9, 2, 6, true, true}, Case{2, 3, 11, 2, 4, false, true},
                        Case{1, 4, 7, 1, 5, true, false}, Case{1, 9, 9, 2, 6, true, true, 0.f, 3},
                        Case{1, 5, 11, 2, 4, true, false, 0.f, 1}, Case{1, 70, 70, 1, 4, true, true, 0.f, 5}}) {
    INFO(describe(c));
    const AttentionOptions opt = options(c);
    V in = inputs(c, 77);
    gradcheck::Result fused = gradcheck::check(
        [&](const V& x) { return attention(x[0], x[1], x[2], opt); }, in, go);
    INFO(fused.summary());
    CHECK(fused.ok());
    gradcheck::Result naive = gradcheck::check(
        [&](const V& x) { return attention_naive(x[0], x[1], x[2], opt); }, in, go);
    INFO(naive.summary());
    CHECK(naive.ok());
  }
}

TEST_CASE("attention: output row t depends on the keys and values of its band only, and on no other query") {
  // Query i sits at key position 70 + i and sees keys (pos - W, pos], or all up to pos (W = 0).
  for (int64_t window : {0, 7, 70}) {
    const Case c{1, 20, 90, 2, 8, true, true, 0.f, window};
    INFO(describe(c));
    const AttentionOptions opt = options(c);
    V in = inputs(c, 5);
    const int64_t row = c.H * c.Dh;
    for (int64_t t : {0, 7, 19}) {
      INFO("row " << t);
      const int64_t pos = c.Tk - c.Tq + t, first = window ? pos - window + 1 : 0;
      Tensor gout = Tensor::zeros({c.B, c.Tq, c.H, c.Dh});  // only row t carries gradient
      for (int64_t i = 0; i < row; ++i) gout.data()[t * row + i] = 1.f + 0.1f * float(i);
      for (const char* which : {"fused", "naive"}) {
        INFO(which);
        const Result r = run([&](auto& q, auto& k, auto& v) {
          return which[0] == 'f' ? attention(q, k, v, opt) : attention_naive(q, k, v, opt);
        }, in, gout);
        int64_t nonzero_outside = 0, nonzero_other_q = 0, nonzero_inside = 0;
        for (int64_t j = 0; j < c.Tk; ++j)
          for (int64_t i = 0; i < row; ++i) {
            const bool nz = r.gk.data()[j * row + i] != 0.f || r.gv.data()[j * row + i] != 0.f;
            (j > pos || j < first ? nonzero_outside : nonzero_inside) += nz;
          }
        for (int64_t j = 0; j < c.Tq; ++j)
          for (int64_t i = 0; i < row; ++i) nonzero_other_q += j != t && r.gq.data()[j * row + i] != 0.f;
        CHECK(nonzero_outside == 0);
        CHECK(nonzero_other_q == 0);
        CHECK(nonzero_inside > 0);  // the check above could fail: the visible keys do get gradient
      }
    }
    // Forward: rewriting the keys and values after position p leaves rows up to p bit-identical,
    // and (with a window) rewriting those before row 10's band leaves rows from 10 on as they were.
    const Tensor before = attention(in[0], in[1], in[2], opt);
    auto rewritten = [&](int64_t from, int64_t to) {  // key positions [from, to) moved
      Tensor k2 = in[1].clone(), v2 = in[2].clone();
      for (int64_t i = from * row; i < to * row; ++i) {
        k2.data()[i] += 1.f;
        v2.data()[i] -= 1.f;
      }
      return attention(in[0], k2, v2, opt);
    };
    const Tensor later = rewritten(c.Tk - c.Tq + 10, c.Tk);
    CHECK(bit_equal(before.view({c.Tq * row}).narrow0(0, 10 * row), later.view({c.Tq * row}).narrow0(0, 10 * row)));
    CHECK(!bit_equal(before, later));
    if (window) {
      const Tensor earlier = rewritten(0, c.Tk - c.Tq + 10 - window + 1);
      CHECK(bit_equal(before.view({c.Tq * row}).narrow0(10 * row, 10 * row),
                      earlier.view({c.Tq * row}).narrow0(10 * row, 10 * row)));
      CHECK(!bit_equal(before, earlier));
    }
  }
}

TEST_CASE("attention: a window skips the tiles outside its band, forward and backward") {
  // 64 queries at positions 576..639 with a window of 64 see keys 513..639: key tiles 0 to 7
  // (keys 0..511) hold no visible pair. NaN there would reach every result through a product
  // (0 * NaN) if a tile were computed and masked instead of skipped.
  const Case c{1, 64, 640, 2, 16, true, true, 0.f, 64};
  const AttentionOptions opt = options(c);
  V in = inputs(c, 41);
  const Tensor gout = gradcheck::uniform({c.B, c.Tq, c.H, c.Dh}, 42);
  auto fused = [&](auto& q, auto& k, auto& v) { return attention(q, k, v, opt); };
  const Result clean = run(fused, in, gout);
  const int64_t skipped = 512 * c.H * c.Dh;
  for (int i : {1, 2}) std::fill_n(in[size_t(i)].data(), skipped, NAN);
  const Result poisoned = run(fused, in, gout);
  CHECK(bit_equal(poisoned.out, clean.out));
  CHECK(bit_equal(poisoned.gq, clean.gq));
  CHECK(bit_equal(poisoned.gk, clean.gk));
  CHECK(bit_equal(poisoned.gv, clean.gv));
  // The kernel's count of (query, key) pairs, 14 Dh flops each forward and backward: the band's.
  const Case w{2, 1000, 1000, 2, 8, true, false, 0.f, 32};
  V big = inputs(w, 43);
  const int64_t before = flop_count();
  run([&](auto& q, auto& k, auto& v) { return attention(q, k, v, options(w)); }, big, big[0]);
  const int64_t pairs = (w.Tq - w.window) * w.window + w.window * (w.window + 1) / 2;
  CHECK(flop_count() - before == 14 * pairs * w.Dh * w.B * w.H);
}

TEST_CASE("attention: a window of T keys or more gives full causal attention's bits") {
  const Case c{2, 130, 130, 3, 24, true, true};
  V in = inputs(c, 51);
  const Tensor gout = gradcheck::uniform({c.B, c.Tq, c.H, c.Dh}, 52);
  for (bool fused : {true, false}) {
    auto with_window = [&](int64_t window) {
      AttentionOptions opt = options(c);
      opt.window = window;
      return run([&](auto& q, auto& k, auto& v) {
        return fused ? attention(q, k, v, opt) : attention_naive(q, k, v, opt);
      }, in, gout);
    };
    const Result full = with_window(0);
    for (int64_t window : {c.Tk, c.Tk + 5, int64_t(1) << 20}) {
      INFO((fused ? "fused" : "naive") << " window " << window);
      const Result r = with_window(window);
      CHECK(bit_equal(r.out, full.out));
      CHECK(bit_equal(r.gq, full.gq));
      CHECK(bit_equal(r.gk, full.gk));
      CHECK(bit_equal(r.gv, full.gv));
    }
  }
}

TEST_CASE("attention: probabilities of the naive path; same bits at 1 and 2 threads") {
  for (int64_t window : {0, 5, 70}) {
    const Case c{2, 137, 137, 3, 24, true, true, 0.f, window};
    INFO(describe(c));
    const AttentionOptions opt = options(c);
    V in = inputs(c, 31);
    Tensor probs;
    {
      NoGradGuard no_grad;
      attention_naive(in[0], in[1], in[2], opt, &probs);
    }
    REQUIRE(probs.shape() == Shape({c.B, c.H, c.Tq, c.Tk}));
    int64_t outside_band_nonzero = 0;
    for (int64_t r = 0; r < c.B * c.H * c.Tq; ++r) {
      const int64_t i = r % c.Tq;
      double s = 0;
      for (int64_t j = 0; j < c.Tk; ++j) {
        const float p = probs.data()[r * c.Tk + j];
        outside_band_nonzero += (j > i || (window && j <= i - window)) && p != 0.f;
        s += p;
      }
      CHECK(std::fabs(s - 1) < 1e-5);
    }
    CHECK(outside_band_nonzero == 0);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    auto fused = [&](auto& q, auto& k, auto& v) { return attention(q, k, v, opt); };
    const Result one = run(fused, in, in[0]);
    omp_set_num_threads(2);
    const Result two = run(fused, in, in[0]);
    omp_set_num_threads(threads);
    CHECK(bit_equal(one.out, two.out));
    CHECK(bit_equal(one.gq, two.gq));
    CHECK(bit_equal(one.gk, two.gk));
    CHECK(bit_equal(one.gv, two.gv));
  }
}

TEST_CASE("attention_decode: the naive path's output for few queries; the plain loops' bits; same bits at 1 and 2 threads") {
  // Heads of 16, 32 and 64 take the vector passes (AVX-512: scores 16 keys at a time, the
  // weighted sum in registers, eight vectors per walk and then one at a time), which must give
  // attention_decode_plain's bits; key counts off multiples of 16, ALiBi, windows, rings.
  const std::vector<Case> cases = {{2, 1, 37, 3, 24, true, true},   {2, 1, 37, 3, 24, false, false},
                                   {1, 3, 150, 2, 16, true, false}, {1, 2, 150, 2, 16, false, true},
                                   {1, 1, 1, 4, 8, true, true},     {2, 1, 300, 4, 32, true, false, 0.3f},
                                   {2, 1, 37, 3, 24, true, true, 0.f, 5}, {1, 3, 150, 2, 16, true, false, 0.f, 40},
                                   {1, 4, 9, 2, 8, true, true, 0.f, 1}, {1, 1, 4096, 4, 32, true, false},
                                   {1, 3, 150, 3, 64, true, true, 0.3f}, {1, 2, 77, 2, 32, true, true, 0.f, 20},
                                   {1, 1, 40, 5, 16, true, false}};
  uint64_t seed = 70;
  for (const Case& c : cases) {
    INFO(describe(c));
    const AttentionOptions opt = options(c);
    const V in = inputs(c, seed += 3);
    NoGradGuard no_grad;
    const Tensor naive = attention_naive(in[0], in[1], in[2], opt);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const Tensor one = attention_decode(in[0], in[1], in[2], opt);
    omp_set_num_threads(2);
    const Tensor two = attention_decode(in[0], in[1], in[2], opt);
    omp_set_num_threads(threads);
    CHECK(scaled_err(one, naive) < 1e-5);  // float rounding of a softmax-weighted sum (as the fused kernel)
    CHECK(bit_equal(one, two));
    // Under the sanitizers, to rounding: 1e-6 is a few float steps of a softmax-weighted mean.
    CHECK(bit_equal_unless_sanitized(one, attention_decode_plain(in[0], in[1], in[2], opt), 1e-6));
    // The same keys as a ring buffer (a windowed KV cache): position j in row (first + j) % Tk,
    // read from row `first` on, gives the same sums in the same order.
    for (int64_t first : {int64_t(1), c.Tk / 2, c.Tk - 1}) {
      if (first <= 0 || first >= c.Tk) continue;
      INFO("ring from row " << first);
      CHECK(bit_equal(attention_decode(in[0], as_ring(in[1], first), as_ring(in[2], first), opt, first), one));
    }
  }
}

TEST_CASE("attention: bad shapes and options name the problem") {
  Tensor q = Tensor::zeros({1, 4, 2, 8}), k = Tensor::zeros({1, 6, 2, 8});
  AttentionOptions opt;
  CHECK_THROWS_AS(attention(q, k, Tensor::zeros({1, 6, 2, 4}), opt), Error);
  CHECK_THROWS_AS(attention(k, q, q, opt), Error);  // causal with Tq > Tk
  CHECK_NOTHROW(attention(q, k, k, opt));
  opt.alibi_slopes = {0.5f};
  CHECK_THROWS_WITH_AS(attention_naive(q, k, k, opt),
                       doctest::Contains("1 ALiBi slopes given, expected 0 or 2"), Error);
  opt.alibi_slopes = {};
  opt.window = -1;
  CHECK_THROWS_WITH_AS(attention(q, k, k, opt), doctest::Contains("window -1 must be >= 0"), Error);
  CHECK_THROWS_WITH_AS(attention_naive(q, k, k, opt), doctest::Contains("window -1 must be >= 0"), Error);
  opt.window = 3;
  opt.causal = false;
  CHECK_THROWS_WITH_AS(attention(q, k, k, opt), doctest::Contains("a window needs causal attention"), Error);
  CHECK_THROWS_WITH_AS(attention_decode(q, k, k, opt), doctest::Contains("a window needs causal attention"), Error);
  opt.causal = true;
  CHECK_THROWS_WITH_AS(attention_decode(q, k, k, opt, 6), doctest::Contains("first_row 6 is not a row of k"), Error);
  const Tensor needs_grad = q.clone().requires_grad_();
  CHECK_THROWS_WITH_AS(attention_decode(needs_grad, k, k, opt, 2), doctest::Contains("no gradient path"), Error);
  CHECK_THROWS_AS(rope(Tensor::zeros({1, 2, 3, 5}), 0), Error);
  CHECK_THROWS_AS(alibi_slopes(0), Error);
}

TEST_CASE("attention: the fused kernel's extra memory is O(T), the naive one's O(T^2)") {
  // B 1, H 4, Dh 32: forward + backward. Inputs and the upstream gradient exist before the
  // peak is reset; everything above them (output, saved state, scratch, gradients) counts.
  auto peak = [](int64_t T, bool fused) {
    const Case c{1, T, T, 4, 32, true, false};
    V in = inputs(c, 3);
    const Tensor gout = gradcheck::uniform({1, T, 4, 32}, 4);
    const int64_t base = memory_live_bytes();
    memory_reset_peak();
    {
      const AttentionOptions causal;
      Tensor out = fused ? attention(in[0], in[1], in[2], causal)
                         : attention_naive(in[0], in[1], in[2], causal);
      backward(sum(mul(out, gout)));
    }
    return memory_peak_bytes() - base;
  };
  const int64_t fused_1k = peak(1024, true), naive_1k = peak(1024, false);
  const int64_t fused_4k = peak(4096, true);
  std::printf("attention extra memory, fwd+bwd, B 1 H 4 Dh 32: T 1024 fused %.2f MiB, naive %.2f "
              "MiB; T 4096 fused %.2f MiB\n",
              fused_1k / 1048576.0, naive_1k / 1048576.0, fused_4k / 1048576.0);
  CHECK(fused_1k < naive_1k / 8);
  // Linear in T: four times the length costs at most ~4x (not 16x) the memory.
  CHECK(fused_4k < 5 * fused_1k);
}

TEST_CASE("attention: reads no column past its head's Dh, nor past the tensors' end") {
  // q, k, v and d out end where NaNs begin (views of longer buffers); with two heads of 8 the
  // rows are 16 floats apart, Dh's padded width, so a kernel reading rows in place would take
  // the other head's columns and, on the last row, the NaNs.
  for (const Case& c : {Case{3, 40, 40, 2, 8, true, false}, Case{2, 64, 64, 4, 4, true, true}}) {
    INFO(describe(c));
    const AttentionOptions opt = options(c);
    auto ending_in_nan = [&](int64_t T, uint64_t seed) {
      const Tensor body = gradcheck::uniform({c.B, T, c.H, c.Dh}, seed, -2, 2);
      Tensor buffer = Tensor::empty(Shape{c.B + 1, T, c.H, c.Dh});
      std::copy_n(body.data(), body.numel(), buffer.data());
      std::fill(buffer.data() + body.numel(), buffer.data() + buffer.numel(), NAN);
      return buffer.narrow0(0, c.B);
    };
    V in = {ending_in_nan(c.Tq, 90), ending_in_nan(c.Tk, 91), ending_in_nan(c.Tk, 92)};
    for (Tensor& t : in) t.requires_grad_();
    const Tensor gout = ending_in_nan(c.Tq, 93);
    const Result fused = run([&](auto& q, auto& k, auto& v) { return attention(q, k, v, opt); }, in, gout);
    const Result naive = run([&](auto& q, auto& k, auto& v) { return attention_naive(q, k, v, opt); }, in, gout);
    for (const Tensor* t : {&fused.out, &fused.gq, &fused.gk, &fused.gv}) CHECK(t->all_finite());
    CHECK(scaled_err(fused.out, naive.out) < 1e-5);  // as fused against naive above
    CHECK(scaled_err(fused.gq, naive.gq) < 1e-5);
    CHECK(scaled_err(fused.gk, naive.gk) < 1e-5);
    CHECK(scaled_err(fused.gv, naive.gv) < 1e-5);
  }
}

TEST_CASE("attention: new gradients written, existing ones added to; q = k = v") {
  for (const Case& c : {Case{9, 64, 64, 1, 64, true, false}, Case{2, 37, 37, 3, 24, true, true}}) {
    INFO(describe(c));
    const AttentionOptions opt = options(c);
    V in = inputs(c, 77);
    const Tensor gout = gradcheck::uniform({c.B, c.Tq, c.H, c.Dh}, 78);
    auto fused = [&](auto& q, auto& k, auto& v) { return attention(q, k, v, opt); };
    const Result written = run(fused, in, gout);  // into new buffers
    const Result first = {written.out, written.gq.clone(), written.gk.clone(), written.gv.clone()};
    backward(sum(mul(fused(in[0], in[1], in[2]), gout)));  // added: each is now twice the first
    CHECK(bit_equal(in[0].grad(), add(first.gq, first.gq)));
    CHECK(bit_equal(in[1].grad(), add(first.gk, first.gk)));
    CHECK(bit_equal(in[2].grad(), add(first.gv, first.gv)));
    // Self-attention on one tensor: its one gradient takes all three parts.
    const V self = {in[0], in[0], in[0]};
    const Result fused_self = run(fused, self, gout);
    const Result naive_self =
        run([&](auto& q, auto& k, auto& v) { return attention_naive(q, k, v, opt); }, self, gout);
    CHECK(scaled_err(fused_self.gq, naive_self.gq) < 1e-5);  // as fused against naive above
  }
}

// The reference of row_dots: products rounded (through memory, so never fused), then added in
// order over the first D / 8 * 8 columns; fused multiply-adds over the rest.
float reference_row_dot(const float* a, const float* b, int64_t D) {
  float dot = 0.f;
  const int64_t rounded = D / 8 * 8;
  for (int64_t d = 0; d < rounded; ++d) {
    volatile float product = a[d] * b[d];
    dot = dot + product;
  }
  for (int64_t d = rounded; d < D; ++d) dot = std::fma(a[d], b[d], dot);
  return dot;
}

TEST_CASE("row_dots: the attention backward's D_i, in its fixed order, at every width") {
  for (int64_t D = 1; D <= 130; ++D)
    for (int64_t n : {1, 15, 16, 17, 40}) {
      INFO("D " << D << " rows " << n);
      const int64_t lda = D + 3, ldb = 2 * D + 1;  // rows apart, as a head's rows are
      const Tensor a = gradcheck::uniform({n, lda}, uint64_t(D * 100 + n)),
                   b = gradcheck::uniform({n, ldb}, uint64_t(D * 100 + n + 7));
      std::vector<float> got(static_cast<size_t>(n));
      tile_kernels::row_dots(n, D, a.data(), lda, b.data(), ldb, got.data());
      int64_t exact = 0, close = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float *ar = a.data() + i * lda, *br = b.data() + i * ldb;
        double want = 0, scale = 0;
        for (int64_t d = 0; d < D; ++d) {
          want += double(ar[d]) * br[d];
          scale += std::fabs(double(ar[d]) * br[d]);
        }
        // D float roundings of terms at most `scale` in size: D ulps of scale bound the error.
        close += std::fabs(got[size_t(i)] - want) <= double(D) * 1.2e-7 * scale;
        const float ref = reference_row_dot(ar, br, D);
        exact += std::memcmp(&got[size_t(i)], &ref, sizeof ref) == 0;
      }
      CHECK(close == n);
#ifdef __AVX512F__
      CHECK(exact == n);  // the vector path keeps the order and rounding of the reference
#endif
    }
}

TEST_CASE("rope: rotation keeps norms, q.k depends only on the offset difference") {
  const int64_t Dh = 24;
  Tensor x = gradcheck::uniform({1, 1, 1, Dh}, 1), y = gradcheck::uniform({1, 1, 1, Dh}, 2);
  auto dot = [&](int64_t m, int64_t n) {
    const Tensor a = rope(x, m), b = rope(y, n);
    double s = 0;
    for (int64_t d = 0; d < Dh; ++d) s += double(a.data()[d]) * b.data()[d];
    return s;
  };
  CHECK(std::fabs(dot(3, 1) - dot(10, 8)) < 1e-5);
  CHECK(std::fabs(dot(3, 1) - dot(500, 498)) < 2e-5);
  CHECK(std::fabs(dot(7, 0) - dot(107, 100)) < 2e-5);
  CHECK(std::fabs(dot(3, 1) - dot(3, 2)) > 1e-3);  // a different difference does change it
  CHECK(bit_equal(rope(x, 0), x));                  // position 0: no rotation
  // Row t of rope(x, offset) is row 0 of rope(x[t], offset + t); every head vector keeps its norm.
  Tensor seq = gradcheck::uniform({2, 5, 3, Dh}, 3);
  const Tensor r = rope(seq, 4);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t) {
      Tensor one = Tensor::empty({1, 1, 3, Dh});
      std::copy_n(seq.data() + (b * 5 + t) * 3 * Dh, 3 * Dh, one.data());
      const Tensor r1 = rope(one, 4 + t);
      for (int64_t i = 0; i < 3 * Dh; ++i)
        CHECK(std::fabs(r1.data()[i] - r.data()[(b * 5 + t) * 3 * Dh + i]) < 1e-6);
      for (int64_t h = 0; h < 3; ++h) {
        double n0 = 0, n1 = 0;
        for (int64_t d = 0; d < Dh; ++d) {
          n0 += std::pow(one.data()[h * Dh + d], 2);
          n1 += std::pow(r1.data()[h * Dh + d], 2);
        }
        CHECK(std::fabs(n0 - n1) < 1e-5 * n0);
      }
    }
}

TEST_CASE("rope: gradcheck, and backward is the inverse rotation") {
  Tensor x = param({2, 6, 2, 8}, 9);
  gradcheck::Result r = gradcheck::check([](const V& in) { return rope(in[0], 3, 100.f); }, {x});
  INFO(r.summary());
  CHECK(r.ok());
  // d(sum(rope(x) * g)) / dx = rope^-1(g): rotating it forward again gives g back.
  Tensor g = gradcheck::uniform({2, 6, 2, 8}, 10);
  x.impl()->grad.reset();
  backward(sum(mul(rope(x, 3, 100.f), g)));
  CHECK(scaled_err(rope(x.grad(), 3, 100.f), g) < 1e-6);
}

TEST_CASE("sinusoidal_positions: spot values against double sin/cos, odd D, offset") {
  const int64_t T = 50, D = 7;  // D odd: the last column is a sin
  const Tensor pe = sinusoidal_positions(T, D), shifted = sinusoidal_positions(10, D, 40);
  REQUIRE(pe.shape() == Shape({T, D}));
  for (int64_t pos : {0, 1, 17, 49})
    for (int64_t c = 0; c < D; ++c) {
      const double angle = double(pos) / std::pow(10000.0, double(2 * (c / 2)) / double(D));
      const double want = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
      CHECK(std::fabs(pe.data()[pos * D + c] - want) < 1e-7);
    }
  for (int64_t i = 0; i < 10 * D; ++i) CHECK(shifted.data()[i] == pe.data()[40 * D + i]);
}

TEST_CASE("alibi_slopes: geometric for powers of two, interleaved otherwise") {
  for (int64_t H : {1, 2, 4, 8, 16}) {
    const std::vector<float> s = alibi_slopes(H);
    REQUIRE(int64_t(s.size()) == H);
    for (int64_t h = 0; h < H; ++h) {
      const double want = std::pow(2.0, -8.0 * double(h + 1) / double(H));
      CHECK(std::fabs(s[size_t(h)] - want) <= 1e-7 * want);
    }
  }
  // H = 12: the 8 slopes of H = 8, then slopes 1, 3, 5, 7 (0-based 0, 2, 4, 6) of H = 16.
  const std::vector<float> s12 = alibi_slopes(12), s8 = alibi_slopes(8), s16 = alibi_slopes(16);
  REQUIRE(s12.size() == 12);
  for (int i = 0; i < 8; ++i) CHECK(s12[size_t(i)] == s8[size_t(i)]);
  for (int i = 0; i < 4; ++i) CHECK(s12[size_t(8 + i)] == s16[size_t(2 * i)]);
  const std::vector<float> s3 = alibi_slopes(3), s2 = alibi_slopes(2), s4 = alibi_slopes(4);
  CHECK(s3[0] == s2[0]);
  CHECK(s3[1] == s2[1]);
  CHECK(s3[2] == s4[0]);
}
