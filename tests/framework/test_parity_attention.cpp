// Softmax attention, RoPE and ALiBi against PyTorch. tests/torch/gen_attention.py writes
// attention.h5 (its docstring lists the layout), each case in float32 and float64; here the
// fused kernel and the naive one both recompute every case: outputs and the gradients of
// sum(out * gout), compared by relative RMS error against torch float32 and float64 within
// max(kFloor, kOwnErrorFactor * torch's own) (tests/compare.hpp).
// Prints a table "case | path | out err / bound | grad err / bound" (err: the worse of vs
// float32 and vs float64).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/kernels/attention.hpp"
#include "framework/ops/positions.hpp"
#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/ops/ops.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

// Attention rows are sums of up to 150 products (q.k, p.v) and an exp, computed in another
// order than torch's: measured at most 3.7e-7 relative RMS, a margin of 27, while a wrong mask,
// bias or scale errs by > 1e-2.
constexpr double kFloor = 1e-5;

struct Errors {
  ParityErrors out, grad;
};

// Runs f on the case's inputs (named `names`), and compares the output and the inputs'
// gradients with the file's.
template <class F>
Errors compare(const H5File& f, const std::string& c, const std::vector<std::string>& names, F fn) {
  std::vector<Tensor> in;
  for (const std::string& n : names) in.push_back(f.read(c + "/" + n).requires_grad_());
  const Tensor out = fn(in);
  backward(sum(mul(out, f.read(c + "/gout"))));
  Errors e;
  e.out.add("out", out, f.read(c + "/out"), f.read(c + "/out64"));
  for (size_t i = 0; i < in.size(); ++i) {
    REQUIRE(in[i].grad().defined());
    const std::string g = c + "/g" + names[i];
    e.grad.add("g" + names[i], in[i].grad(), f.read(g), f.read(g + "64"));
  }
  return e;
}

}  // namespace

TEST_CASE("parity: ALiBi slopes match the official implementation") {
  H5File f(torch_ref("attention.h5"), H5File::Mode::read);
  const std::vector<std::string> heads = f.list("/slopes");
  REQUIRE(heads.size() >= 10);
  for (const std::string& h : heads) {
    const Tensor want = f.read("/slopes/" + h);
    const std::vector<float> got = alibi_slopes(std::stoll(h));
    REQUIRE(int64_t(got.size()) == want.numel());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("H " << h << " slope " << i);
      CHECK(std::fabs(got[i] - want.data()[i]) <= 1e-7f * want.data()[i]);
    }
  }
}

TEST_CASE("parity: attention, RoPE and RoPE + attention against PyTorch") {
  H5File f(torch_ref("attention.h5"), H5File::Mode::read);
  std::printf("\n%-21s | %-5s | %-19s | %-19s\n", "case", "path", "out err / bound", "grad err / bound");
  int cases = 0;
  auto report = [](const std::string& c, const char* path, const Errors& e) {
    std::printf("%-21s | %-5s | %.2e / %.2e | %.2e / %.2e\n", c.c_str(), path,
                std::max(e.out.vs_exact, e.out.vs_torch), e.out.bound(kFloor),
                std::max(e.grad.vs_exact, e.grad.vs_torch), e.grad.bound(kFloor));
    for (const ParityErrors* p : {&e.out, &e.grad}) {
      INFO(c << " (" << path << ") " << p->worst << ": vs float64 " << p->vs_exact << ", vs torch "
             << p->vs_torch << ", torch's own " << p->torch_own << ", bound " << p->bound(kFloor));
      CHECK(p->within(kFloor));
    }
  };
  for (const std::string& c : f.list("/")) {
    if (c == "slopes") continue;
    const std::string op = f.attr_string(c, "op");
    ++cases;
    if (op == "attention") {
      AttentionOptions opt;
      opt.causal = f.attr_int(c, "causal") != 0;
      opt.scale = float(f.attr_double(c, "scale"));
      opt.window = f.attr_int(c, "window");
      if (f.attr_int(c, "alibi")) opt.alibi_slopes = alibi_slopes(f.shape_of(c + "/q")[2]);
      report(c, "fused", compare(f, c, {"q", "k", "v"}, [&](const std::vector<Tensor>& x) {
               return attention(x[0], x[1], x[2], opt);
             }));
      report(c, "naive", compare(f, c, {"q", "k", "v"}, [&](const std::vector<Tensor>& x) {
               return attention_naive(x[0], x[1], x[2], opt);
             }));
    } else if (op == "rope") {
      const int64_t offset = f.attr_int(c, "offset");
      const float base = float(f.attr_double(c, "base"));
      report(c, "rope", compare(f, c, {"x"}, [&](const std::vector<Tensor>& x) {
               return rope(x[0], offset, base);
             }));
    } else if (op == "rope_attention") {
      const int64_t Tq = f.shape_of(c + "/q")[1], Tk = f.shape_of(c + "/k")[1];
      AttentionOptions opt;
      opt.window = f.attr_int(c, "window");
      report(c, "fused", compare(f, c, {"q", "k", "v"}, [&](const std::vector<Tensor>& x) {
               return attention(rope(x[0], Tk - Tq), rope(x[1], 0), x[2], opt);
             }));
    } else {
      FAIL("case " << c << " has unknown op " << op);
    }
  }
  CHECK(cases >= 19);
}
