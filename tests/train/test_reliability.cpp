// Nothing crashes, nothing is lost, corruption is detected: writes that fail (a file-size limit
// standing in for a full disk), SIGKILL at random moments, two processes on one run folder,
// NaN/Inf in training, and flipped bits in a checkpoint.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/run_binary.hpp"

namespace {

using namespace trilemma_test;

const std::string kSmall =
    " --task mqar --vocab 64 --seq-len 32 --num-kv-pairs 4 --d-model 32 --batch 8"
    " --eval-batches 2 --log-every 1 --progress none --threads 1";

// extra may set --lr and --warmup (defaults 0.003 and 5).
std::string train(const std::string& model, const fs::path& out, const std::string& extra) {
  std::string s = "train --model " + model + kSmall + " --out '" + out.string() + "'" + extra;
  if (extra.find("--lr") == std::string::npos) s += " --lr 0.003";
  if (extra.find("--warmup") == std::string::npos) s += " --warmup 5";
  return s;
}

// eval --json's results, without the checkpoint's path.
std::string results_of(const std::string& json) { return json.substr(json.find("\"results\"")); }

std::string bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Files a failed write may not leave behind: temporaries of the atomic writer.
int temporaries_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

int lines_of(const std::string& s) { return count_lines(s); }

}  // namespace

TEST_CASE("reliability: a write that fails (file-size limit) is one line, exit 1, nothing torn") {
  // RLIMIT_FSIZE with SIGXFSZ ignored makes write(2) fail with EFBIG, as ENOSPC on a full disk:
  // the same path through every writer, and it works without root in any CI.
  const fs::path dir = scratch("fsize");
  REQUIRE(run(train("attention", dir, " --steps 12 --eval-every 6 --stop-at 6")).code == 0);
  const std::string before = bytes_of(dir / "last.h5");
  const std::uintmax_t ckpt = fs::file_size(dir / "last.h5");
  // Limits (in 512-byte blocks of dash's ulimit) below the checkpoint's size: the resumed run's
  // next checkpoint cannot be written, whatever else still fits.
  for (const int blocks : {1, int(ckpt / 512) / 2, int(ckpt / 512) - 1}) {
    CAPTURE(blocks);
    const Run r = run("train --resume '" + dir.string() + "' --progress none --threads 1",
                      "ulimit -f " + std::to_string(blocks) + "; trap '' XFSZ;");
    CHECK(r.code == 1);  // an error, not a crash (139) or a signal
    CHECK(lines_of(r.err) == 1);
    CHECK(r.err.find("File too large") != std::string::npos);
    CHECK(r.err.find(dir.string()) != std::string::npos);  // the file is named
    CHECK(r.err.find("HDF5") == std::string::npos);
    CHECK(temporaries_in(dir) == 0);
    CHECK(bytes_of(dir / "last.h5") == before);  // the previous checkpoint, intact
  }
  // And the run then resumes and finishes as if nothing had happened.
  const Run ok = run("train --resume '" + dir.string() + "' --progress none --threads 1");
  CHECK(ok.code == 0);
}

TEST_CASE("reliability: eval --dump and data dump report a failed write the same way") {
  const fs::path dir = scratch("fsize_dump");
  REQUIRE(run(train("linear", dir, " --steps 4 --eval-every 4")).code == 0);
  const fs::path dump = scratch("dump.h5");
  for (const std::string& cmd :
       {"eval '" + (dir / "last.h5").string() + "' --dump '" + dump.string() + "' --threads 1",
        "data dump --task mqar --batches 200 --rows 64 --out '" + dump.string() + "'"}) {
    CAPTURE(cmd);
    const Run r = run(cmd, "ulimit -f 8; trap '' XFSZ;");
    CHECK(r.code == 1);
    CHECK(lines_of(r.err) == 1);
    CHECK(r.err.find("File too large") != std::string::npos);
    CHECK(r.err.find("HDF5") == std::string::npos);
    CHECK(!fs::exists(dump));
    CHECK(temporaries_in(dump.parent_path()) == 0);
  }
}

TEST_CASE("reliability: SIGKILL at 10 random moments, resumed each time, gives the uninterrupted bits") {
  const std::string extra = " --steps 60 --eval-every 30 --checkpoint-every 3";
  const fs::path ref = scratch("kill_ref");
  REQUIRE(run(train("mamba", ref, extra)).code == 0);
  const std::string want = json_value(ref / "summary.json", "params_fnv1a");
  const fs::path dir = scratch("kill");
  // The uninterrupted run's wall time bounds the kill moments; some land in checkpoint writes.
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(run(train("mamba", scratch("kill_timing"), extra)).code == 0);
  const double run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937 rng(12345);  // fixed moments: a failure repeats
  std::uniform_real_distribution<double> moment(0.05, 0.9);
  bool started = false;
  for (int kill_no = 0; kill_no < 10; ++kill_no) {
    const std::string args = started && fs::exists(dir / "last.h5")
                                 ? "train --resume " + dir.string() + " --progress none --threads 1"
                                 : train("mamba", dir, extra);
    std::vector<std::string> argv;
    std::istringstream in(args);
    for (std::string w; in >> w;) argv.push_back(w[0] == '\'' ? w.substr(1, w.size() - 2) : w);
    const pid_t pid = spawn(argv, scratch("kill.log"));
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(moment(rng) * run_ms));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    started = true;
    if (fs::exists(dir / "last.h5"))  // every checkpoint on disk is whole and readable
      CHECK(run("inspect '" + (dir / "last.h5").string() + "'").code == 0);
    CHECK(temporaries_in(dir) <= 1);  // at most the one write the kill interrupted
  }
  // Finish: resume until done (a kill before the first checkpoint restarts from scratch).
  const std::string finish = fs::exists(dir / "last.h5")
                                 ? "train --resume '" + dir.string() + "' --progress none --threads 1"
                                 : train("mamba", dir, extra);
  if (!fs::exists(dir / "last.h5")) fs::remove_all(dir);
  REQUIRE(run(finish).code == 0);
  CHECK(json_value(dir / "summary.json", "params_fnv1a") == want);
  CHECK(temporaries_in(dir) == 0);  // the kills' half-written files are gone
}

TEST_CASE("reliability: killed after its last checkpoint, before its summary, a resumed run still writes it") {
  // SIGKILL between the final checkpoint and summary.json leaves a complete checkpoint and no
  // summary: resuming owes the test evaluation and the summary, not "nothing to do".
  const fs::path dir = scratch("kill_before_summary");
  REQUIRE(run(train("mamba", dir, " --steps 12 --eval-every 6 --checkpoint-every 3")).code == 0);
  const std::string eval = json_value(dir / "summary.json", "final_eval");
  const std::string valid = json_value(dir / "summary.json", "final_valid");
  const std::string params = json_value(dir / "summary.json", "params_fnv1a");
  fs::remove(dir / "summary.json");
  REQUIRE(run("train --resume '" + dir.string() + "' --progress none --threads 1").code == 0);
  CHECK(json_value(dir / "summary.json", "status") == "\"finished\"");
  CHECK(json_value(dir / "summary.json", "params_fnv1a") == params);
  CHECK(json_value(dir / "summary.json", "final_eval") == eval);
  CHECK(json_value(dir / "summary.json", "final_valid") == valid);
  // A complete run with its summary is left as it is.
  const Run again = run("train --resume '" + dir.string() + "' --progress none --threads 1");
  CHECK(again.code == 0);
  CHECK(again.out.find("nothing to do") != std::string::npos);
}

TEST_CASE("reliability: a resumed run removes the temporaries of killed writers, not a live one's") {
  const fs::path dir = scratch("dead_temporaries");
  REQUIRE(run(train("linear", dir, " --steps 4 --eval-every 4")).code == 0);
  const pid_t gone = fork();  // a pid that no longer runs
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string dead = ".tmp." + std::to_string(gone), live = ".tmp." + std::to_string(getpid());
  for (const std::string& name : {"last.h5" + dead, "summary.json" + dead, "dump.h5" + live})
    std::ofstream(dir / name) << "half";
  REQUIRE(run("train --resume '" + dir.string() + "' --steps 6 --progress none --threads 1").code == 0);
  CHECK(!fs::exists(dir / ("last.h5" + dead)));
  CHECK(!fs::exists(dir / ("summary.json" + dead)));
  CHECK(fs::exists(dir / ("dump.h5" + live)));  // its writer still runs
}

TEST_CASE("reliability: a second process on a run folder is refused while the first runs") {
  const fs::path dir = scratch("lock");
  const pid_t first = spawn({"train", "--model", "linear", "--task", "mqar", "--vocab", "64", "--seq-len", "32",
                             "--d-model", "32", "--batch", "8", "--steps", "100000", "--eval-every", "1000",
                             "--checkpoint-every", "50", "--progress", "none", "--threads", "1", "--out",
                             dir.string()},
                            scratch("lock.log"));
  // Wait for its first checkpoint, so that --resume has a run to read.
  for (int i = 0; i < 600 && !fs::exists(dir / "last.h5"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(fs::exists(dir / "last.h5"));
  const Run second = run("train --resume '" + dir.string() + "' --progress none --threads 1");
  CHECK(second.code == 1);
  CHECK(lines_of(second.err) == 1);
  CHECK(second.err.find("in use by another trilemma process (pid " + std::to_string(first) + ")") !=
        std::string::npos);
  kill(first, SIGKILL);
  int status = 0;
  waitpid(first, &status, 0);
  // The kernel released the lock with the process: the run resumes.
  CHECK(run("train --resume '" + dir.string() + "' --steps 60 --progress none --threads 1").code == 0);
}

TEST_CASE("reliability: a non-finite loss stops the run or skips the step, never reaches a checkpoint") {
  // SGD at lr 10 without clipping diverges to Inf within a few dozen steps.
  const std::string diverge = " --optimizer sgd --lr 10 --clip 0 --warmup 0 --steps 200 --eval-every 1000";
  const fs::path stop = scratch("nan_stop");
  const Run r = run(train("attention", stop, diverge + " --checkpoint-every 1"));
  CHECK(r.code == 1);
  CHECK(lines_of(r.err) == 1);
  CHECK(r.err.find("--detect-anomaly names the op") != std::string::npos);
  CHECK(json_value(stop / "summary.json", "status") == "\"nonfinite\"");
  // The checkpoint left is the last good step's, and loads.
  CHECK(run("inspect '" + (stop / "last.h5").string() + "'").code == 0);

  const fs::path anomaly = scratch("nan_anomaly");
  const Run a = run(train("attention", anomaly, diverge + " --checkpoint-every 1 --detect-anomaly 1"));
  CHECK(a.code == 1);
  CHECK(a.err.find("the first non-finite value came from the ") != std::string::npos);

  const fs::path skip = scratch("nan_skip");
  const Run s = run(train("attention", skip, diverge + " --on-nonfinite skip --checkpoint-every 1000"));
  // Every step from the first non-finite one on is skipped (the weights stay as they were, too
  // large for a finite loss); the run completes and its checkpoints hold finite values.
  CHECK(s.code == 0);
  CHECK(std::stoi(json_value(skip / "summary.json", "skipped_steps")) > 100);
  CHECK(run("inspect '" + (skip / "last.h5").string() + "'").code == 0);
}

TEST_CASE("reliability: a flipped bit in a parameter or the optimizer state is an error naming the dataset") {
  const fs::path dir = scratch("flip_named");
  REQUIRE(run(train("linear", dir, " --steps 4 --eval-every 4")).code == 0);
  const std::string good = bytes_of(dir / "last.h5");
  for (const std::string dataset : {"/model/backbone.layers.0.mixer.q_proj.weight",
                                    "/optimizer/exp_avg_sq/backbone.embedding.weight"}) {
    CAPTURE(dataset);
    // h5py tells where the dataset's one chunk starts in the file.
    const std::string at = capture("/usr/bin/python3 -c 'import h5py, sys; f = h5py.File(sys.argv[1], \"r\"); "
                                   "print(f[sys.argv[2]].id.get_chunk_info(0).byte_offset)' '" +
                                   (dir / "last.h5").string() + "' '" + dataset + "'");
    REQUIRE(!at.empty());
    std::string bad = good;
    bad[std::stoul(at) + 5] ^= 0x10;
    // A copy of the run folder whose last.h5 has the flipped bit: resuming it must refuse.
    const fs::path copy = scratch("flip_named_copy");
    fs::remove_all(copy);
    fs::copy(dir, copy);
    std::ofstream(copy / "last.h5", std::ios::binary | std::ios::trunc) << bad;
    const Run e = run("train --resume '" + copy.string() + "' --steps 8 --progress none --threads 1");
    CHECK(e.code == 1);
    CHECK(lines_of(e.err) == 1);
    CHECK(e.err.find("checksum mismatch") != std::string::npos);
    CHECK(e.err.find(dataset) != std::string::npos);
  }
}

TEST_CASE("reliability: every flipped byte of a checkpoint is detected or harmless") {
  const fs::path dir = scratch("flip");
  REQUIRE(run(train("linear", dir, " --steps 4 --eval-every 4")).code == 0);
  const std::string good = bytes_of(dir / "last.h5");
  const Run base = run("eval '" + (dir / "last.h5").string() + "' --json --threads 1");
  REQUIRE(base.code == 0);
  std::mt19937 rng(7);
  int detected = 0, harmless = 0;
  for (int i = 0; i < 150; ++i) {
    std::string bad = good;
    const size_t at = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
    bad[at] = char(bad[at] ^ (1 << std::uniform_int_distribution<int>(0, 7)(rng)));
    const fs::path f = scratch("flipped.h5");
    std::ofstream(f, std::ios::binary) << bad;
    const Run r = run("eval '" + f.string() + "' --json --threads 1");
    CAPTURE(at);
    CHECK(r.code != 139);  // never a crash
    if (r.code == 0) {
      ++harmless;
      CHECK(results_of(r.out) == results_of(base.out));  // an undetected flip changed nothing read
    } else {
      ++detected;
      CHECK(lines_of(r.err) == 1);
    }
  }
  MESSAGE("flipped bytes: " << detected << " detected, " << harmless << " in bytes nothing reads");
  CHECK(detected > 0);
}

TEST_CASE("reliability: a checkpoint whose config declares a model larger than the file is refused before allocating") {
  const fs::path dir = scratch("oversize");
  fs::remove_all(dir);
  REQUIRE(run(train("attention", dir, " --steps 2 --eval-every 2")).code == 0);
  // d-model 65536 x 1024 layers: within each field's range, about 2^42 parameters (16 TiB).
  const fs::path copy = scratch("oversize_copy");
  fs::remove_all(copy);
  fs::copy(dir, copy);
  const std::string edit = "/usr/bin/python3 -c \"import sys, h5py; c = h5py.File(sys.argv[1], 'r+')['config'].attrs; "
                           "c['d-model'] = b'65536'; c['n-layers'] = b'1024'; c['n-heads'] = b'1'\" '" +
                           (copy / "last.h5").string() + "'";
  REQUIRE(std::system(edit.c_str()) == 0);
  for (const std::string& cmd : {"eval '" + (copy / "last.h5").string() + "' --threads 1",
                                 "train --resume '" + copy.string() + "' --steps 4 --progress none --threads 1"}) {
    CAPTURE(cmd);
    const Run r = run(cmd);
    CHECK(r.code == 1);
    CHECK(lines_of(r.err) == 1);
    CHECK(r.err.find("declares a model larger than the file") != std::string::npos);
  }
}
