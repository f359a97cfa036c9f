#include "framework/system/stop_signals.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

namespace tri::stop_signals {

namespace {

sigset_t stop_set() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

// Everything the receiver shares with the threads that compute or write files.
struct State {
  std::mutex mutex;
  std::condition_variable requested;
  Policy policy = Policy::end_now;
  Request request;
  std::set<std::string> temporaries;
  bool receiving = false;
  int event_fd = -1;
};
State& state() {
  static State* s = new State;  // never destroyed: the receiver outlives static destructors
  return *s;
}
std::atomic<int> g_signal{0};
std::atomic<const char*> g_activity{"starting"};
std::atomic<int64_t> g_step{-1};

// Removes the temporary files, then lets `sig` end the process as its default action does (exit
// status "killed by sig"; the kernel builds no frame for a default action). Called with the
// mutex held, so no commit_temporary can rename a file half-way through.
[[noreturn]] void end_process(State& s, int sig) {
  for (const std::string& t : s.temporaries) ::unlink(t.c_str());
  std::signal(sig, SIG_DFL);
  ::raise(sig);  // pending on this thread, which blocks it
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);  // delivered here: the process ends
  std::_Exit(128 + sig);
}

void receive() {
  pthread_setname_np(pthread_self(), "signals");  // how a test finds it in /proc
  State& s = state();
  const sigset_t set = stop_set();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    std::unique_lock lock(s.mutex);
    if (++s.request.count == 1) {
      s.request.signal = sig;
      s.request.activity = g_activity.load();
      s.request.step = g_step.load();
      g_signal = sig;
    }
    if (s.policy == Policy::end_now || (s.policy == Policy::finish_then_end_now && s.request.count > 1))
      end_process(s, sig);
    const uint64_t one = 1;
    if (s.event_fd >= 0 && ::write(s.event_fd, &one, sizeof one) < 0) {}  // a full counter is still readable
    s.requested.notify_all();
  }
}

}  // namespace

bool block_in_this_thread() {
  const bool already = blocked_in_this_thread();
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return already;
}

bool blocked_in_this_thread() {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, SIGINT) == 1 && sigismember(&now, SIGTERM) == 1;
}

void unblock_in_child() {
  const sigset_t set = stop_set();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

sigset_t mask_for_other_programs() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  sigdelset(&mask, SIGINT);
  sigdelset(&mask, SIGTERM);
  return mask;
}

PolicyScope::PolicyScope(Policy p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  previous_ = s.policy;
  s.policy = p;
  s.request = {};
  g_signal = 0;
  if (!s.receiving && blocked_in_this_thread()) {
    s.event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    // Whatever a signal's disposition was on entry (a shell's background job ignores SIGINT),
    // the receiver decides; end_process restores the default action before it raises one.
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    std::thread(receive).detach();
    s.receiving = true;
  }
  if (s.event_fd >= 0) drain_event();
}

PolicyScope::~PolicyScope() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.policy = previous_;
}

Request request() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.request;
}

int requested_signal() { return g_signal.load(); }

int event_fd() { return state().event_fd; }

void drain_event() {
  uint64_t n;
  while (state().event_fd >= 0 && ::read(state().event_fd, &n, sizeof n) == sizeof n) {}
}

void wait_for_request() {
  State& s = state();
  std::unique_lock lock(s.mutex);
  s.requested.wait(lock, [&] { return s.request.count > 0; });
}

void set_activity(const char* what, int64_t step) {
  g_step.store(step, std::memory_order_relaxed);
  g_activity.store(what, std::memory_order_relaxed);
}

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

int create_temporary(const std::string& tmp) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  s.temporaries.insert(tmp);
  return 0;
}

int commit_temporary(const std::string& tmp, const std::string& path) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return errno;
  s.temporaries.erase(tmp);
  return 0;
}

void remove_temporary(const std::string& tmp) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  ::unlink(tmp.c_str());
  s.temporaries.erase(tmp);
}

}  // namespace tri::stop_signals
