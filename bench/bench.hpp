// The benchmarks `trilemma bench <name>` runs, their registry (adding one: its function in a
// file of bench/ plus its line in benchmarks.cpp; its options, if new, in cli/cmd_bench.cpp),
// and what they share. Performance measurements, not tests: the suite never runs them at full
// size.
#pragma once
#include "framework/core/stats.hpp"  // median
#include "framework/core/tensor.hpp"
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace tri {
struct ModelConfig;
}

namespace tri::bench {

namespace po = boost::program_options;

// A list option of sizes (integers 1..16384, comma-separated); UsageError naming it otherwise.
// `fallback` is the benchmark's own default, for options whose default differs per benchmark.
std::vector<int64_t> bench_sizes(const po::variables_map& vm, const std::string& option,
                                 const std::string& fallback = "");
// A --models list: model family names, comma-separated; UsageError naming an unknown one.
std::vector<std::string> family_list(const std::string& text);
// --repeats, or the benchmark's own default.
int bench_repeats(const po::variables_map& vm, int fallback);
// The 1-minute load average when a benchmark starts: well above what the machine just ran means
// other processes share the cores, and the numbers (2-thread ones most: OpenMP barriers stall
// when a core is taken) are not to be trusted.
double load_average();

// One training step's cost: the median time of the timed runs, and the peak extra tensor
// memory (the high-water mark of tensor storage during a run above what was live before it, so
// it counts activations, saved tensors and gradients, not the parameters).
struct StepCost {
  double ms;
  int64_t peak_bytes;
};
// Runs `step` once to warm up (caches, lazily made optimizer state), then `repeats` timed times.
StepCost measure_step(const std::function<void()>& step, int repeats);
// The same for several steps, timed in rounds (one run of each step per round), so a burst of
// load on a shared machine lands on one timing of several steps, where a median drops it, not
// on every timing of one step.
std::vector<StepCost> measure_steps_interleaved(const std::vector<std::function<void()>>& steps, int repeats);

// Forward + backward of the mixer `cfg` makes, alone, on x ~ N(0, 1) [B, T, d_model]
// (bench_mixers.cpp); with the mixer's parameter count and recurrent state per sequence.
struct MixerCost {
  StepCost cost;
  int64_t params, state_bytes;
};
MixerCost measure_mixer(const ModelConfig& cfg, int64_t B, int64_t T, int repeats);

struct BenchmarkSpec {
  std::string name;     // what `trilemma bench` takes
  std::string summary;  // one line for --help
  int (*run)(const po::variables_map& vm) = nullptr;  // returns the exit code
};
// The entry of `name`; an Error naming the registered benchmarks when there is none.
const BenchmarkSpec& benchmark_spec(const std::string& name);
std::vector<std::string> benchmark_names();
// "<lead> gemm (its summary), mixers (...), ...", for --help.
std::string benchmarks_help(const std::string& lead);

int bench_gemm(const po::variables_map& vm);
int bench_mixers(const po::variables_map& vm);
int bench_data(const po::variables_map& vm);
int bench_scaling(const po::variables_map& vm);
int bench_train(const po::variables_map& vm);
// "<lead> S (d 128, ...), W (...), ...": the sizes `bench train --configs` takes, for --help.
std::string train_sizes_help(const std::string& lead);
int bench_decode(const po::variables_map& vm);

}  // namespace tri::bench
