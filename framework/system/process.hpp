// Child processes: the one place trilemma forks, executes and waits. Runs of a sweep, the rows of
// `bench train`, gnuplot, and the checkpoint reader's disposable child all start and end here.
#pragma once
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace tri::process {

struct Launch {
  std::vector<std::string> argv;  // argv[0] as the child sees it
  std::string program;            // the file to execute; empty: this program (/proc/self/exe)
  std::string dir;                // the child's working folder; empty: ours
  std::string output;             // a file for the child's stdout and stderr; empty: ours
  bool append = false;            // append to `output` instead of truncating it
  bool capture_stdout = false;    // stdout into a pipe (Child::stdout_fd), stderr stays ours
  bool own_group = false;         // a process group of its own: our group's signals miss it
  bool shell_signals = false;     // SIGINT and SIGTERM unblocked, as a shell would start it
};

struct Child {
  pid_t pid = -1;
  int stdout_fd = -1;  // with capture_stdout
};

// How a child ended.
struct Exit {
  int status = 0;          // as waitpid reports it
  bool timed_out = false;  // killed (SIGKILL) at the deadline
  bool ok() const;         // exited with code 0
  bool exited() const;
  int code() const;        // the exit code, or -1 when it did not exit
  int signal() const;      // the signal that ended it, or 0
  std::string text() const;  // "exit code 3", "signal 11", "did not finish in 30 s"
  double timeout_s = 0;
};

// Starts the child. Between fork and exec the child makes only async-signal-safe calls; a
// program that cannot be executed exits with 127 after one line "trilemma: cannot start ..." on
// its stderr (or `output`). An Error when the fork itself fails.
Child launch(const Launch& l);

// Waits for `pid` (retrying on EINTR); with timeout_s > 0 kills it with SIGKILL at the deadline.
Exit wait_for(pid_t pid, double timeout_s = 0);

// The whole of a pipe's content, then closes it.
std::string read_all(int fd);

// Runs `work` in a forked child (no exec) and returns how the child ended: its return value is
// the exit code. For reads that may crash or hang on untrusted input, away from this process.
Exit run_forked(const std::function<int()>& work, double timeout_s);

// An executable file: a path with a slash as given, else the first match in PATH; "" if none.
std::string find_program(const std::string& name);

}  // namespace tri::process
