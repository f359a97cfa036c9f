// trilemma <command> [options] (train/cli_main.cpp has the commands).
#include <malloc.h>
#include <unistd.h>

#include <cstdlib>

#include "train/cli.hpp"

namespace {

// OpenMP threads that finish a parallel region early wait for the others. Spinning (libgomp's
// default spins ~300k iterations first) holds a core that another process on a busy machine
// needs, and the thread sharing a core with that process then arrives late at every barrier;
// sleeping at once costs a wake-up per region on an idle machine. docs/BENCHMARKS.md measures
// both, idle and busy; kWaitPolicy is the better of the two there. libgomp reads
// OMP_WAIT_POLICY once, when it loads, so the process sets it and executes itself again; a
// policy the user set (OMP_WAIT_POLICY or GOMP_SPINCOUNT) is left alone.
constexpr const char* kWaitPolicy = "passive";

void choose_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("OMP_WAIT_POLICY", kWaitPolicy, 1);
  execv("/proc/self/exe", argv);
  // No /proc (an unusual sandbox): run on with libgomp's default policy.
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace

int main(int argc, char** argv) {
  choose_wait_policy(argv);
  // Freed heap memory stays in the process: glibc returns the heap's top to the system once it
  // exceeds 128 KiB, and every batch that follows faults its pages in again, which costs more
  // than drawing the batch (bench data: 2x). Tensors have their own cache (framework/tensor.hpp);
  // oneDNN's GEMM buffers come from malloc, and above the mmap threshold each would be mapped
  // and faulted in afresh on every call: 32 MiB (glibc's maximum) keeps them in the heap (bench
  // train, W attention: 13758 fresh pages per step before, 433 after).
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  return tri::cli::run_cli({argv + 1, argv + argc});
}
