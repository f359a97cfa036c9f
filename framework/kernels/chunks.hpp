// Helpers of the chunkwise forms (delta_rule_chunked.cpp, ssd_scan_chunked.cpp): a sequence
// [B, T, H, D] cut into chunks of C steps along T, and put back together. Ops only, so the tape
// differentiates through them.
#pragma once
#include <vector>

#include "framework/ops/ops.hpp"

namespace tri::chunks {

// A constant C x C matrix: 1 where pick(t, i), else 0.
template <class Pick>
Tensor mask_of(int64_t C, Pick pick) {
  std::vector<float> m(size_t(C * C));
  for (int64_t t = 0; t < C; ++t)
    for (int64_t i = 0; i < C; ++i) m[size_t(t * C + i)] = pick(t, i) ? 1.f : 0.f;
  return Tensor::from(Shape{C, C}, m);
}

// x [B, T, H, D] padded with zero steps to n C, as [n, B, H, C, D]: chunk c is slice c. The
// callers' zero steps leave their state as it is.
inline Tensor split(const Tensor& x, int64_t C, int64_t n) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3);
  Tensor padded = n * C == T ? x : concat({x, Tensor::zeros(Shape{B, n * C - T, H, D})}, 1);
  return permute(reshape(padded, Shape{B, n, C, H, D}), {1, 0, 3, 2, 4});
}

// Chunk c of split's result: [B, H, C, D].
inline Tensor at(const Tensor& chunks, int64_t c) {
  const std::vector<int64_t> dims = chunks.shape().vec();
  return reshape(slice(chunks, 0, c, c + 1), Shape(std::vector<int64_t>(dims.begin() + 1, dims.end())));
}

// The decay inside a chunk from per-step logs l [B, H, C, 1] (l <= 0): with L_t = l_1 + ... + l_t,
//   within  [B, H, C, C]  exp(L_t - L_i) for i <= t, 0 above the diagonal
//   from_start [B, H, C, 1]  exp(L_t), the decay since the chunk began
//   to_end  [B, H, C, 1]  exp(L_C - L_i), the decay from step i to the chunk's end
//   whole   [B, H, 1, 1]  exp(L_C)
// Each exponent is summed over its own segment, l_{i+1} + ... + l_t, as mamba_ssm's segsum does:
// the difference of two long prefix sums would lose the short segment's digits (L_t near -60 in
// float32 leaves L_t - L_i about 4e-6 off), and its gradient in l with them.
struct DecayMasks {
  Tensor causal, prefix, suffix, segments;  // made once per call: C x C, C x C, C x C, C x C^2
  explicit DecayMasks(int64_t C)
      : causal(mask_of(C, [](int64_t t, int64_t i) { return i <= t; })),
        prefix(mask_of(C, [](int64_t s, int64_t t) { return s <= t; })),   // L_t = sum_s l_s prefix[s, t]
        suffix(mask_of(C, [](int64_t s, int64_t i) { return s > i; })) {   // L_C - L_i
    std::vector<float> w(size_t(C * C * C), 0.f);  // w[s, (t, i)] = 1 for i < s <= t
    for (int64_t s = 0; s < C; ++s)
      for (int64_t t = s; t < C; ++t)
        for (int64_t i = 0; i < s; ++i) w[size_t((s * C + t) * C + i)] = 1.f;
    segments = Tensor::from(Shape{C, C * C}, w);
  }
};

struct Decay {
  Tensor within, from_start, to_end, whole;
  Decay(const Tensor& l, const DecayMasks& m) {
    const int64_t B = l.size(0), H = l.size(1), C = l.size(2);
    const Tensor lrow = reshape(l, Shape{B, H, 1, C});
    within = mul(exp(reshape(matmul(lrow, m.segments), Shape{B, H, C, C})), m.causal);
    const Tensor L = reshape(matmul(lrow, m.prefix), Shape{B, H, C, 1});
    from_start = exp(L);
    to_end = exp(reshape(matmul(lrow, m.suffix), Shape{B, H, C, 1}));
    whole = reshape(slice(permute(from_start, {2, 0, 1, 3}), 0, C - 1, C), Shape{B, H, 1, 1});
  }
};

// The chunks' outputs, each [B, H, C, D], as one [B, T, H, D] with the padding cut.
inline Tensor join(const std::vector<Tensor>& outs, int64_t T) {
  const int64_t B = outs[0].size(0), H = outs[0].size(1), C = outs[0].size(2), D = outs[0].size(3);
  const int64_t n = int64_t(outs.size());
  std::vector<Tensor> stacked;
  for (const Tensor& o : outs) stacked.push_back(reshape(o, Shape{1, B, H, C, D}));
  const Tensor time_major = reshape(permute(concat(stacked, 0), {0, 3, 1, 2, 4}), Shape{n * C, B, H, D});
  return permute(slice(time_major, 0, 0, T), {1, 0, 2, 3});
}

}  // namespace tri::chunks
