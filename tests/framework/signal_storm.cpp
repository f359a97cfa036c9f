// signal_storm contained|handler SECONDS THREADS: dnnl_sgemm in a loop while test_signals sends
// SIGINT and SIGTERM at it as fast as it can, the pattern of oneDNN issue #4845.
//
//   contained  trilemma's signal set-up: start_process (the signals blocked in every thread from
//              its birth) and a receiver under the sweep's requests-only policy, so no signal
//              ends the process;
//   handler    the control: an ordinary handler for both, as the trainer had before. A handler
//              that finds itself on a stack outside its thread's (oneDNN's kernel pointed rsp into
//              the heap) says so and exits with kForeignStack at once.
//
// Prints "iterations N mismatches M received R" and exits 0 when every product had the bits of
// the product computed before the storm; 3 when one did not.
#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "framework/system/process_start.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/system/stop_signals.hpp"

namespace {

constexpr int kForeignStack = 42;

thread_local const char* t_stack_lo = nullptr;
thread_local const char* t_stack_hi = nullptr;
std::atomic<long> g_handled{0};

void note_this_threads_stack() {
  pthread_attr_t a;
  pthread_getattr_np(pthread_self(), &a);
  void* lo = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&a, &lo, &size);
  t_stack_lo = static_cast<const char*>(lo);
  t_stack_hi = t_stack_lo + size;
  pthread_attr_destroy(&a);
}

// On a stack in the heap, a sanitizer's instrumentation of this frame would report the heap:
// none here, and raw system calls rather than their intercepted wrappers.
extern "C" __attribute__((no_sanitize("address", "undefined"))) void counting_handler(int) {
  const char probe = 0;
  g_handled.fetch_add(1, std::memory_order_relaxed);
  if (t_stack_lo && (&probe < t_stack_lo || &probe >= t_stack_hi)) {
    static const char msg[] = "signal_storm: a handler ran on a stack outside its thread's (in the heap)\n";
    syscall(SYS_write, 2, msg, sizeof msg - 1);
    syscall(SYS_exit_group, kForeignStack);
  }
}

// Shapes trilemma's GEMMs take (rows of a batch times d, d times a projection); the first has
// a K large enough that oneDNN's AVX2 kernel also moves rsp into its workspace.
struct Shape {
  int m, n, k;
};
constexpr Shape kShapes[] = {{64, 128, 512}, {1024, 128, 128}, {128, 512, 128}};

struct Problem {
  Shape s;
  std::vector<float> a, b, c, expected;
  explicit Problem(Shape shape) : s(shape), a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 17) - 8) * 0.125f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 13) - 6) * 0.25f;
    run();
    expected = c;
  }
  void run() { dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c.data(), s.n); }
  bool same_bits() const { return std::memcmp(c.data(), expected.data(), c.size() * sizeof(float)) == 0; }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 4 ? argv[1] : "";
  if (mode != "contained" && mode != "handler") {
    std::fprintf(stderr, "usage: signal_storm contained|handler SECONDS THREADS\n");
    return 2;
  }
  if (mode == "contained") tri::start_process(argv);
  const double seconds = std::atof(argv[2]);
  tri::set_threads(std::atoi(argv[3]));
  const tri::stop_signals::PolicyScope requests(tri::stop_signals::Policy::requests_only);
  if (mode == "handler") {
    struct sigaction sa = {};
    sa.sa_handler = counting_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  }
#pragma omp parallel
  note_this_threads_stack();
  std::vector<Problem> problems(std::begin(kShapes), std::end(kShapes));
  std::printf("ready\n");
  std::fflush(stdout);

  long iterations = 0, mismatches = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (Problem& p : problems) {
      p.run();
      mismatches += !p.same_bits();
      std::vector<char> churn(size_t(4096 + iterations % 8192), 1);  // malloc and free, as a step does
    }
    ++iterations;
  }
  const long received = mode == "contained" ? tri::stop_signals::request().count : g_handled.load();
  std::printf("iterations %ld mismatches %ld received %ld\n", iterations, mismatches, received);
  std::fflush(stdout);
  // Ends here, under the requests-only policy: the storm goes on until the process is gone.
  std::_Exit(mismatches == 0 ? 0 : 3);
}
