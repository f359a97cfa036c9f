// trilemma bench gemm: side by side in one process, the framework's tri::matmul on Tensors,
// raw dnnl_sgemm and raw cblas_sgemm, on square sizes, on the GEMMs of linear layers and on
// shapes given (--shapes); with --cold every call reads operands no recent call touched, as a
// GEMM in a training step meets tensors that streamed through memory since they were written.
#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.hpp"
#include "framework/ops/ops.hpp"
#include "framework/config/options.hpp"
#include "framework/core/rng.hpp"
#include "framework/runtime/gemm_bf16.hpp"
#include "framework/runtime/runtime.hpp"
#include "train/run_config.hpp"

namespace tri::bench {

using namespace tri::train;

namespace {

// One GEMM: C[m, n] = op(A) op(B), row-major, op = transpose where ta / tb.
struct GemmCase {
  std::string label;
  int64_t m, n, k;
  bool ta, tb;
};

std::vector<GemmCase> gemm_cases(const std::vector<int64_t>& sizes, bool model_shapes) {
  std::vector<GemmCase> cases;
  for (int64_t s : sizes) cases.push_back({"square", s, s, s, false, false});
  if (!model_shapes) return cases;
  // A linear layer on x [M, in] with W [out, in] (M = B*T rows) runs three GEMMs.
  const int64_t layers[][3] = {{4096, 128, 128}, {4096, 128, 512}, {4096, 512, 128}};
  for (const auto& l : layers) {
    const int64_t M = l[0], in = l[1], out = l[2];
    std::string name = "linear " + std::to_string(M) + "x" + std::to_string(in) + "->" +
                       std::to_string(out);
    cases.push_back({name + " y=xW^T", M, out, in, false, true});
    cases.push_back({name + " dx=dyW", M, in, out, false, false});
    cases.push_back({name + " dW=dy^Tx", out, in, M, true, false});
  }
  return cases;
}

// One --shapes entry, MxNxK:OP (OP: NN, NT, TN or TT, whether A and B are transposed), e.g.
// 16384x386x64:NT, a linear layer's forward on 16384 rows of 64 features into 386.
GemmCase parse_shape(const std::string& text) {
  const std::string bad = "--shapes: '" + text + "' is not MxNxK:OP (sizes 1..1048576, OP one of NN, NT, TN, TT)";
  const size_t colon = text.find(':');
  if (colon == std::string::npos) throw UsageError(bad);
  const std::string op = text.substr(colon + 1);
  if (op.size() != 2 || (op[0] != 'N' && op[0] != 'T') || (op[1] != 'N' && op[1] != 'T')) throw UsageError(bad);
  int64_t mnk[3];
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t end = i < 2 ? text.find('x', start) : colon;
    if (end == std::string::npos || end > colon) throw UsageError(bad);
    const std::string part = text.substr(start, end - start);
    if (part.empty() || part.size() > 7 || part.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError(bad);
    mnk[i] = std::stoll(part);
    if (mnk[i] < 1 || mnk[i] > (1 << 20)) throw UsageError(bad);
    start = end + 1;
  }
  return {"shape " + text, mnk[0], mnk[1], mnk[2], op[0] == 'T', op[1] == 'T'};
}

using Clock = std::chrono::steady_clock;

double time_calls(const std::function<void()>& call, int iters) {
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) call();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Warms up (first touch, JIT), then finds how many calls fill min_time.
int calibrate(const std::function<void()>& call, double min_time) {
  call();
  int iters = 1;
  for (;;) {
    double t = time_calls(call, iters);
    if (t >= min_time) return iters;
    double grow = t > 0 ? 1.2 * min_time / t : 100.0;
    iters = int(std::ceil(iters * std::clamp(grow, 1.5, 100.0)));
  }
}

}  // namespace

namespace {

// Largest |x - ref| relative to the largest |ref|: the three implementations must agree.
double relative_diff(const float* x, const float* ref, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, double(std::fabs(x[i] - ref[i])));
    scale = std::max(scale, double(std::fabs(ref[i])));
  }
  return diff / std::max(scale, 1e-30);
}

struct GemmResult {
  GemmCase c;
  double framework, onednn, openblas;  // GFLOP/s, median over the repeats
};

// Cold: copies of the operands whose sum is at least this, taken in turn, so that a call's
// operands were last touched some hundreds of MB of traffic ago (beyond any L2, and beyond the
// share of L3 a core gets here).
constexpr double kColdBytes = 512e6;

GemmResult measure(const GemmCase& c, int repeats, double min_time, bool cold) {
  Rng rng(1234);
  auto random_tensor = [&](int64_t rows, int64_t cols) {
    Tensor t = Tensor::empty({rows, cols});
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = float(2 * rng.uniform() - 1);
    return t;
  };
  const double bytes = 4.0 * double(c.m * c.k + c.k * c.n + 2 * c.m * c.n);
  const int copies = cold ? int(std::clamp(std::ceil(kColdBytes / bytes), 2.0, 4096.0)) : 1;
  std::vector<Tensor> a, b, c_dnnl, c_blas;
  for (int i = 0; i < copies; ++i) {
    a.push_back(c.ta ? random_tensor(c.k, c.m) : random_tensor(c.m, c.k));
    b.push_back(c.tb ? random_tensor(c.n, c.k) : random_tensor(c.k, c.n));
    c_dnnl.push_back(Tensor::zeros({c.m, c.n}));
    c_blas.push_back(Tensor::zeros({c.m, c.n}));
  }
  Tensor c_fw;
  const int64_t lda = a[0].size(1), ldb = b[0].size(1);
  int next[3] = {0, 0, 0};  // each implementation's next copy
  auto take = [&](int i) {
    const int k = next[i];
    next[i] = (k + 1) % copies;
    return k;
  };

  std::function<void()> calls[3] = {
      [&] {
        const int i = take(0);
        c_fw = matmul(a[i], b[i], c.ta, c.tb);
      },
      [&] {
        const int i = take(1);
        dnnl_sgemm(c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.m, c.n, c.k, 1.f, a[i].data(), lda,
                   b[i].data(), ldb, 0.f, c_dnnl[i].data(), c.n);
      },
      [&] {
        const int i = take(2);
        cblas_sgemm(CblasRowMajor, c.ta ? CblasTrans : CblasNoTrans,
                    c.tb ? CblasTrans : CblasNoTrans, int(c.m), int(c.n), int(c.k), 1.f,
                    a[i].data(), int(lda), b[i].data(), int(ldb), 0.f, c_blas[i].data(), int(c.n));
      }};
  int iters[3];
  for (int i = 0; i < 3; ++i) iters[i] = calibrate(calls[i], min_time);

  // The three results of one copy: calibrate's last calls ran each on the same copy only by
  // chance, so run copy 0 once more in each.
  for (int i = 0; i < 3; ++i) {
    next[i] = 0;
    calls[i]();
  }
  const int64_t n = c.m * c.n;
  double diff = std::max(relative_diff(c_fw.data(), c_dnnl[0].data(), n),
                         relative_diff(c_blas[0].data(), c_dnnl[0].data(), n));
  // bf16 inputs (the framework's column under --precision bf16) round to 2^-9 relative, so its
  // results stand a few 2^-9 of the largest entry apart; a wrong result is off by O(1).
  const double tolerance = gemm_precision() == Precision::bf16 ? 1.0 / 64 : 1e-4;
  if (diff > tolerance)
    throw Error("bench gemm: results differ by " + std::to_string(diff) + " (relative) for " +
                c.label + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                " k=" + std::to_string(c.k));

  // Interleaved, so a slow phase of the machine hits all three alike.
  const double flops = 2.0 * double(c.m) * double(c.n) * double(c.k);
  std::vector<double> gflops[3];
  for (int r = 0; r < repeats; ++r)
    for (int i = 0; i < 3; ++i) {
      // OpenBLAS's worker threads busy-wait for a while after a call; a pause lets them park
      // so they do not take the cores from the next measurement.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gflops[i].push_back(flops * iters[i] / time_calls(calls[i], iters[i]) * 1e-9);
    }
  return {c, median(gflops[0]), median(gflops[1]), median(gflops[2])};
}

std::string op_name(const GemmCase& c) { return std::string(c.ta ? "T" : "N") + (c.tb ? "T" : "N"); }

double ratio(const GemmResult& r) { return r.framework / std::max(r.onednn, r.openblas); }

Json gemm_json(const std::vector<GemmResult>& results, int repeats, double min_time, bool cold, double load) {
  const RuntimeInfo info = runtime_info();
  Json j = {{"benchmark", "gemm"},
            {"threads", info.threads},
            {"gemm_backend", info.gemm_backend},
            {"openblas_core", info.openblas_core},
            {"openblas_core_generic", info.openblas_core_generic},
            {"repeats", repeats},
            {"min_time", min_time},
            {"cold", cold},
            {"precision", precision_name(gemm_precision())},
            {"load_average", load},
            {"rows", Json::array()}};
  for (const GemmResult& r : results)
    j["rows"].push_back({{"case", r.c.label}, {"m", r.c.m}, {"n", r.c.n}, {"k", r.c.k}, {"op", op_name(r.c)},
                         {"framework", r.framework}, {"onednn", r.onednn}, {"openblas", r.openblas},
                         {"ratio", ratio(r)}});
  return j;
}

}  // namespace

int bench_gemm(const po::variables_map& vm) {
  const std::vector<int64_t> sizes = bench_sizes(vm, "sizes");
  const int repeats = bench_repeats(vm, 5);
  const double min_time = vm["min-time"].as<double>();
  const bool json = vm["json"].as<bool>();
  const bool cold = vm["cold"].as<bool>();
  set_gemm_precision(precision_of(vm["precision"].as<std::string>()));
  std::vector<GemmCase> cases = gemm_cases(sizes, vm["model-shapes"].as<bool>());
  if (vm.count("shapes"))
    for (const std::string& text : split(vm["shapes"].as<std::string>(), ',')) cases.push_back(parse_shape(text));

  const RuntimeInfo info = runtime_info();
  const double load = load_average();
  if (!json) {
    std::printf("GEMM GFLOP/s, median of %d runs of >= %.2f s each, %d threads, load average %.2f%s\n",
                repeats, min_time, info.threads, load,
                cold ? "; cold: each call's operands not touched in the last 512 MB of calls" : "");
    const std::string framework = gemm_precision() == Precision::bf16 ? "bf16 inputs, " + bf16_kernel()
                                                                      : "backend " + info.gemm_backend;
    std::printf("framework = tri::matmul on Tensors (%s), onednn = dnnl_sgemm %s,"
                " openblas = cblas_sgemm (kernel %s%s)\n",
                framework.c_str(), info.dnnl_version.c_str(), info.openblas_core.c_str(),
                info.openblas_core_generic ? ", GENERIC" : "");
    std::printf("%-30s %5s %5s %5s %3s %10s %9s %9s %8s\n", "case", "m", "n", "k", "op",
                "framework", "onednn", "openblas", "fw/best");
  }
  std::vector<GemmResult> results;
  for (const GemmCase& c : cases) {
    results.push_back(measure(c, repeats, min_time, cold));
    const GemmResult& r = results.back();
    if (!json) {
      std::printf("%-30s %5lld %5lld %5lld %3s %10.1f %9.1f %9.1f %8.2f\n", c.label.c_str(),
                  (long long)c.m, (long long)c.n, (long long)c.k, op_name(c).c_str(), r.framework,
                  r.onednn, r.openblas, ratio(r));
      std::fflush(stdout);
    }
  }
  if (json) std::printf("%s\n", gemm_json(results, repeats, min_time, cold, load).dump().c_str());
  return 0;
}

}  // namespace tri::bench
