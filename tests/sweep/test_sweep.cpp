// trilemma sweep end to end on a tiny grid: it runs every run, skips finished ones, resumes an
// interrupted one to the uninterrupted bits, records a failing run and goes on, two shards
// give the table one whole sweep gives, a bad grid is one line before any run starts,
// and run ids survive fields added to the config later.
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "tests/run_files.hpp"

namespace {

using namespace trilemma_test;

// Two sections (attention with learned positions, Mamba without), two seeds: four runs of
// ~0.3 s each. One thread per run: a loaded machine does not stall OpenMP barriers.
const char* kGrid = R"(# a tiny grid
task = mqar
seq-len = 32
num-kv-pairs = 4
vocab = 64
d-model = 16
batch = 8
steps = 24
eval-every = 12
eval-batches = 2
warmup = 4
lr = 3e-3
seed = 0, 1
eval-lengths = 32 48

[attention]
model = attention
(n-heads, pos) = (1, learned)
max-seq-len = 48

[mamba]
model = mamba
d-state = 8
)";

fs::path grid_file(const std::string& name, const std::string& text) {
  const fs::path p = scratch(name + ".grid");
  write_text(p, text);
  return p;
}

std::string sweep(const fs::path& grid, const fs::path& out, const std::string& extra = "") {
  return "sweep '" + grid.string() + "' --out '" + out.string() + "' --threads 1" + extra;
}

// The "status" of every row of results.jsonl.
std::vector<std::string> statuses(const fs::path& dir) {
  return text_lines(capture("/usr/bin/python3 -c 'import json, sys\nfor l in open(sys.argv[1]): print(json.loads(l)[\"status\"])' '" +
                          (dir / "results.jsonl").string() + "'"));
}

}  // namespace

TEST_CASE("a sweep runs every run, skips finished ones and resumes an interrupted one") {
  const fs::path grid = grid_file("tiny", kGrid), whole = scratch("whole");
  Run r = run(sweep(grid, whole));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("4 runs in 2 section(s)") != std::string::npos);
  CHECK(statuses(whole) == std::vector<std::string>(4, "finished"));
  std::vector<std::string> ids;
  for (const auto& e : fs::directory_iterator(whole / "runs")) ids.push_back(e.path().filename().string());
  CHECK(ids.size() == 4);
  for (const std::string& id : ids) {
    CHECK(fs::exists(whole / "runs" / id / "last.h5"));
    CHECK((id.rfind("attention-mqar-", 0) == 0 || id.rfind("mamba-mqar-", 0) == 0));
  }
  // The length evaluations are in each row; the chance level too (values: 32 of 64 ids).
  const std::string jsonl = read_text(whole / "results.jsonl");
  CHECK(jsonl.find("\"seq_len\":48") != std::string::npos);
  CHECK(jsonl.find("\"chance\":0.03125") != std::string::npos);

  // Again: nothing to do, the runs untouched.
  const auto stamp = fs::last_write_time(whole / "runs" / ids[0] / "last.h5");
  r = run(sweep(grid, whole));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("running 0 runs") != std::string::npos);
  CHECK(fs::last_write_time(whole / "runs" / ids[0] / "last.h5") == stamp);

  // Interrupted: each run waits for a signal after step 7; SIGTERM to the sweep reaches the
  // running run once, which checkpoints; the next sweep resumes it to the same bits.
  const fs::path cut = scratch("cut"), log = scratch("cut.log");
  const pid_t pid = spawn({"sweep", grid.string(), "--out", cut.string(), "--threads", "1"}, log,
                          "TRILEMMA_WAIT_FOR_SIGNAL_AT=7");
  bool waiting = false;
  for (int i = 0; i < 12000 && !waiting; ++i) {  // 120 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(cut / "logs"))
      for (const auto& e : fs::directory_iterator(cut / "logs"))
        waiting |= read_text(e.path()).find("waiting for a signal after step 7") != std::string::npos;
  }
  REQUIRE(waiting);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  const std::vector<std::string> after_cut = statuses(cut);
  CHECK(std::count(after_cut.begin(), after_cut.end(), "interrupted") == 1);
  CHECK(std::count(after_cut.begin(), after_cut.end(), "pending") == 3);
  r = run(sweep(grid, cut));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("(resumed from last.h5)") != std::string::npos);
  for (const std::string& id : ids)
    CHECK(json_value(cut / "runs" / id / "summary.json", "params_fnv1a") ==
          json_value(whole / "runs" / id / "summary.json", "params_fnv1a"));
  CHECK(csv_without_timing(cut / "results.csv") == csv_without_timing(whole / "results.csv"));
}

TEST_CASE("a failing run is recorded with its error and the sweep goes on") {
  const fs::path grid = grid_file("fail", kGrid), dir = scratch("fail");
  REQUIRE(run(sweep(grid, dir, " --dry-run")).code == 0);
  // A run whose last.h5 is not a checkpoint: its resume fails with one line.
  const std::string listing = run(sweep(grid, dir, " --dry-run")).out;
  const std::string id = listing.substr(listing.find("attention-mqar-"), 27);
  fs::create_directories(dir / "runs" / id);
  write_text(dir / "runs" / id / "last.h5", "not a checkpoint");
  const Run r = run(sweep(grid, dir, " --jobs 1"));
  CHECK(r.code == 1);
  CHECK(r.out.find("FAILED: ") != std::string::npos);
  const std::vector<std::string> s = statuses(dir);
  CHECK(std::count(s.begin(), s.end(), "failed") == 1);
  CHECK(std::count(s.begin(), s.end(), "finished") == 3);
  const std::string error = read_text(dir / "logs" / (id + ".error"));
  CHECK(error.find("last.h5") != std::string::npos);
  CHECK(text_lines(error).size() == 1);
  CHECK(read_text(dir / "results.csv").find(error.substr(0, error.size() - 1)) != std::string::npos);
}

TEST_CASE("two shards give the results one whole sweep gives") {
  const fs::path grid = grid_file("shards", kGrid), whole = scratch("s-whole"), parts = scratch("s-parts");
  REQUIRE(run(sweep(grid, whole)).code == 0);
  const Run first = run(sweep(grid, parts, " --shard 1/2"));
  REQUIRE(first.code == 0);
  CHECK(first.out.find("shard 1/2: 2 runs") != std::string::npos);
  std::vector<std::string> s = statuses(parts);
  CHECK(std::count(s.begin(), s.end(), "pending") == 2);
  REQUIRE(run(sweep(grid, parts, " --shard 2/2")).code == 0);
  CHECK(csv_without_timing(parts / "results.csv") == csv_without_timing(whole / "results.csv"));
}

TEST_CASE("a bad grid is one line of error before any run starts") {
  const std::string base = "task = mqar\nseq-len = 32\nvocab = 64\nsteps = 5\n";
  std::string many = "1";  // 1, 2, ..., 25
  for (int i = 2; i <= 25; ++i) many += ", " + std::to_string(i);
  const std::pair<std::string, std::string> cases[] = {
      {base + "d-modle = 16\n", "unknown option 'd-modle'"},
      {base + "d-model = \n", "d-model has no value"},
      {base + "d-model = 16, , 32\n", "an empty item"},
      {base + "lr = 1e-3, -1\n", "--lr -1 is out of range"},
      {base + "model = attention\nd-state = 8\n", "--d-state is an option of mamba, not of model attention"},
      {base + "model = mamba\nmixers = mamba+attention\nfeature-map = relu\n",
       "--feature-map is an option of linear, not of model mamba+attention"},
      {base + "mixers = mamba+rnn\n", "--mixers mamba,rnn: --model 'rnn' unknown"},
      {base + "threads = 2\n", "--threads is set by the sweep"},
      {base + "(seq-len, num-kv-pairs) = (32, 4), (64)\n", "holds 1 values for 2 keys"},
      {base + "[a]\nmodel = mamba\n[a]\n", "section [a] appears twice"},
      // No setting at all would be one run of every default.
      {"", "sets no option"},
      {"# a comment only\n\n", "sets no option"},
      {"[a]\n[b]\n", "sets no option"},
      // 25^3 = 15625 runs: refused from the list lengths alone, before any run is built.
      {base + "seed = " + many + "\nwarmup = " + many + "\nlog-every = " + many + "\n", "expands to more than 10000 runs"},
  };
  int n = 0;
  for (const auto& [text, message] : cases) {
    CAPTURE(text);
    const fs::path dir = scratch("bad" + std::to_string(n++));
    const Run r = run(sweep(grid_file("bad", text), dir));
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(count_lines(r.err) == 1);
    CHECK(!fs::exists(dir));
  }
  const Run jobs = run("sweep '" + grid_file("ok", base).string() + "' --out x --threads 2 --jobs 3");
  CHECK(jobs.code == 2);
  CHECK(jobs.err.find("--jobs 3 is out of range (allowed: 1..2") != std::string::npos);
}

// The ids name the run folders a sweep skips when finished: a config field added later must
// not rename every run of an existing sweep while it holds its default.
TEST_CASE("a run id ignores a field added later while it holds its default") {
  auto ids = [](const std::string& text) {
    const Run r = run(sweep(grid_file("ids", text), scratch("ids"), " --dry-run"));
    REQUIRE(r.code == 0);
    std::vector<std::string> out;
    for (const std::string& line : text_lines(r.out))
      if (line.rfind("  ", 0) == 0) out.push_back(line.substr(2, line.find(' ', 2) - 2));
    return out;
  };
  const std::vector<std::string> plain = ids(kGrid);
  REQUIRE(plain.size() == 4);
  CHECK(ids("on-nonfinite = stop\ndetect-anomaly = false\n" + std::string(kGrid)) == plain);
  std::string with_default = kGrid;  // Based's short convolution came later: at its default, no new ids
  with_default.replace(with_default.find("max-seq-len = 48\n"), 17, "max-seq-len = 48\nshort-conv = 0\n");
  CHECK(ids(with_default) == plain);
  // A hybrid's families' options are its own; its list reads the same with '+' or spaces.
  const std::string hybrid = "task = mqar\nseq-len = 32\nvocab = 64\nsteps = 5\nmodel = mamba\nwindow = 4\n";
  const std::vector<std::string> plus = ids(hybrid + "mixers = mamba+attention\n");
  REQUIRE(plus.size() == 1);
  CHECK(plus[0].rfind("mamba+attention-mqar-", 0) == 0);
  CHECK(ids(hybrid + "mixers = mamba attention\n") == plus);
  const std::vector<std::string> skip = ids("on-nonfinite = skip\n" + std::string(kGrid));
  REQUIRE(skip.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(skip[i] != plain[i]);
  // The committed quick sweep keeps its folders: its ids are those of results/quick/runs.
  const fs::path source = TRILEMMA_SOURCE_DIR;
  std::vector<std::string> committed;
  for (const auto& e : fs::directory_iterator(source / "results" / "quick" / "runs"))
    committed.push_back(e.path().filename().string());
  std::vector<std::string> quick = ids(read_text(source / "experiments" / "quick.grid"));
  std::sort(committed.begin(), committed.end());
  std::sort(quick.begin(), quick.end());
  CHECK(quick == committed);
}
