// trilemma bench data: generation speed of each synthetic task at its defaults, in tokens per
// second on one core (make_batch is single-threaded).
#include <chrono>
#include <cstdio>

#include "data/tasks.hpp"
#include "bench/bench.hpp"

namespace tri::bench {

int bench_data(const po::variables_map& vm) {
  const int64_t B = 64;
  const double min_time = vm["min-time"].as<double>();
  std::printf("data generation, batch %lld, defaults per task, one core (load %.2f)\n", (long long)B,
              load_average());
  std::printf("%-16s %8s %14s %12s\n", "task", "seq_len", "tokens/s", "us/batch");
  for (const std::string& name : task_names()) {
    const TaskConfig c = TaskConfig::of(name);
    make_batch(c, 1, 0, B);  // warm-up
    int64_t batches = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    while (elapsed < min_time || batches < 3) {
      Batch b = make_batch(c, 1, uint64_t(batches++), B);
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double tokens = double(batches * B * c.length());
    std::printf("%-16s %8lld %14.3g %12.1f\n", name.c_str(), (long long)c.length(), tokens / elapsed,
                1e6 * elapsed / double(batches));
  }
  return 0;
}

}  // namespace tri::bench
