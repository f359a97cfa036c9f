// SIGINT and SIGTERM where they land in real use: mid-step, at random moments, twice, and at a
// sweep; and the mechanism that makes that safe (framework/system/stop_signals.hpp): no handler runs on
// a thread that could be inside oneDNN's GEMM, whose JIT kernels point rsp into the heap.
//
// TRILEMMA_SIGNAL_COUNT sets how many random-moment signals the run test sends (default 60).
#include <dnnl.h>
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "tests/proc_status.hpp"
#include "tests/run_files.hpp"

namespace {

using namespace trilemma_test;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Waits for `pid`; its raw wait status.
int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return status;
}

// Whether `pid` has not ended yet (it stays waitable).
bool running(pid_t pid) {
  siginfo_t info = {};
  return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

// A process that a stop signal ended before it could block it: between execve and the first
// initialiser of the executable (the dynamic loader's work), the default action still applies.
// Such a process has printed nothing and written nothing.
bool ended_before_it_began(int status, const std::string& output) {
  return WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM) && output.empty();
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// ---- the mechanism: dnnl_sgemm under a signal storm --------------------------------------------

struct StormResult {
  int status;
  std::string out;
  long signals_sent;
};

// Runs signal_storm MODE for `seconds` and sends it SIGINT and SIGTERM in turn, every 100 us,
// from the moment it is ready until it ends.
StormResult storm(const std::string& mode, double seconds, int threads) {
  const fs::path log = scratch("storm-" + mode + "-" + std::to_string(threads) + ".log");
  fs::remove(log);
  const std::string secs = std::to_string(seconds), nthreads = std::to_string(threads);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(SIGNAL_STORM_BINARY, SIGNAL_STORM_BINARY, mode.c_str(), secs.c_str(), nthreads.c_str(), (char*)nullptr);
    _exit(127);
  }
  const auto start = Clock::now();
  while (read_text(log).find("ready") == std::string::npos && seconds_since(start) < 60) sleep_seconds(0.001);
  long sent = 0;
  int status = 0;
  const auto storm_start = Clock::now();
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (seconds_since(storm_start) > seconds + 60) {  // hung (a corrupt heap can deadlock malloc)
      kill(pid, SIGKILL);
      status = wait_status(pid);
      break;
    }
    kill(pid, sent % 2 ? SIGTERM : SIGINT);
    ++sent;
    sleep_seconds(100e-6);
  }
  return {status, read_text(log), sent};
}

// Whether oneDNN dispatches its AVX2 or AVX-512 GEMM kernels here (ONEDNN_MAX_CPU_ISA counts):
// those move rsp into the heap (measured: 1.x-2.6.3 AVX2 and AVX-512; SSE4.1 and AVX do not).
bool dnnl_gemm_moves_rsp() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (unsigned(isa) & unsigned(dnnl_cpu_isa_avx2)) == unsigned(dnnl_cpu_isa_avx2);
}

}  // namespace

TEST_CASE("signals: dnnl_sgemm under a signal storm keeps its bits in trilemma's set-up; a plain handler does not") {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    const StormResult r = storm("contained", 2.0, threads);
    INFO(r.out);
    CHECK(describe(r.status) == "exit 0");  // not a crash, and every product had its bits
    CHECK(r.out.find("mismatches 0 ") != std::string::npos);
    const size_t at = r.out.find("received ");
    REQUIRE(at != std::string::npos);
    // Signals sent while one is pending merge into it; hundreds still reach the receiver.
    CHECK(std::stol(r.out.substr(at + 9)) >= 100);
    MESSAGE("contained, " << threads << " thread(s): " << r.signals_sent << " signals sent, " << r.out.substr(r.out.rfind("iterations")));
  }
  // The control: the same storm with an ordinary handler, as trilemma had. Where oneDNN's
  // kernels move rsp, a handler soon runs on the heap (the helper exits 42 at once) or the
  // process crashes or computes wrong bits; any of these is the failure the set-up prevents.
  const StormResult control = storm("handler", 5.0, 1);
  MESSAGE("control (plain handler): " << describe(control.status) << " after " << control.signals_sent << " signals");
  if (dnnl_gemm_moves_rsp()) {
    CHECK(describe(control.status) != "exit 0");
  } else {
    MESSAGE("oneDNN runs below AVX2 here, whose GEMM kernels keep rsp on the stack: the control cannot fail on this CPU");
  }
}

TEST_CASE("signals: every thread of a run blocks SIGINT and SIGTERM but the receiver, and none has a handler") {
  const fs::path dir = scratch("threads"), log = scratch("threads.log");
  const pid_t pid = spawn(words("train --model attention --task mqar --vocab 64 --seq-len 32 --num-kv-pairs 4 "
                                "--d-model 32 --batch 8 --steps 100000 --progress none --threads 2 --out " +
                                dir.string()),
                          log);
  const auto start = Clock::now();
  while (read_text(log).find("training attention") == std::string::npos && seconds_since(start) < 60) sleep_seconds(0.01);
  sleep_seconds(0.3);  // into the steps: the OpenMP threads exist
  const StopSignalSetup setup = stop_signal_setup(pid);
  CHECK(!setup.handler);
  CHECK(setup.receivers == 1);
  CHECK(setup.unblocking == 0);
  CHECK(setup.blocking >= 3);  // main, OpenMP's second thread, OpenBLAS's pool
  kill(pid, SIGTERM);
  CHECK(describe(wait_status(pid)) == "exit 143");
}

// ---- a run: signals at random moments ----------------------------------------------------------

namespace {

// Shaped so that a random moment falls in every part of a step: a wide vocabulary over one row of
// 16 tokens gives the optimizer (AdamW and clipping) about a third of a step; evaluation every 3
// steps and a checkpoint every 25 take a fifth of the time each. Measured over 60 signals:
// forward 13, backward 11, optimizer step 5, evaluation 17, checkpoint write 12, logging 2.
const std::string kRandomRun =
    " --task mqar --vocab 4096 --seq-len 16 --num-kv-pairs 2 --d-model 64 --n-layers 2 --batch 1 --lr 3e-3"
    " --warmup 5 --eval-every 3 --eval-batches 6 --checkpoint-every 25 --log-every 5 --progress none";

std::vector<std::string> train_args(const std::string& model, int threads, int64_t steps, const fs::path& out,
                                    const std::string& options = kRandomRun) {
  return words("train --model " + model + options + " --threads " + std::to_string(threads) + " --steps " +
               std::to_string(steps) + " --out " + out.string());
}

// The text after `key` up to the end of its line, "" when absent.
std::string after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  return text.substr(from, text.find('\n', from) - from);
}

// summary.json's "params_fnv1a": the hash of the parameters' bits the run ended with.
std::string summary_params(const fs::path& dir) {
  const std::string summary = read_text(dir / "summary.json");
  const std::string key = "\"params_fnv1a\": \"";
  const size_t at = summary.find(key);
  return at == std::string::npos ? "" : summary.substr(at + key.size(), 16);
}

struct Timed {
  int status;
  double seconds;
  std::string log;
};

Timed run_timed(const std::vector<std::string>& args, const fs::path& log) {
  const auto start = Clock::now();
  const int status = wait_status(spawn(args, log));
  return {status, seconds_since(start), read_text(log)};
}

// Steps for a run that trains about `target` seconds after its start-up, on this build and
// machine (a sanitizer build is many times slower; a loaded machine starts slowly): the time per
// step from runs of 20 and 60 steps.
int64_t calibrated_steps(const std::string& model, int threads, const std::string& options, double target) {
  double seconds[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path dir = scratch("calibrate-" + model + std::to_string(threads) + "-" + std::to_string(i));
    const Timed t = run_timed(train_args(model, threads, 20 + 40 * i, dir, options), scratch("calibrate.log"));
    REQUIRE(describe(t.status) == "exit 0");
    seconds[i] = t.seconds;
    fs::remove_all(dir);
  }
  const double per_step = std::max(1e-4, (seconds[1] - seconds[0]) / 40);
  return std::clamp<int64_t>(int64_t(target / per_step) + 20, 20, 5000);
}

const std::array<const char*, 3> kFamilies = {"attention", "linear", "mamba"};

struct Reference {
  int64_t steps;
  std::string params;
  int rows;             // of its metrics.jsonl
  double step_seconds;  // its training time per step
};

// Metrics rows the run folders below `dir` have written so far (the rows of a run are appended
// and flushed one by one as it trains).
int metrics_rows(const fs::path& dir) {
  int n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "metrics.jsonl") n += count_lines(read_text(e.path()));
  return n;
}

// Waits until the runs below `dir` have written `rows` metrics rows (or 120 s have passed): a
// moment chosen by how far training has got, not by the clock, whose pace the machine's other
// work changes.
void wait_for_rows(const fs::path& dir, int rows) {
  const auto start = Clock::now();
  while (metrics_rows(dir) < rows && seconds_since(start) < 120) sleep_seconds(0.0005);
}

}  // namespace

TEST_CASE("signals: a run signalled at random moments exits 130 or 143, and resumes to the uninterrupted bits") {
  const char* count = std::getenv("TRILEMMA_SIGNAL_COUNT");
  const int target = count ? std::atoi(count) : 60;
  const std::set<std::string> phases = {"forward", "backward", "optimizer step", "evaluation", "checkpoint write"};
  std::map<std::pair<std::string, int>, Reference> references;
  for (const char* model : kFamilies)
    for (int threads : {1, 2}) {
      const int64_t steps = calibrated_steps(model, threads, kRandomRun, 1.0);
      const fs::path dir = scratch(std::string("reference-") + model + std::to_string(threads));
      const Timed t = run_timed(train_args(model, threads, steps, dir), scratch("reference.log"));
      REQUIRE(describe(t.status) == "exit 0");
      const double seconds = std::stod(after(read_text(dir / "summary.json"), "\"elapsed_s\": "));
      references[{model, threads}] = {steps, summary_params(dir), metrics_rows(dir), seconds / double(steps)};
    }

  std::mt19937_64 rng(20);
  std::map<std::string, int> landed;  // signals per activity they arrived during
  int sent = 0;
  auto covered = [&] {
    for (const std::string& p : phases)
      if (!landed.count(p)) return false;
    return true;
  };
  while ((sent < target || !covered()) && sent < std::max(200, 3 * target)) {
    const std::string model = kFamilies[sent % 3];
    const int threads = 1 + (sent / 3) % 2, sig = (sent / 6) % 2 ? SIGTERM : SIGINT;
    const Reference& ref = references[{model, threads}];
    CAPTURE(model);
    CAPTURE(threads);
    CAPTURE(sig);
    const fs::path dir = scratch("random-" + std::to_string(sent)), log = scratch("random.log");
    const pid_t pid = spawn(train_args(model, threads, ref.steps, dir), log);
    // A random point of the run: after a random share of its metrics rows (at least one: before
    // its first initialiser a process meets the default action), a random part of the next two steps.
    const int first = std::max(1, ref.rows / 20);
    wait_for_rows(dir, std::uniform_int_distribution<int>(first, std::max(first, ref.rows * 9 / 10))(rng));
    sleep_seconds(std::uniform_real_distribution<double>(0, 2 * ref.step_seconds)(rng));
    kill(pid, sig);
    const int status = wait_status(pid);
    ++sent;
    const std::string out = read_text(log);
    CAPTURE(out);
    CHECK(describe(status) == "exit " + std::to_string(128 + sig));
    const std::string during = after(out, "which arrived during ");
    ++landed[during.substr(0, during.find(" (step"))];
    CHECK(no_temporary_files(dir));
    const Run resumed = run("train --resume '" + dir.string() + "' --progress none");
    REQUIRE(resumed.code == 0);  // it loads last.h5 (or finds the run complete: a signal after its last step)
    CHECK(summary_params(dir) == ref.params);
    fs::remove_all(dir);
  }
  std::string tally;
  for (const auto& [activity, n] : landed) tally += "  " + activity + ": " + std::to_string(n) + "\n";
  MESSAGE(sent << " signals; where they landed:\n" << tally);
  CHECK(sent >= target);
  for (const std::string& p : phases) {
    CAPTURE(p);
    CHECK(landed.count(p) == 1);
  }
}

TEST_CASE("signals: a second signal during the checkpoint write ends the run at once, the last checkpoint whole") {
  // ~30 MB of parameters and Adam moments: writing them takes tens of ms, long enough for the
  // second signal to land while the temporary file exists.
  const std::string big = " --task mqar --vocab 8192 --seq-len 32 --num-kv-pairs 4 --d-model 128 --n-layers 2 --batch 4"
                          " --eval-every 1000 --checkpoint-every 5 --progress none";
  const int64_t steps = 60;
  const Timed whole = run_timed(train_args("attention", 2, steps, scratch("second-whole"), big), scratch("second.log"));
  REQUIRE(describe(whole.status) == "exit 0");
  const std::string reference = summary_params(scratch("second-whole"));
  std::mt19937_64 rng(2);
  int hits = 0, attempts = 0;
  for (; hits < 3 && attempts < 12; ++attempts) {
    const fs::path dir = scratch("second-" + std::to_string(attempts)), log = scratch("second.log");
    const pid_t pid = spawn(train_args("attention", 2, steps, dir, big), log);
    const std::string tmp = (dir / ("last.h5.tmp." + std::to_string(pid))).string();
    const auto start = Clock::now();
    while (!fs::exists(dir / "last.h5") && seconds_since(start) < 60) sleep_seconds(0.001);
    sleep_seconds(std::uniform_real_distribution<double>(0, 0.5)(rng));
    kill(pid, SIGTERM);
    bool writing = false;  // the interruption's checkpoint (or a scheduled one) is being written
    while (!writing && running(pid) && seconds_since(start) < 60)
      if (!(writing = fs::exists(tmp))) sleep_seconds(50e-6);
    if (writing) kill(pid, SIGINT);
    const int status = wait_status(pid);
    CAPTURE(read_text(log));
    if (!writing || !WIFSIGNALED(status)) {  // the write ended before the second signal came
      CHECK(describe(status) == "exit 143");
      continue;
    }
    ++hits;
    // At once: the process did not finish the write. (sigwait takes the lower-numbered of two
    // pending signals first, so when both were pending SIGTERM is the second.)
    CHECK((WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM));
    CHECK(no_temporary_files(dir));
    const Run inspect = run("inspect '" + (dir / "last.h5").string() + "'");
    CHECK(inspect.code == 0);
    const Run resumed = run("train --resume '" + dir.string() + "' --progress none");
    REQUIRE(resumed.code == 0);
    CHECK(summary_params(dir) == reference);
  }
  MESSAGE(hits << " second signals landed mid-write in " << attempts << " attempts");
  CHECK(hits == 3);
}

// ---- a sweep: SIGTERM at random moments --------------------------------------------------------

TEST_CASE("signals: a sweep stopped at 20 random moments records no failure and finishes to the uninterrupted table") {
  const std::string options =
      " --task mqar --vocab 128 --seq-len 32 --num-kv-pairs 4 --d-model 32 --batch 8 --eval-every 40 --eval-batches 2";
  // Six runs of 2.5 s or more each (attention's time; Mamba's is longer), two at a time; no stop
  // lets the sweep go on for more than 0.3 s, so most of the work is left to the last sweep.
  const int64_t steps = calibrated_steps("attention", 1, options, 2.5);
  const fs::path grid = scratch("signals.grid");
  write_text(grid, "task = mqar\nvocab = 128\nseq-len = 32\nnum-kv-pairs = 4\nd-model = 32\nbatch = 8\n"
                   "eval-every = 40\neval-batches = 2\nlog-every = 2\nsteps = " + std::to_string(steps) + "\nseed = 0, 1\n"
                   "model = attention, linear, mamba\n");
  auto sweep = [&](const fs::path& out) {
    return words("sweep " + grid.string() + " --out " + out.string() + " --jobs 2 --threads 2");
  };
  const fs::path whole = scratch("sweep-whole"), cut = scratch("sweep-cut");
  REQUIRE(describe(run_timed(sweep(whole), scratch("sweep.log")).status) == "exit 0");
  std::mt19937_64 rng(3);
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    const fs::path log = scratch("sweep-cut.log");
    // Even rounds: a moment early in the sweep (its runs starting, or not yet started); odd
    // rounds: a moment while its runs train, after they have written a few more rows.
    const int rows = metrics_rows(cut / "runs");
    const pid_t pid = spawn(sweep(cut), log);
    if (round % 2 == 1) wait_for_rows(cut / "runs", rows + std::uniform_int_distribution<int>(1, 4)(rng));
    sleep_seconds(std::uniform_real_distribution<double>(round % 2 ? 0.0 : 0.02, round % 2 ? 0.15 : 0.3)(rng));
    kill(pid, SIGTERM);
    const int status = wait_status(pid);
    CAPTURE(read_text(log));
    if (!ended_before_it_began(status, read_text(log))) CHECK(describe(status) == "exit 143");
    CHECK(read_text(cut / "results.csv").find("failed") == std::string::npos);
    for (const auto& e : fs::directory_iterator(cut / "logs")) CHECK(e.path().extension() != ".error");
  }
  const std::string before_last = read_text(cut / "results.csv");
  int finished = 0;
  for (const std::string& row : text_lines(before_last)) finished += row.find(",finished,") != std::string::npos;
  MESSAGE("after 20 stops: " << finished << " of 6 runs finished");
  const Timed last = run_timed(sweep(cut), scratch("sweep-last.log"));
  CAPTURE(last.log);
  REQUIRE(describe(last.status) == "exit 0");
  CHECK(csv_without_timing(cut / "results.csv") == csv_without_timing(whole / "results.csv"));
}
