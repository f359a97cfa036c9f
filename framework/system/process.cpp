#include "framework/system/process.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "framework/base/error.hpp"
#include "framework/system/stop_signals.hpp"

namespace tri::process {

bool Exit::exited() const { return !timed_out && WIFEXITED(status); }
bool Exit::ok() const { return exited() && WEXITSTATUS(status) == 0; }
int Exit::code() const { return exited() ? WEXITSTATUS(status) : -1; }
int Exit::signal() const { return !timed_out && WIFSIGNALED(status) ? WTERMSIG(status) : 0; }

std::string Exit::text() const {
  if (timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "did not finish in %g s", timeout_s);
    return buf;
  }
  if (exited()) return "exit code " + std::to_string(code());
  return "signal " + std::to_string(signal());
}

Child launch(const Launch& l) {
  // Everything the child needs is built before the fork: after it, no allocation.
  const std::string program = l.program.empty() ? "/proc/self/exe" : l.program;
  std::vector<char*> argv;
  for (const std::string& a : l.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string failed = "trilemma: cannot start " + program + "\n";
  int pipe_fd[2] = {-1, -1};
  if (l.capture_stdout && pipe(pipe_fd) != 0) throw Error(std::string("pipe failed: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    if (l.own_group) setpgid(0, 0);
    if (l.shell_signals) stop_signals::unblock_in_child();
    if (!l.dir.empty() && chdir(l.dir.c_str()) != 0) _exit(126);
    if (!l.output.empty()) {
      const int fd = open(l.output.c_str(), O_WRONLY | O_CREAT | (l.append ? O_APPEND : O_TRUNC), 0644);
      if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    }
    if (l.capture_stdout) {
      dup2(pipe_fd[1], 1);
      close(pipe_fd[0]);
      close(pipe_fd[1]);
    }
    execv(program.c_str(), argv.data());
    [[maybe_unused]] const ssize_t n = write(2, failed.data(), failed.size());
    _exit(127);
  }
  Child c;
  c.pid = pid;
  if (l.capture_stdout) {
    close(pipe_fd[1]);
    c.stdout_fd = pipe_fd[0];
  }
  return c;
}

Exit wait_for(pid_t pid, double timeout_s) {
  Exit e;
  e.timeout_s = timeout_s;
  if (timeout_s <= 0) {
    while (waitpid(pid, &e.status, 0) < 0 && errno == EINTR) {
    }
    return e;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (waitpid(pid, &e.status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &e.status, 0);
      e.timed_out = true;
      return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return e;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, size_t(n));
  close(fd);
  return out;
}

Exit run_forked(const std::function<int()>& work, double timeout_s) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) _exit(work());
  return wait_for(pid, timeout_s);
}

std::string find_program(const std::string& name) {
  auto executable = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && executable(dir + "/" + name)) return dir + "/" + name;
  return "";
}

}  // namespace tri::process
