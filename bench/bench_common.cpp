#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "bench/bench.hpp"
#include "framework/config/options.hpp"

namespace tri::bench {

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
  return measure_steps_interleaved({step}, repeats).front();
}

std::vector<StepCost> measure_steps_interleaved(const std::vector<std::function<void()>>& steps, int repeats) {
  for (const auto& step : steps) step();
  std::vector<std::vector<double>> ms(steps.size());
  std::vector<int64_t> peak(steps.size(), 0);
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < steps.size(); ++i) {
      const int64_t base = memory_live_bytes();
      memory_reset_peak();
      const auto t0 = std::chrono::steady_clock::now();
      steps[i]();
      ms[i].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      peak[i] = std::max(peak[i], memory_peak_bytes() - base);
    }
  std::vector<StepCost> costs;
  for (size_t i = 0; i < steps.size(); ++i) costs.push_back({median(ms[i]), peak[i]});
  return costs;
}

}  // namespace tri::bench
