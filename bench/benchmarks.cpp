// The benchmarks `trilemma bench` runs: one line each, its name, summary and function.
#include "bench/bench.hpp"
#include "framework/config/registry.hpp"

namespace tri::bench {

namespace {

Registry<BenchmarkSpec>& registry() {
  static Registry<BenchmarkSpec> r(
      "benchmark",
      {{"gemm", "sgemm through the framework, oneDNN and OpenBLAS: square sizes and linear layers' shapes", bench_gemm},
       {"mixers", "forward + backward time and memory of each mixer alone, and of the attention kernels", bench_mixers},
       {"data", "tokens per second each task generates", bench_data},
       {"scaling", "a whole model's training step, its mixer alone and decoding, against T", bench_scaling},
       {"train", "the training step of whole models at the PyTorch comparison's and the experiments' sizes", bench_train},
       {"decode", "decoding through the recurrent state against the context length", bench_decode}});
  return r;
}

}  // namespace

const BenchmarkSpec& benchmark_spec(const std::string& name) { return registry().find(name); }
std::vector<std::string> benchmark_names() { return registry().names(); }
std::string benchmarks_help(const std::string& lead) { return registry().help(lead); }

}  // namespace tri::bench
