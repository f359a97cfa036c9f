// The benchmarks `trilemma bench <name>` runs (train/cmd_bench.cpp has the table and options),
// and what they share. Performance measurements, not tests: the suite never runs them at full
// size.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "train/cli.hpp"

namespace tri::cli {

// A list option of sizes (integers 1..16384, comma-separated); UsageError naming it otherwise.
std::vector<int64_t> bench_sizes(const po::variables_map& vm, const std::string& option);
// The 1-minute load average when a benchmark starts: well above what the machine just ran means
// other processes share the cores, and the numbers (2-thread ones most: OpenMP barriers stall
// when a core is taken) are not to be trusted.
double load_average();
double median(std::vector<double> v);

int bench_gemm(const po::variables_map& vm);
int bench_mixers(const po::variables_map& vm);
int bench_data(const po::variables_map& vm);

}  // namespace tri::cli
