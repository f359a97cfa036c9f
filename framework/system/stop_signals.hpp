// SIGINT and SIGTERM, taken by one receiver thread that waits for them (sigwait), never by a
// signal handler.
//
// Why no handler: oneDNN's JIT f32 GEMM kernels (AVX2 and AVX-512, every version before 3.11.2;
// Debian 12 ships 2.6.3) point rsp into a heap workspace while they run. A handler that runs on
// such a thread gets its signal frame written at rsp, that is into the heap, and the process
// later aborts in free() or crashes (oneDNN issue #4845). So both signals are blocked in every
// thread from its birth, and the receiver takes them synchronously: the kernel then never builds
// a signal frame on a thread that computes.
//
// What a signal does is the running command's policy:
//   end_now             every signal ends the process at once (most commands);
//   finish_then_end_now the first is a request the command honours at its next safe point
//                       (train: after the current step, with a checkpoint); a second ends the
//                       process at once;
//   requests_only       each signal is a request (sweep: forwarded to its runs).
// Ending the process at once first removes the temporary files being written (below), so an
// atomic write leaves the old file or the new one, and nothing else.
#pragma once
#include <signal.h>

#include <cstdint>
#include <string>

namespace tri::stop_signals {

// First in main, before any thread exists. Blocks SIGINT and SIGTERM in the calling thread, so
// every thread created after it inherits the block. Returns false when they were not blocked
// already on entry: then threads that libraries started before main (OpenBLAS's pool) lack the
// block, and the caller must execute the process again (the mask survives execve).
bool block_in_this_thread();

// Whether both are blocked in the calling thread (a process that did not start through
// trilemma's main, such as a test, has no receiver and takes signals as it always did).
bool blocked_in_this_thread();

// In a forked child that executes another program (gnuplot): signals as that program expects.
// Async-signal-safe.
void unblock_in_child();
// The same for posix_spawn: the calling thread's mask without SIGINT and SIGTERM.
sigset_t mask_for_other_programs();

enum class Policy { end_now, finish_then_end_now, requests_only };

// Sets the policy while it lives and starts the receiver thread the first time (only where the
// signals are blocked); the request count starts at zero.
class PolicyScope {
 public:
  explicit PolicyScope(Policy p);
  ~PolicyScope();
  PolicyScope(const PolicyScope&) = delete;
  PolicyScope& operator=(const PolicyScope&) = delete;

 private:
  Policy previous_;
};

// The stop requests received under the current scope.
struct Request {
  int signal = 0;            // the first one's number, 0 if none came
  int count = 0;             // how many came
  std::string activity;      // what the process was doing when the first came (set_activity)
  int64_t step = -1;         // and at which step
};
Request request();
int requested_signal();      // request().signal, without a lock

// Readable (an eventfd) after each request, for a loop that polls; drain_event() clears it.
int event_fd();
void drain_event();
// Blocks until a request has come (tests that signal at a known step).
void wait_for_request();

// What the process is doing now (a string literal: "forward", "checkpoint write", ...): a
// request records it, so a run can say where the signal landed.
void set_activity(const char* what, int64_t step);

// "SIGTERM", "SIGINT", or "signal N".
std::string signal_name(int sig);

// Files being written under a temporary name. create_temporary makes the empty file (it must not
// exist) and records it; commit_temporary renames it over `path` and forgets it, as one step
// against a signal that ends the process; remove_temporary deletes and forgets it. Each returns
// 0 or the errno of the failed call.
int create_temporary(const std::string& tmp);
int commit_temporary(const std::string& tmp, const std::string& path);
void remove_temporary(const std::string& tmp);

}  // namespace tri::stop_signals
