#include "framework/system/process_start.hpp"

#include <malloc.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "framework/system/stop_signals.hpp"

namespace tri {

namespace {

// OpenMP threads that finish a parallel region early wait for the others. Spinning (libgomp's
// default spins ~300k iterations first) holds a core that another process on a busy machine
// needs, and the thread sharing a core with that process then arrives late at every barrier;
// sleeping at once costs a wake-up per region on an idle machine. docs/BENCHMARKS.md measures
// both, idle and busy; kWaitPolicy is the better of the two there.
constexpr const char* kWaitPolicy = "passive";

// Whether OMP_WAIT_POLICY had to be set (the user's own policy, OMP_WAIT_POLICY or
// GOMP_SPINCOUNT, is left alone).
bool choose_wait_policy() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return false;
  setenv("OMP_WAIT_POLICY", kWaitPolicy, 1);
  return true;
}

// The process again. Returns only when it cannot (no /proc and no AT_EXECFN: an unusual sandbox).
void execute_again(char** argv) {
  execv("/proc/self/exe", argv);
  if (const auto* path = reinterpret_cast<const char*>(getauxval(AT_EXECFN))) execv(path, argv);
}

}  // namespace

void start_process(char** argv) {
  // libgomp reads the wait policy when it loads: setting it needs the process to begin again.
  // So do SIGINT and SIGTERM when they were not blocked before the first thread started
  // (OpenBLAS starts its threads before main; trilemma's main blocks them earlier still): they
  // stay blocked across execv, so every thread of the new image is born with them blocked.
  const bool policy_set = choose_wait_policy();
  const bool blocked_from_start = stop_signals::block_in_this_thread();
  if (policy_set || !blocked_from_start) {
    execute_again(argv);
    if (policy_set) unsetenv("OMP_WAIT_POLICY");  // run on with libgomp's default policy
  }
  // Executed through /proc/self/exe, the process would be called "exe" in ps and top.
  const char* slash = std::strrchr(argv[0], '/');
  prctl(PR_SET_NAME, slash ? slash + 1 : argv[0]);
  // Freed heap memory stays in the process: glibc returns the heap's top to the system once it
  // exceeds 128 KiB, and every batch that follows faults its pages in again, which costs more
  // than drawing the batch (bench data: 2x). Tensors have their own cache (framework/core/tensor.hpp);
  // oneDNN's GEMM buffers come from malloc, and above the mmap threshold each would be mapped
  // and faulted in afresh on every call: 32 MiB (glibc's maximum) keeps them in the heap (bench
  // train, W attention: 13758 fresh pages per step before, 433 after).
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
}

}  // namespace tri
