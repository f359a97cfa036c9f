// A sweep: every run of a grid (sweep/grid.hpp), each an ordinary
// `trilemma train` process with its folder DIR/runs/<id>/, --jobs at a time, and the results
// table DIR/results.{jsonl,csv} rewritten as runs end (sweep/results.hpp).
//
// Re-running skips finished runs and resumes interrupted ones from their last.h5; a run that
// fails is recorded with its one-line error and the sweep goes on. --shard i/n takes runs
// i, i+n, i+2n, ... (1-based), so n machines (a Slurm job array) share one grid; their run
// folders merge into one results table (--results-only rebuilds it from what is on disk).
#include "sweep/runner.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "framework/io/atomic_file.hpp"
#include "framework/io/folder_lock.hpp"
#include "framework/system/process.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/system/stop_signals.hpp"
#include "sweep/results.hpp"

namespace tri::sweep {

using namespace tri::train;

namespace fs = std::filesystem;

namespace {

// The last "trilemma: ..." line of a run's log: its one-line error.
std::string error_line(const std::string& log, int status) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.rfind("trilemma: ", 0) == 0) last = line.substr(10);
  if (!last.empty()) return last;
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit code " + std::to_string(WEXITSTATUS(status));
}

// A process-exit notification to poll on (Linux 5.3+), or -1: the sweep then polls on a timer.
int open_pidfd(pid_t pid) { return int(syscall(SYS_pidfd_open, pid, 0)); }

struct Job {
  const SweepRun* run;
  std::chrono::steady_clock::time_point started;
  int pidfd;
};

class SweepRunner {
 public:
  SweepRunner(const Grid& grid, std::string dir, int64_t jobs, int64_t threads)
      : grid_(grid), dir_(std::move(dir)), jobs_(jobs), threads_(threads) {}

  // Runs `todo` in order; the exit code (0, or 128 + a stop signal). SIGINT and SIGTERM come as
  // requests (stop_signals' requests_only): the first is forwarded to each running run, which
  // checkpoints and stops; a second is forwarded too, and ends them at once.
  int run(const std::vector<const SweepRun*>& todo) {
    size_t next = 0;
    while (next < todo.size() || !running_.empty()) {
      while (stop_signals::requested_signal() == 0 && next < todo.size() && int64_t(running_.size()) < jobs_)
        start(*todo[next++]);
      if (running_.empty()) break;
      forward_stops();
      if (!reap_one()) wait_for_event();
    }
    const int sig = stop_signals::requested_signal();
    return sig != 0 ? 128 + sig : 0;
  }

  int failed() const { return failed_; }

 private:
  const Grid& grid_;
  std::string dir_;
  int64_t jobs_, threads_;
  std::map<pid_t, Job> running_;
  int forwarded_ = 0;  // stop signals forwarded to the runs
  int failed_ = 0, finished_ = 0;

  void start(const SweepRun& r) {
    const std::string folder = run_folder(dir_, r.id);
    std::vector<std::string> args = {"trilemma", "train"};
    std::error_code ec;
    if (fs::exists(folder + "/last.h5")) {
      args.insert(args.end(), {"--resume", folder});
    } else {
      fs::remove_all(folder, ec);  // started but never checkpointed: nothing to keep
      RunConfig c = r.config;
      c.run.out = folder;
      c.run.run_name = r.id;
      TextMap text;
      write_text(c, text);
      const std::string config = dir_ + "/configs/" + r.id + ".ini";
      write_text_atomically(config, config_file_text(text));
      args.insert(args.end(), {"--config", config});
    }
    args.insert(args.end(), {"--threads", std::to_string(threads_), "--progress", "none"});
    const std::string log = log_path(dir_, r.id);
    std::ofstream(log, std::ios::app) << "== " << joined(args, " ") << "\n";
    std::printf("start  %s%s\n", r.id.c_str(), args[2] == "--resume" ? " (resumed from last.h5)" : "");
    // The sweep alone forwards stop signals to each run. The child keeps SIGINT and SIGTERM
    // blocked into trilemma's main, so one that comes early waits for its receiver.
    process::Launch l;
    l.argv = args;
    l.output = log;
    l.append = true;
    l.own_group = true;
    const pid_t pid = process::launch(l).pid;
    running_[pid] = {&r, std::chrono::steady_clock::now(), open_pidfd(pid)};
  }

  void finish(pid_t pid, int status) {
    auto it = running_.find(pid);
    if (it == running_.end()) return;
    const SweepRun& r = *it->second.run;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.started).count();
    if (it->second.pidfd >= 0) close(it->second.pidfd);
    running_.erase(it);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    // A run the sweep stopped: it exits with 128 + the signal, or, ended at once by a second
    // signal (or by the first, before its training began), dies of it.
    const bool stopped = forwarded_ > 0 && ((WIFEXITED(status) && WEXITSTATUS(status) > 128) ||
                                            (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM));
    std::error_code ec;
    std::string outcome;
    if (ok) {
      fs::remove(error_path(dir_, r.id), ec);
      ++finished_;
      const ResultsRow row = result_row(r, dir_, grid_);
      outcome = row.status;
      if (row.final_eval && row.final_eval->token_acc)
        outcome += ", eval token_acc " + number_text(*row.final_eval->token_acc);
    } else if (stopped) {
      outcome = "interrupted (resumes on the next sweep)";
    } else {
      ++failed_;
      const std::string error = error_line(log_path(dir_, r.id), status);
      write_text_atomically(error_path(dir_, r.id), error + "\n");
      outcome = "FAILED: " + error;
    }
    std::printf("done   %s: %s (%.0f s)\n", r.id.c_str(), outcome.c_str(), sec);
    std::fflush(stdout);
    write_results(dir_, grid_);
  }

  // Each stop signal the sweep received, forwarded once to every running run (at most two).
  void forward_stops() {
    const int received = std::min(stop_signals::request().count, 2);
    for (; forwarded_ < received; ++forwarded_) {
      std::printf(forwarded_ == 0 ? "stopping: each running run checkpoints and stops; the next sweep resumes them\n"
                                  : "stopping at once: each running run ends now, its last checkpoint as it was\n");
      std::fflush(stdout);
      for (const auto& [pid, job] : running_) kill(pid, SIGTERM);
    }
  }

  // Records one run that has ended, if any has.
  bool reap_one() {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR && errno != ECHILD) throw Error(std::string("waitpid failed: ") + std::strerror(errno));
    if (pid <= 0) return false;
    finish(pid, status);
    return true;
  }

  // Sleeps until a run ends or a stop signal comes.
  void wait_for_event() {
    std::vector<pollfd> fds;
    if (stop_signals::event_fd() >= 0) fds.push_back({stop_signals::event_fd(), POLLIN, 0});
    bool every_run = true;
    for (const auto& [pid, job] : running_) {
      if (job.pidfd >= 0) fds.push_back({job.pidfd, POLLIN, 0});
      every_run &= job.pidfd >= 0;
    }
    poll(fds.data(), fds.size(), every_run ? 1000 : 20);
    stop_signals::drain_event();
  }
};

}  // namespace

int run_sweep(const SweepRequest& req) {
  const std::string& grid_path = req.grid_path;
  const std::string& dir = req.dir;
  const Shard& shard = req.shard;
  const int64_t jobs = req.jobs;
  const Grid grid = as_usage_error([&] { return read_grid(grid_path, req.sets); });

  std::vector<const SweepRun*> mine, todo;
  for (size_t i = 0; i < grid.runs.size(); ++i)
    if (shard.takes(i)) mine.push_back(&grid.runs[i]);
  std::map<std::string, int> by_status;
  for (const SweepRun* r : mine) {
    const std::string status = run_status(dir, r->id);
    ++by_status[status];
    if (!is_done(status)) todo.push_back(r);
  }
  std::string counts;
  for (const auto& [status, n] : by_status) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  std::printf("sweep %s: %zu runs in %zu section(s)%s; shard %lld/%lld: %zu runs (%s)\n", grid_path.c_str(),
              grid.runs.size(), grid.sections.size(),
              grid.duplicates ? (", " + std::to_string(grid.duplicates) + " duplicate entries merged").c_str() : "",
              (long long)shard.index, (long long)shard.count, mine.size(), counts.c_str());
  if (req.dry_run) {
    for (const SweepRun* r : mine)
      std::printf("  %-36s %-12s %s\n", r->id.c_str(), run_status(dir, r->id).c_str(), r->section.c_str());
    return 0;
  }
  // A grid with bf16 runs on a CPU without bf16: refused before any run starts.
  for (const SweepRun* r : todo) set_gemm_precision(precision_of(r->config.run.precision));
  set_gemm_precision(Precision::fp32);
  for (const char* sub : {"runs", "logs", "configs"}) {
    std::error_code ec;
    fs::create_directories(dir + "/" + sub, ec);
    if (ec) throw Error("cannot create " + dir + "/" + sub + ": " + ec.message());
  }
  // Two sweeps of the same shard on one folder would start the same runs twice; other shards
  // of the grid may share the folder (each run folder has its own lock).
  const std::string shard_name = std::to_string(shard.index) + "-of-" + std::to_string(shard.count);
  const FolderLock lock(dir, ".lock.shard-" + shard_name, "sweep folder (shard " + std::to_string(shard.index) + "/" +
                                                             std::to_string(shard.count) + ")");
  std::string command = "trilemma sweep " + grid_path + " --out " + dir;
  for (const auto& [key, value] : req.sets) command += " --set " + key + "=" + value;
  if (shard.count > 1) command += " --shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count);
  Json meta = {{"grid", grid_path},
               {"command", command},
               {"runs", grid.runs.size()},
               {"sections", grid.sections},
               {"varying", grid.varying}};
  write_text_atomically(dir + "/sweep.json", meta.dump(2) + "\n");
  if (req.results_only) {
    write_results(dir, grid);
    std::printf("results: %s/results.jsonl, %s/results.csv\n", dir.c_str(), dir.c_str());
    return 0;
  }
  const int64_t threads = std::max<int64_t>(1, req.threads / jobs);
  std::printf("%s\nrunning %zu runs, %lld at a time with %lld thread(s) each\n", runtime_summary().c_str(),
              todo.size(), (long long)jobs, (long long)threads);
  SweepRunner runner(grid, dir, jobs, threads);
  const int code = runner.run(todo);
  write_results(dir, grid);
  std::printf("results: %s/results.jsonl, %s/results.csv%s\n", dir.c_str(), dir.c_str(),
              runner.failed() ? (" (" + std::to_string(runner.failed()) + " failed: see the error column)").c_str() : "");
  return code != 0 ? code : runner.failed() ? 1 : 0;
}

}  // namespace tri::sweep
