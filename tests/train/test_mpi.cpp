// Data-parallel training over MPI, through mpirun on this machine: P = 2 reaches the parameters
// of P = 1 on the same global batches, deterministically; SIGTERM stops every rank after one
// step and --resume continues to the uninterrupted bits (another P continues too), also when it
// lands mid-step at a random moment, each rank taking it on its receiver thread; commands
// other than train (and info) refuse to run as ranks; a rank that dies ends the whole job with
// mpirun's message instead of a hang.
// Built only when MPI was found (tests/CMakeLists.txt).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>
#include <thread>

#include "tests/proc_status.hpp"

namespace {

using namespace trilemma_test;

// mpirun on loopback: root allowed (containers), more ranks than cores allowed, no binding
// (each rank runs one thread), no single-copy transfers (they need ptrace rights).
std::vector<std::string> launcher(int ranks) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
#ifdef __SANITIZE_ADDRESS__
  // Open MPI's plugins are unloaded at MPI_Finalize and leave allocations LeakSanitizer cannot
  // attribute ("<unknown module>"), so the ranks run without leak detection (address and UB
  // errors still abort them); the trainer's own allocations are leak-checked by test_train_cli.
  setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1", 1);
#endif
  return {TRILEMMA_MPIEXEC, "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none",
          "--mca", "btl_vader_single_copy_mechanism", "none"};
}
std::string mpirun(int ranks) {
  std::string s;
  for (const std::string& a : launcher(ranks)) s += "'" + a + "' ";
  return s;
}

// mpirun as the tests that signal it start it. On its SIGTERM, mpirun waits
// odls_base_sigkill_timeout seconds, sends SIGTERM to the ranks, waits as long again and sends
// SIGKILL, whether they have ended or not (GUARANTEES.md, "Signals": the documented limit). At
// the default 1 s, a checkpoint's fsync that a busy disk stalls past it kills rank 0 mid-write
// (seen beside another process writing 500 MB with fsync); the tests check the ranks' stop, not
// the disk's latency, so they give the ranks 5 s.
constexpr int kSigkillAfterSeconds = 5;
std::vector<std::string> signalled_launcher(int ranks) {
  std::vector<std::string> args = launcher(ranks);
  args.insert(args.end(), {"--mca", "odls_base_sigkill_timeout", std::to_string(kSigkillAfterSeconds)});
  return args;
}

// A small MQAR run whose global batch of 16 rows splits over the ranks; one thread per rank.
std::string small_run(const fs::path& out, int64_t steps, const std::string& extra = "") {
  return "train --model attention --task mqar --seq-len 32 --num-kv-pairs 4 --vocab 64 --d-model 32 --batch 16 "
         "--steps " + std::to_string(steps) + " --eval-every 10 --log-every 10 --threads 1 --progress none --out '" +
         out.string() + "'" + extra;
}

// The pids of the ranks mpirun (`launcher_pid`) started, by rank (from their environment).
std::vector<pid_t> rank_pids(pid_t launcher_pid, int ranks) {
  std::vector<pid_t> pids(size_t(ranks), -1);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_text(e.path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || std::atoi(stat.c_str() + paren + 4) != launcher_pid) continue;  // ppid is field 4
    const std::string env = read_text(e.path() / "environ");
    for (int r = 0; r < ranks; ++r)
      if (env.find("OMPI_COMM_WORLD_RANK=" + std::to_string(r) + '\0') != std::string::npos) pids[size_t(r)] = std::stoi(name);
  }
  return pids;
}

void wait_for(const fs::path& log, const std::string& text, int times = 1) {
  auto count = [&] {
    const std::string s = read_text(log);
    int n = 0;
    for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
    return n;
  };
  for (int i = 0; i < 12000 && count() < times; ++i)  // 120 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(count() >= times);
}

}  // namespace

TEST_CASE("mpi: P = 2 trains to the parameters of P = 1 on the same global batches, the same bits every time") {
  const fs::path start = scratch("p-start"), one = scratch("p1"), two = scratch("p2"), again = scratch("p2-again");
  REQUIRE(run(small_run(start, 20, " --stop-at 0")).code == 0);
  REQUIRE(run(small_run(one, 20)).code == 0);
  const Run r = run(small_run(two, 20), mpirun(2));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("2 MPI ranks") != std::string::npos);
  CHECK(r.err.find("trilemma") == std::string::npos);  // no error, no note (MPI's own warnings may vary)
  REQUIRE(run(small_run(again, 20), mpirun(2)).code == 0);
  // Deterministic for a given P: the sums over ranks run in rank order.
  CHECK(json_value(two / "summary.json", "params_fnv1a") == json_value(again / "summary.json", "params_fnv1a"));
  // P = 2 sums two half-batch gradients where P = 1 sums all rows in one GEMM: the same
  // numbers grouped differently, float32 rounding apart (measured 7e-7 of the distance the
  // weights moved). A wrong slice, a rank's batch used twice or a missing rank moves them by
  // O(0.1); 1e-4 leaves room for other kernels' rounding.
  CHECK(relative_difference(two / "last.h5", one / "last.h5", start / "last.h5") < 1e-4);
  // Adam hides a gradient's scale, the logged loss and gradient norm do not: the global mean.
  for (const char* key : {"loss", "grad_norm"}) {
    CAPTURE(key);
    CHECK(metric(two, 20, "train", key) == doctest::Approx(metric(one, 20, "train", key)).epsilon(1e-5));
  }
  CHECK(metric(two, 20, "valid", "acc") == doctest::Approx(metric(one, 20, "valid", "acc")).epsilon(0.02));
  // Rank 0 alone writes: the metrics rows of one run.
  CHECK(count_lines(read_text(two / "metrics.jsonl")) == count_lines(read_text(one / "metrics.jsonl")));
  CHECK(json_value(two / "summary.json", "tokens_seen") == json_value(one / "summary.json", "tokens_seen"));
}

TEST_CASE("mpi: SIGTERM stops both ranks after the same step; --resume continues with P = 2 or P = 1") {
  const fs::path whole = scratch("t-whole"), cut = scratch("t-cut"), other = scratch("t-other"),
                 log = scratch("t.log");
  REQUIRE(run(small_run(whole, 30), mpirun(2)).code == 0);
  // Every rank waits for the signal after step 12; mpirun forwards it to each.
  const pid_t pid = spawn(words(small_run(cut, 30)), log, "TRILEMMA_WAIT_FOR_SIGNAL_AT=12", signalled_launcher(2));
  wait_for(log, "waiting for a signal after step 12", 2);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(json_value(cut / "summary.json", "status") == "\"interrupted\"");
  CHECK(json_value(cut / "summary.json", "step") == "12");
  CHECK(read_text(log).find("continue with: mpirun -np 2 trilemma train --resume") != std::string::npos);
  fs::copy(cut, other, fs::copy_options::recursive);
  fs::remove(other / ".lock");
  // The same P: the uninterrupted run's bits.
  REQUIRE(run("train --resume '" + cut.string() + "'", mpirun(2)).code == 0);
  CHECK(json_value(cut / "summary.json", "params_fnv1a") == json_value(whole / "summary.json", "params_fnv1a"));
  // Another P: the same batches, sums grouped differently; it says so and finishes close by.
  const Run r = run("train --resume '" + other.string() + "'");
  REQUIRE(r.code == 0);
  CHECK(r.err.find("note: resuming with 1 MPI rank(s), the run used 2") != std::string::npos);
  CHECK(json_value(other / "summary.json", "step") == "30");
  CHECK(metric(other, 30, "train", "loss") == doctest::Approx(metric(whole, 30, "train", "loss")).epsilon(1e-4));
}

TEST_CASE("mpi: SIGTERM at random moments mid-step; each rank contains it; --resume reaches the bits") {
  // The stopped runs are open-ended, on a constant learning rate (so a step's bits do not depend
  // on --steps): however fast the machine runs when the signal comes, mpirun's delay included,
  // they are still training. The uninterrupted run then trains to a step past every stop, and each
  // stopped run resumes to that step. The moments span about 6 s of training, timed by a probe
  // on this build and machine (a sanitizer build is many times slower).
  const std::string constant_lr = " --schedule constant";
  const fs::path probe = scratch("r-probe"), whole = scratch("r-whole");
  REQUIRE(run(small_run(probe, 100, constant_lr), mpirun(2)).code == 0);
  const double per_step = std::stod(json_value(probe / "summary.json", "elapsed_s")) / 100;
  const int64_t span_steps = std::clamp<int64_t>(int64_t(6.0 / per_step), 100, 4000);
  // The probe's rows per step (small_run's log and evaluation cadence) give the span's rows.
  const int span_rows = int(count_lines(read_text(probe / "metrics.jsonl")) * span_steps / 100);
  const int64_t open_ended = 100000000;
  std::vector<fs::path> stopped;
  int64_t last_stop = 0;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    const fs::path dir = scratch("r-" + std::to_string(i)), log = scratch("r.log");
    const pid_t pid = spawn(words(small_run(dir, open_ended, constant_lr)), log, "", signalled_launcher(2));
    // Where the signal lands is drawn as a share of the span's metrics rows (rank 0 writes them
    // as it goes; mpirun forwards the ranks' output late), then a part of a step: a moment that
    // does not depend on how fast this machine is today. Through mpirun, which adds its delay
    // (kSigkillAfterSeconds), early in the span so the uninterrupted run stays short; or to
    // every rank at once, as Slurm's scancel --signal=TERM does.
    const bool through_mpirun = i % 2 == 0;
    const int rows = int(std::uniform_real_distribution<double>(0.05, through_mpirun ? 0.25 : 0.8)(rng) * span_rows) + 1;
    for (int t = 0; t < 120000 && count_lines(read_text(dir / "metrics.jsonl")) < rows; ++t)
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    const std::vector<pid_t> ranks = rank_pids(pid, 2);
    for (pid_t rank : ranks) {  // no handler; every thread but the receiver blocks both, as in one process
      REQUIRE(rank > 0);
      const StopSignalSetup setup = stop_signal_setup(rank);
      CHECK(!setup.handler);
      CHECK(setup.receivers == 1);
      CHECK(setup.unblocking == 0);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::uniform_real_distribution<double>(0, 2 * per_step)(rng)));
    if (through_mpirun) kill(pid, SIGTERM);
    else
      for (pid_t rank : ranks) kill(rank, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CAPTURE(read_text(log));
    CHECK(WIFEXITED(status));  // mpirun's own exit: no rank crashed
    CHECK(json_value(dir / "summary.json", "status") == "\"interrupted\"");
    CHECK(read_text(log).find("stopped by SIGTERM, which arrived during ") != std::string::npos);
    last_stop = std::max<int64_t>(last_stop, std::stoll(json_value(dir / "summary.json", "step")));
    stopped.push_back(dir);
  }
  const int64_t steps = last_stop + 10;
  REQUIRE(run(small_run(whole, steps, constant_lr), mpirun(2)).code == 0);
  const std::string params = json_value(whole / "summary.json", "params_fnv1a");
  for (const fs::path& dir : stopped) {
    CAPTURE(dir);
    REQUIRE(run("train --resume '" + dir.string() + "' --steps " + std::to_string(steps), mpirun(2)).code == 0);
    CHECK(json_value(dir / "summary.json", "params_fnv1a") == params);
  }
}

TEST_CASE("mpi: commands other than train and info refuse to run as ranks") {
  const Run r = run("sweep nothing.grid --out x", mpirun(2));
  CHECK(r.code != 0);
  CHECK(r.err.find("trilemma sweep runs as one process, and this one was started as one of 2 MPI ranks") !=
        std::string::npos);
  CHECK(!fs::exists("x"));
  const Run info = run("info", mpirun(2));
  CHECK(info.code == 0);
  CHECK(info.out.find("mpi: Open MPI") != std::string::npos);
}

TEST_CASE("mpi: a rank that dies ends the whole job with a message, not a hang") {
  const fs::path dir = scratch("k"), log = scratch("k.log");
  const pid_t pid = spawn(words(small_run(dir, 30, " --checkpoint-every 5")), log, "TRILEMMA_WAIT_FOR_SIGNAL_AT=6",
                          launcher(2));
  wait_for(log, "waiting for a signal after step 6", 2);  // last.h5 holds step 5
  // Kill rank 1 outright, then let rank 0 go on into the next collective, which rank 1 never joins.
  const std::vector<pid_t> ranks = rank_pids(pid, 2);
  REQUIRE(ranks[0] > 0);
  REQUIRE(ranks[1] > 0);
  kill(ranks[1], SIGKILL);
  kill(ranks[0], SIGTERM);
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 6000 && !ended; ++i) {  // 60 s at most
    ended = waitpid(pid, &status, WNOHANG) == pid;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!ended) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  REQUIRE(ended);
  CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
  const std::string text = read_text(log);
  CHECK(text.find("rank 1") != std::string::npos);
  CHECK(text.find("signal 9") != std::string::npos);
  // The checkpoint of step 5 is intact.
  const Run inspect = run("inspect '" + (dir / "last.h5").string() + "'");
  CAPTURE(inspect.err);
  CHECK(inspect.code == 0);
  CHECK(inspect.out.find("step 5,") != std::string::npos);
}
