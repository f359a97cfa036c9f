// Every op in framework/ops/ops.hpp against PyTorch: forward output and input gradients.
// tests/torch/gen_ops.py writes ops.h5, one group per case: inputs in<i>, the torch output
// out, an upstream gradient gout and the torch gradients gin<i> of sum(out * gout), each also
// computed in float64 (out64, gin<i>64). Each case names its op; the runner for that op
// recomputes it here. A case whose op has no runner, or a runner with no case in the file,
// fails the test.
// err: the relative RMS error (tests/compare.hpp) against torch float32 and float64, the worse
// of the two (backward: the worst input), within max(floor, kOwnErrorFactor * torch's own).
// Prints a table "case | op | forward err | backward err | bound fwd / bwd" to stdout.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/compare.hpp"
#include "framework/core/autograd.hpp"
#include "framework/io/h5.hpp"
#include "framework/ops/ops.hpp"

using namespace tri;
using namespace trilemma_test;

namespace {

// The floors of the bounds max(floor, kOwnErrorFactor * torch's own error), forward and
// backward. float32 epsilon is 1.2e-7, so one rounding is worth ~6e-8; "measured" is the
// largest error over oneDNN's ISAs, OpenBLAS's kernels and torch's (docs/TESTING.md).
struct Tol {
  double fwd, bwd;
};
// Pure data movement (shape ops, embedding forward): bit-exact (torch's own error is 0 too).
constexpr Tol kExact{0, 0};
// One IEEE operation per element (correctly rounded: measured 0 forward); broadcast backward
// sums up to 20 terms in another order than torch's: measured 3.9e-7 (div_dim0), margin 10.
constexpr Tol kPointwise{1e-6, 4e-6};
// exp/log/erf/pow from libm here and from torch's vectorised kernels there, a few ulp each:
// measured 7.5e-8, margin 13.
constexpr Tol kTranscendental{1e-6, 1e-6};
// Reductions over up to 96000 elements in another order (double accumulators here, float
// pairwise sums in torch): measured 1.5e-7, margin 13; their backward only scales the
// upstream gradient: measured 2.2e-8.
constexpr Tol kReduce{2e-6, 1e-6};
// GEMM: dot products of length K <= 288 (forward and both backward GEMMs), blocked
// differently by each backend: measured 1.8e-7 forward, 3.1e-7 backward, margin 11 and 13.
constexpr Tol kGemm{2e-6, 4e-6};
// Row-wise normalisations, softmax, cross_entropy: a row sum (D <= 512), a sqrt or exp, then
// a backward that subtracts two such sums: measured 1.5e-7 forward, 2.1e-7 backward, margin
// 13 and 9.5.
constexpr Tol kRowwise{2e-6, 2e-6};

// One case of ops.h5 with its inputs (after the case's non-contiguous transforms).
struct Case {
  const H5File& f;
  std::string group;
  std::vector<Tensor> in;

  float real(const char* name) const { return float(f.attr_double(group, name)); }
  int64_t integer(const char* name) const { return f.attr_int(group, name); }
  bool flag(const char* name) const { return integer(name) != 0; }
  // A list of ints, stored as "a,b,c" ("" is the empty list).
  std::vector<int> list(const char* name) const { return parse_ints(f.attr_string(group, name)); }
  IntTensor ids(const char* name) const {
    Shape s;
    std::vector<int32_t> v = f.read_ints(group + "/" + name, &s);
    return IntTensor(s, std::move(v));
  }
  Tensor opt(size_t i) const { return i < in.size() ? in[i] : Tensor(); }  // optional input

  static std::vector<int> parse_ints(const std::string& s) {
    std::vector<int> v;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) v.push_back(std::stoi(item));
    return v;
  }
};

struct Runner {
  Tol tol;
  std::function<Tensor(const Case&)> run;
};

Tensor book_attention(const Tensor& x) {  // softmax(X X^T / sqrt(d)) X
  const float scale = 1.f / std::sqrt(float(x.size(-1)));
  return matmul(softmax(mul_scalar(matmul(x, x, false, true), scale)), x);
}

const std::map<std::string, Runner>& runners() {
  static const std::map<std::string, Runner> r = {
      {"matmul", {kGemm, [](const Case& c) {
         return matmul(c.in[0], c.in[1], c.flag("trans_a"), c.flag("trans_b"));
       }}},
      {"linear", {kGemm, [](const Case& c) { return linear(c.in[0], c.in[1], c.opt(2)); }}},
      {"add", {kPointwise, [](const Case& c) { return add(c.in[0], c.in[1]); }}},
      {"sub", {kPointwise, [](const Case& c) { return sub(c.in[0], c.in[1]); }}},
      {"mul", {kPointwise, [](const Case& c) { return mul(c.in[0], c.in[1]); }}},
      {"div", {kPointwise, [](const Case& c) { return div(c.in[0], c.in[1]); }}},
      {"add_scalar", {kPointwise, [](const Case& c) { return add_scalar(c.in[0], c.real("s")); }}},
      {"mul_scalar", {kPointwise, [](const Case& c) { return mul_scalar(c.in[0], c.real("s")); }}},
      {"pow_scalar", {kTranscendental, [](const Case& c) { return pow_scalar(c.in[0], c.real("p")); }}},
      {"gelu", {kTranscendental, [](const Case& c) { return gelu(c.in[0]); }}},
      {"silu", {kTranscendental, [](const Case& c) { return silu(c.in[0]); }}},
      {"mul_silu", {kTranscendental, [](const Case& c) { return mul_silu(c.in[0], c.in[1]); }}},
      {"elu", {kTranscendental, [](const Case& c) { return elu(c.in[0], c.real("alpha")); }}},
      {"elu_plus_one", {kTranscendental, [](const Case& c) { return elu_plus_one(c.in[0]); }}},
      {"softplus", {kTranscendental, [](const Case& c) { return softplus(c.in[0]); }}},
      {"exp", {kTranscendental, [](const Case& c) { return exp(c.in[0]); }}},
      {"log", {kTranscendental, [](const Case& c) { return log(c.in[0]); }}},
      {"sigmoid", {kTranscendental, [](const Case& c) { return sigmoid(c.in[0]); }}},
      {"relu", {kPointwise, [](const Case& c) { return relu(c.in[0]); }}},
      {"tanh", {kTranscendental, [](const Case& c) { return tanh(c.in[0]); }}},
      {"sum", {kReduce, [](const Case& c) { return sum(c.in[0], c.list("axes"), c.flag("keepdim")); }}},
      {"mean", {kReduce, [](const Case& c) { return mean(c.in[0], c.list("axes"), c.flag("keepdim")); }}},
      {"reshape", {kExact, [](const Case& c) {
         std::vector<int> s = c.list("shape");
         return reshape(c.in[0], Shape(std::vector<int64_t>(s.begin(), s.end())));
       }}},
      {"permute", {kExact, [](const Case& c) { return permute(c.in[0], c.list("order")); }}},
      {"transpose", {kExact, [](const Case& c) {
         return transpose(c.in[0], int(c.integer("a0")), int(c.integer("a1")));
       }}},
      {"slice", {kExact, [](const Case& c) {
         return slice(c.in[0], int(c.integer("axis")), c.integer("start"), c.integer("end"));
       }}},
      {"concat", {kExact, [](const Case& c) { return concat(c.in, int(c.integer("axis"))); }}},
      // Repeated ids sum their gradient rows in another order than torch: measured 9.6e-9.
      {"embedding", {{0, 1e-7}, [](const Case& c) { return embedding(c.in[0], c.ids("ids")); }}},
      {"layer_norm", {kRowwise, [](const Case& c) {
         return layer_norm(c.in[0], c.opt(1), c.opt(2), c.real("eps"));
       }}},
      {"rms_norm", {kRowwise, [](const Case& c) {
         return rms_norm(c.in[0], c.opt(1), c.real("eps"));
       }}},
      {"l2_norm", {kRowwise, [](const Case& c) { return l2_norm(c.in[0], c.real("eps")); }}},
      {"softmax", {kRowwise, [](const Case& c) { return softmax(c.in[0]); }}},
      // As kRowwise, but the backward's exp(x - lse) takes lse rounded to ulp(|x|), 7.6e-6 at
      // the logits near 100 of the large-logits case (torch exponentiates its output, 60 times
      // more accurate there): measured 1.6e-6, margin 12.
      {"log_softmax", {{2e-6, 2e-5}, [](const Case& c) { return log_softmax(c.in[0]); }}},
      // The mean over rows of a log-sum-exp: a row reduction then a reduction over rows.
      {"cross_entropy", {kRowwise, [](const Case& c) {
         IntTensor targets = c.ids("targets"), mask = c.ids("mask");
         const std::vector<uint8_t> keep(mask.values().begin(), mask.values().end());
         return cross_entropy(c.in[0], masked_targets(targets, keep));
       }}},
      // K = 4 products per output (measured 5.5e-8); the weight gradient sums B*T of them
      // (measured 4.4e-7, margin 11).
      {"causal_conv1d", {{1e-6, 5e-6}, [](const Case& c) {
         return causal_conv1d(c.in[0], c.in[1], c.opt(2));
       }}},
      // Two roundings per product (c x_i, then times x_j; torch: x_i x_j, then divided); backward
      // sums 2F <= 32 products per input: measured 5.1e-8 / 1.1e-7, margin 20 and 36.
      {"taylor_features", {kPointwise, [](const Case& c) { return taylor_features(c.in[0]); }}},
      // Checked by its own mask (check_dropout), by maximum: out/x differs from 1/(1-p) by one
      // rounding (measured 5e-8), the gradient is exactly gout * mask (measured 0).
      {"dropout", {{1e-6, 1e-6}, nullptr}},
      // Two tiny GEMMs around a softmax.
      {"book_attention", {kGemm, [](const Case& c) { return book_attention(c.in[0]); }}},
  };
  return r;
}

// The C++ twin of gen_ops.py's apply_pre; permute/transpose/slice copy, torch makes a view.
Tensor apply_pre(const Tensor& x, const std::string& spec) {
  const size_t comma = spec.find(',');
  const std::string kind = spec.substr(0, comma);
  const std::vector<int> a = Case::parse_ints(comma == std::string::npos ? "" : spec.substr(comma + 1));
  if (kind == "transpose" && a.size() == 2) return transpose(x, a[0], a[1]);
  if (kind == "permute") return permute(x, a);
  if (kind == "slice" && a.size() == 3) return slice(x, a[0], a[1], a[2]);
  throw Error("apply_pre: unknown transform '" + spec +
              "' (allowed: transpose,a0,a1 / permute,o0,o1,... / slice,axis,start,end)");
}

// loss = sum(out * gout), recorded by hand so the harness does not lean on the ops under test:
// its backward hands out exactly gout.
Tensor dot_with(const Tensor& out, const Tensor& gout) {
  if (out.shape() != gout.shape())
    throw Error("output shape " + out.shape().str() + " differs from torch's " + gout.shape().str());
  if (!out.requires_grad()) throw Error("the op recorded no backward for inputs that require grad");
  double s = 0;
  for (int64_t i = 0; i < out.numel(); ++i) s += double(out.data()[i]) * gout.data()[i];
  Tensor loss = Tensor::scalar(float(s));
  record("dot_with_gout", loss, {}, [out, gout](const float* g) {
    float* go = grad_of(out);
    for (int64_t i = 0; i < out.numel(); ++i) go[i] += g[0] * gout.data()[i];
  });
  return loss;
}

void require_same_shape(const Tensor& ours, const Tensor& torch, const std::string& what) {
  if (ours.shape() != torch.shape())
    throw Error(what + ": shape " + ours.shape().str() + " differs from torch's " + torch.shape().str());
}

// One case: each direction's error (the worse of vs float32 and vs float64) and its bound.
struct Row {
  std::string name, op;
  double fwd = NAN, bwd = NAN, fwd_bound = 0, bwd_bound = 0;
  std::string error;  // non-empty: the case could not run
  bool ok() const { return error.empty() && fwd <= fwd_bound && bwd <= bwd_bound; }
  void set(const ParityErrors& f, const ParityErrors& b, const Tol& tol) {
    fwd = std::max(f.vs_exact, f.vs_torch), fwd_bound = f.bound(tol.fwd);
    bwd = std::max(b.vs_exact, b.vs_torch), bwd_bound = b.bound(tol.bwd);
  }
};

// Leaves in<i> (requiring grad) and the inputs the op sees (after pre<i>).
std::vector<Tensor> read_inputs(const H5File& f, const std::string& g, std::vector<Tensor>& leaves) {
  std::vector<Tensor> in;
  for (int i = 0; f.exists(g + "/in" + std::to_string(i)); ++i) {
    Tensor x = f.read(g + "/in" + std::to_string(i));
    x.requires_grad_();
    leaves.push_back(x);
    const std::string pre = "pre" + std::to_string(i);
    in.push_back(f.has_attr(g, pre) ? apply_pre(x, f.attr_string(g, pre)) : x);
  }
  if (in.empty()) throw Error(g + " has no inputs in0, in1, ...");
  return in;
}

void check_against_torch(const H5File& f, const std::string& g, const Runner& r, Row& row) {
  std::vector<Tensor> leaves;
  Case c{f, g, read_inputs(f, g, leaves)};
  Tensor out = r.run(c);
  // Inputs are O(1): errors are relative to max(1, rms(reference)), as sums that cancel to
  // near zero (a mean, a divisor's gradient) carry the rounding of their O(1) terms.
  ParityErrors fwd{1}, bwd{1};
  const Tensor torch_out = f.read(g + "/out");
  require_same_shape(out, torch_out, "out");
  fwd.add("out", out, torch_out, f.read(g + "/out64"));
  backward(dot_with(out, f.read(g + "/gout")));
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string gin = "gin" + std::to_string(i);
    Tensor want = f.read(g + "/" + gin);
    Tensor got = leaves[i].grad();
    if (!got.defined()) got = Tensor::zeros(leaves[i].shape());  // no gradient reached it
    require_same_shape(got, want, gin);
    bwd.add(gin, got, want, f.read(g + "/" + gin + "64"));
  }
  row.set(fwd, bwd, r.tol);
}

// Dropout's RNG is not torch's: recover the mask from out / x and check it instead.
void check_dropout(const H5File& f, const std::string& g, const Tol& tol, Row& row) {
  std::vector<Tensor> leaves;
  Case c{f, g, read_inputs(f, g, leaves)};
  const Tensor& x = c.in[0];  // gen_ops.py draws |x| >= 0.1, so out / x is well defined
  const float p = c.real("p");
  const uint64_t seed = uint64_t(c.integer("seed")), counter = uint64_t(c.integer("counter"));
  const float scale = 1.f / (1.f - p);
  row.fwd_bound = tol.fwd, row.bwd_bound = tol.bwd;
  Tensor out = dropout(x, p, true, seed, counter);
  const int64_t n = x.numel();
  std::vector<float> mask(n);  // the nearest of {0, scale}
  int64_t dropped = 0;
  row.fwd = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double m = double(out.data()[i]) / x.data()[i];
    const bool drop = std::fabs(m) < std::fabs(m - scale);
    dropped += drop;
    mask[size_t(i)] = drop ? 0.f : scale;
    row.fwd = std::max(row.fwd, std::fabs(m - mask[size_t(i)]) / scale);
  }
  // The drop rate is Binomial(n, p) / n: allow 6 standard deviations.
  const double rate = double(dropped) / double(n), sigma = std::sqrt(p * (1 - p) / double(n));
  CHECK_MESSAGE(std::fabs(rate - p) <= 6 * sigma, "dropout rate " << rate << " vs p = " << p);
  Tensor gout = f.read(g + "/gout");
  backward(dot_with(out, gout));
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i) want[size_t(i)] = gout.data()[i] * mask[size_t(i)];
  row.bwd = max_rel_err(leaves[0].grad().data(), want.data(), n);
  // Same (seed, counter): the same mask; another counter: another mask; off: the identity.
  NoGradGuard no_grad;
  CHECK(dropout(x, p, true, seed, counter).tolist() == out.tolist());
  CHECK(dropout(x, p, true, seed, counter + 1).tolist() != out.tolist());
  CHECK(dropout(x, p, false, seed, counter).tolist() == x.tolist());
  CHECK(dropout(x, 0.f, true, seed, counter).tolist() == x.tolist());
}

void print_table(const std::vector<Row>& rows) {
  std::printf("\n| case | op | forward err | backward err | bound fwd / bwd |\n");
  std::printf("|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      std::printf("| %s | %s | FAILED: %s | | |\n", r.name.c_str(), r.op.c_str(), r.error.c_str());
      continue;
    }
    std::printf("| %s | %s | %.1e | %.1e | %.1e / %.1e%s |\n", r.name.c_str(), r.op.c_str(), r.fwd,
                r.bwd, r.fwd_bound, r.bwd_bound, r.ok() ? "" : " EXCEEDED");
  }
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("every op matches PyTorch forward and backward") {
  H5File f(torch_ref("ops.h5"), H5File::Mode::read);
  const std::vector<std::string> names = f.list("/");
  std::vector<Row> rows;
  std::set<std::string> ops_seen;
  for (const std::string& name : names) {
    const std::string g = "/" + name;
    Row row;
    row.name = name;
    row.op = f.attr_string(g, "op");
    ops_seen.insert(row.op);
    auto it = runners().find(row.op);
    try {
      if (it == runners().end()) throw Error("no C++ runner for op '" + row.op + "'");
      if (row.op == "dropout")
        check_dropout(f, g, it->second.tol, row);
      else
        check_against_torch(f, g, it->second, row);
    } catch (const std::exception& e) {
      row.error = e.what();
      clear_tape();
    }
    CHECK_MESSAGE(row.ok(), name << " (" << row.op << "): forward err " << row.fwd << " (bound "
                                 << row.fwd_bound << "), backward err " << row.bwd << " (bound "
                                 << row.bwd_bound << ") " << row.error);
    rows.push_back(row);
  }
  for (const auto& [op, runner] : runners())
    CHECK_MESSAGE(ops_seen.count(op), "op '" << op << "' has no case in ops.h5 (add one to "
                                                      "tests/torch/gen_ops.py)");
  print_table(rows);
}
