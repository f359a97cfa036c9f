// linear_parts (Mamba 2's input projection as five tensors) against finite differences and bit
// for bit against the slices of linear, whose bits the committed runs carry.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "gradcheck.hpp"

using namespace tri;
using gradcheck::param;
using V = std::vector<Tensor>;

namespace {

void expect_grads(const V& inputs, const gradcheck::Fn& f) {
  const gradcheck::Result r = gradcheck::check(f, inputs, {});
  INFO(r.summary());
  CHECK(r.ok());
}

}  // namespace

TEST_CASE("linear_parts: finite differences, and the bits of linear's slices") {
  Tensor x = param({2, 3, 4}, 11), w = param({6, 4}, 12);
  expect_grads({x, w}, [](const V& in) { return concat(linear_parts(in[0], in[1], {2, 3, 1}), -1); });
  // A part no gradient reaches: its columns of d out are zeros.
  expect_grads({x, w}, [](const V& in) {
    const V p = linear_parts(in[0], in[1], {2, 3, 1});
    return concat({p[0], p[2]}, -1);
  });
  // Mamba 2's in_proj (z, x, B, C, dt) at sizes of the experiments, a 1- or 2-column part
  // (a GEMV alone) among them: forward and both gradients keep every bit of slice(linear(x, w)).
  for (const std::vector<int64_t>& widths : {std::vector<int64_t>{64, 64, 64, 64, 1}, {128, 128, 16, 16, 2},
                                             {256, 256, 64, 64, 4}}) {
    int64_t total = 0;
    for (int64_t n : widths) total += n;
    const int64_t in = widths[0] / 2;
    CAPTURE(total);
    Tensor xb = param({32, 64, in}, 13), wb = param({total, in}, 14);
    V gs;
    for (size_t i = 0; i < widths.size(); ++i) gs.push_back(param({32, 64, widths[i]}, 15 + int(i)));
    auto run = [&](bool parts) {
      for (Tensor* t : {&xb, &wb}) t->impl()->grad.reset();
      V outs;
      if (parts) {
        outs = linear_parts(xb, wb, widths);
      } else {
        const Tensor full = linear(xb, wb);
        int64_t c0 = 0;
        for (int64_t n : widths) {
          outs.push_back(slice(full, -1, c0, c0 + n));
          c0 += n;
        }
      }
      Tensor loss = sum(mul(outs[0], gs[0]));
      for (size_t i = 1; i < outs.size(); ++i) loss = add(loss, sum(mul(outs[i], gs[i])));
      backward(loss);
      outs.push_back(xb.grad());
      outs.push_back(wb.grad());
      return outs;
    };
    const V a = run(true), b = run(false);
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      REQUIRE(a[i].numel() == b[i].numel());
      CHECK(std::memcmp(a[i].data(), b[i].data(), sizeof(float) * size_t(a[i].numel())) == 0);
    }
  }
}
