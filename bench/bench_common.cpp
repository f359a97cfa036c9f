#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "bench/bench.hpp"
#include "framework/options.hpp"

namespace tri::cli {

std::vector<int64_t> bench_sizes(const po::variables_map& vm, const std::string& option,
                                 const std::string& fallback) {
  const std::string list = vm.count(option) ? vm[option].as<std::string>() : fallback;
  return as_usage_error([&] { return parse_int_list(option, list, {1, 16384}); });
}

int bench_repeats(const po::variables_map& vm, int fallback) {
  return vm.count("repeats") ? vm["repeats"].as<int>() : fallback;
}

double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

StepCost measure_step(const std::function<void()>& step, int repeats) {
  step();
  std::vector<double> ms;
  int64_t peak = 0;
  for (int r = 0; r < repeats; ++r) {
    const int64_t base = memory_live_bytes();
    memory_reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    peak = std::max(peak, memory_peak_bytes() - base);
  }
  return {median(ms), peak};
}

}  // namespace tri::cli
