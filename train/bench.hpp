// Shared by the benchmarks (train/cmd_bench.cpp, train/bench_*.cpp).
#pragma once
#include <string>
#include <vector>

#include "train/cli.hpp"

namespace tri::cli {

// A comma-separated list of positive integers (1..16384); `option` names it in errors.
std::vector<int64_t> parse_sizes(const std::string& list, const std::string& option);
// The 1-minute load average, printed with results (shared machines drift).
double load_average();

int bench_mixers(const po::variables_map& vm);
int bench_data(const po::variables_map& vm);

}  // namespace tri::cli
