// trilemma bench <benchmark>: performance measurements (bench/), not tests. Benchmarks are the
// entries of bench/benchmarks.cpp; each prints the runtime summary first, unless it prints JSON.
#include <cstdio>
#include <string>

#include "bench/bench.hpp"
#include "framework/config/options.hpp"
#include "framework/runtime/runtime.hpp"
#include "cli/cli.hpp"

namespace tri::cli {

using namespace tri::bench;

namespace {

// A benchmark's name, checked as the option is read: a UsageError naming the registered ones.
const BenchmarkSpec& find_benchmark(const std::string& name) {
  return *as_usage_error([&] { return &benchmark_spec(name); });
}

void check_sizes(const std::string& option, const std::string& list) {
  as_usage_error([&] { return parse_int_list(option, list, {1, 16384}); });
}

}  // namespace

void bench_options(CommandOptions& o) {
  o.named.add_options()
      ("benchmark", po::value<std::string>()->value_name("NAME")->required()
                        ->notifier([](const std::string& n) { find_benchmark(n); }),
       benchmarks_help("the benchmark to run, also the first positional argument:").c_str())
      ("sizes", po::value<std::string>()->value_name("LIST")->default_value("256,512,1024,2048")
                    ->notifier([](const std::string& s) { check_sizes("sizes", s); }),
       "gemm: square sizes, comma-separated")
      ("seq-lens", po::value<std::string>()->value_name("LIST")
                       ->notifier([](const std::string& s) { check_sizes("seq-lens", s); }),
       "mixers, scaling, decode: sequence lengths, comma-separated; default 1024,2048,4096 "
       "(mixers), 256,512,1024,2048,4096 (scaling), 128,256,...,8192 (decode)")
      ("batch", po::value<int>()->value_name("N")->default_value(4)->notifier(in_range("batch", 1, 1024)),
       "mixers, scaling: batch size (scaling decodes one sequence)")
      ("d-model", po::value<int>()->value_name("N")->default_value(128)->notifier(in_range("d-model", 1, 8192)),
       "mixers, scaling, decode: model width")
      ("heads", po::value<int>()->value_name("N")->default_value(4)->notifier(in_range("heads", 1, 256)),
       "mixers, scaling, decode: attention heads")
      ("models", po::value<std::string>()->value_name("LIST")->default_value("attention,linear,mamba"),
       "scaling, decode, train: model families, comma-separated")
      ("configs", po::value<std::string>()->value_name("LIST"),
       train_sizes_help("train: sizes, comma-separated (default all):").c_str())
      ("processes", po::value<int>()->value_name("N")->default_value(1)->notifier(in_range("processes", 1, 64)),
       "train: run N copies of each row at once, as a sweep's lanes do (e.g. 2 with --threads 1); the step time "
       "is the median of their medians")
      ("profile", po::bool_switch(), "train: also print the time per op kind, forward and backward, with the GFLOP/s and share of the sgemm peak of those that count FLOPs")
      ("micro-batches", po::value<int>()->value_name("K")->default_value(1)
                            ->notifier(in_range("micro-batches", 1, 1024)),
       "train: run each step as K forward and backward passes over B / K rows, gradients summed, then one "
       "update (a measurement of what smaller tensors buy; K must divide the size's batch)")
      ("precision", po::value<std::string>()->value_name("P")->default_value("fp32"),
       "train, gemm: the GEMMs' inputs, fp32 or bf16 (gemm: the framework's column; train: each row, and the "
       "peak its share is of)")
      ("row", po::bool_switch(), "train: run one row in this process (internal: each row is a child)")
      ("n-layers", po::value<int>()->value_name("N")->default_value(2)->notifier(in_range("n-layers", 1, 64)),
       "scaling, decode: blocks per model")
      ("window", po::value<int>()->value_name("W")->default_value(0)->notifier(in_range("window", 0, 16384)),
       "scaling, decode: also measure attention with a sliding window of W positions, a series after the "
       "others (its rows carry \"window\": W); 0 = none")
      ("variant", po::value<std::vector<std::string>>()->value_name("SPEC")->composing(),
       "scaling, decode: one more series (repeatable): MIXERS[:KEY=VALUE...], the mixers a hybrid's layers take "
       "in turn joined by '+', then model options, e.g. mamba+attention or "
       "linear:feature-map=taylor:feature-dim=16:short-conv=3:pos=none")
      ("decode-tokens", po::value<int>()->value_name("N")->default_value(16)
                            ->notifier(in_range("decode-tokens", 1, 4096)),
       "scaling, decode: generated tokens timed at each context length")
      ("out", po::value<std::string>()->value_name("FILE"),
       "scaling, decode: also write the measurements as JSON lines to FILE (atomically)")
      ("naive", po::value<bool>()->value_name("BOOL")->default_value(true, "true"),
       "mixers: also run the naive attention kernel (T x T memory) next to the fused one")
      ("model-shapes", po::value<bool>()->value_name("BOOL")->default_value(true, "true"),
       "gemm: also time the GEMMs of linear layers (forward, dx, dW) at typical model shapes")
      ("shapes", po::value<std::string>()->value_name("LIST"),
       "gemm: also time these GEMMs, comma-separated, each MxNxK:OP (OP NN, NT, TN or TT: whether A and B are "
       "transposed), e.g. 16384x386x64:NT, a linear layer's forward on 16384 rows of 64 features into 386")
      ("cold", po::value<bool>()->value_name("BOOL")->default_value(false, "false"),
       "gemm: each call reads operands that no call in the last 512 MB of operands touched, as a training "
       "step's GEMMs meet tensors streamed through memory")
      ("repeats", po::value<int>()->value_name("N")->notifier(in_range("repeats", 1, 1000)),
       "timed runs per case; the median is reported; default 5 (scaling: 3, train: 10 steps)")
      ("min-time", po::value<double>()->value_name("SEC")->default_value(0.2, "0.2")
                       ->notifier(in_range("min-time", 0.001, 60.0)),
       "minimum duration of one timed run, in seconds")
      ("json", po::bool_switch(), "print one JSON object instead of a table (scaling, decode, train: JSON lines)");
  o.positional.add("benchmark", 1);
}

int run_bench(const po::variables_map& vm) {
  const BenchmarkSpec& b = find_benchmark(vm["benchmark"].as<std::string>());
  if (!vm["json"].as<bool>()) std::printf("%s\n", runtime_summary().c_str());
  return b.run(vm);
}

}  // namespace tri::cli
