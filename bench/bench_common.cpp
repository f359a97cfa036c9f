#include <algorithm>
#include <cstdlib>

#include "bench/bench.hpp"
#include "framework/options.hpp"

namespace tri::cli {

std::vector<int64_t> bench_sizes(const po::variables_map& vm, const std::string& option) {
  return as_usage_error([&] { return parse_int_list(option, vm[option].as<std::string>(), {1, 16384}); });
}

double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tri::cli
