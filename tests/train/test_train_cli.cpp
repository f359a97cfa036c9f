// trilemma train end to end: the run folder's files, exact resume (after --stop-at and after
// SIGINT/SIGTERM), early stop, progress output, and bad input (one-line errors, exit codes,
// no files left behind).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/run_files.hpp"
#include "train/run_log.hpp"

namespace {

using namespace trilemma_test;

// A small, fast configuration: ~0.2 s for 50 steps. One thread, so that a loaded machine
// does not stall OpenMP barriers; the kernels' bits do not depend on the thread count.
const std::string kSmall =
    " --task mqar --vocab 64 --seq-len 32 --num-kv-pairs 4 --d-model 32 --batch 8 --lr 0.003"
    " --warmup 5 --eval-batches 2 --log-every 7";

// `extra` must give --steps; --eval-every and --progress default to 20 and none.
std::string small_run(const std::string& model, const fs::path& out, const std::string& extra) {
  std::string s = "train --model " + model + kSmall + " --out '" + out.string() + "'" + extra;
  if (extra.find("--eval-every") == std::string::npos) s += " --eval-every 20";
  if (extra.find("--progress") == std::string::npos) s += " --progress none";
  if (extra.find("--threads") == std::string::npos) s += " --threads 1";
  return s;
}

// The error a failed command printed: exactly one "trilemma: " line, the last on stderr.
std::string error_line(const Run& r) {
  std::istringstream in(r.err);
  std::string line, last;
  int errors = 0;
  while (std::getline(in, line)) {
    if (line.rfind("trilemma: ", 0) == 0) ++errors;
    if (!line.empty()) last = line;
  }
  CHECK(errors == 1);
  return last;
}


}  // namespace

TEST_CASE("train: the run folder holds config, metrics, checkpoints and the summary") {
  const fs::path out = scratch("files");
  Run r = run(small_run("attention", out, " --steps 45 --keep 2 --checkpoint-every 10"));
  REQUIRE(r.code == 0);
  for (const char* f : {"config.ini", "metrics.jsonl", "metrics.csv", "last.h5", "best.h5", "summary.json"})
    CHECK(fs::exists(out / f));
  // --keep 2: the newest two step checkpoints of 10, 20, 30, 40, 45.
  CHECK(fs::exists(out / "step-0000040.h5"));
  CHECK(fs::exists(out / "step-0000045.h5"));
  CHECK(!fs::exists(out / "step-0000030.h5"));
  CHECK(no_temporary_files(out));

  // The resolved config is printed and saved: no "0 = default" value is left.
  const std::string ini = read_text(out / "config.ini");
  CHECK(ini.find("seq-len = 32\n") != std::string::npos);
  CHECK(ini.find("max-seq-len = 32\n") != std::string::npos);
  CHECK(ini.find("eval-batch = 8\n") != std::string::npos);
  CHECK(ini.find("threads = 1\n") != std::string::npos);
  CHECK(ini.find("window = 0\n") != std::string::npos);  // attention's own options, at their defaults
  CHECK(r.out.find("  d-model = 32\n") != std::string::npos);

  // Training rows at 7, 14, ..., 42 and the last step; evaluation rows at 20, 40, 45.
  const std::string csv = read_text(out / "metrics.csv");
  CHECK(csv.rfind("step,split,loss,acc,seq_acc,grad_norm,lr,ms_per_step,tokens_per_s,elapsed_s\n", 0) == 0);
  CHECK(count_lines(csv) == 1 + 7 + 3);
  CHECK(count_lines(read_text(out / "metrics.jsonl")) == 7 + 3);
  const fs::path rows = scratch("rows.txt");
  std::system(("/usr/bin/python3 -c 'import json, sys\n"
               "rows = [json.loads(l) for l in open(sys.argv[1])]\n"
               "print(\" \".join(\"%s%d\" % (r[\"split\"][0], r[\"step\"]) for r in rows))\n"
               "assert all(r[\"loss\"] > 0 and 0 <= r[\"acc\"] <= 1 for r in rows)\n"
               "assert all(r[\"grad_norm\"] > 0 and r[\"tokens_per_s\"] > 0 for r in rows if r[\"split\"] == \"train\")' '" +
               (out / "metrics.jsonl").string() + "' > '" + rows.string() + "'").c_str());
  CHECK(read_text(rows) == "t7 t14 v20 t21 t28 t35 v40 t42 t45 v45\n");  // v: the validation stream

  CHECK(json_value(out / "summary.json", "status") == "\"finished\"");
  CHECK(json_value(out / "summary.json", "step") == "45");
  // The reported accuracy is the held-out test stream's, evaluated once the run is complete; the
  // validation stream's last evaluation (which chose best.h5) is beside it, on other rows.
  CHECK(json_value(out / "summary.json", "final_eval").find("\"step\": 45") != std::string::npos);
  CHECK(json_value(out / "summary.json", "final_valid").find("\"step\": 45") != std::string::npos);
  CHECK(json_value(out / "summary.json", "final_eval") != json_value(out / "summary.json", "final_valid"));
  // The config in the summary is typed JSON: numbers, booleans, strings.
  CHECK(capture("/usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))[\"config\"]\n"
                "print(*(type(c[k]).__name__ + \"=\" + json.dumps(c[k]) for k in (\"batch\", \"lr\", \"tie-embeddings\","
                " \"model\", \"rope-style\")))' '" + (out / "summary.json").string() + "'") ==
        "int=8 float=0.003 bool=true str=\"attention\" str=\"half\"");
  // The runtime in one line at the top of stdout (what the run was measured on); stderr is empty.
  CHECK(r.out.rfind("trilemma ", 0) == 0);
  CHECK(r.out.find("1 thread of") < r.out.find('\n'));
  CHECK(r.err.empty());
  CHECK(json_value(out / "summary.json", "tokens_seen") == std::to_string(45 * 8 * 32));

  // config.ini read back with --config reproduces the run bit for bit.
  const fs::path again = scratch("files-again");
  Run r2 = run("train --config '" + (out / "config.ini").string() + "' --out '" + again.string() + "'");
  REQUIRE(r2.code == 0);
  CHECK(json_value(again / "summary.json", "params_fnv1a") == json_value(out / "summary.json", "params_fnv1a"));
  CHECK(metrics_without_timing(again / "metrics.csv") == metrics_without_timing(out / "metrics.csv"));

  // inspect reads the checkpoint.
  Run ins = run("inspect '" + (out / "last.h5").string() + "'");
  CHECK(ins.code == 0);
  CHECK(ins.out.find("step 45") != std::string::npos);
}

TEST_CASE("train: --stop-at then --resume gives the uninterrupted run's bits") {
  // Based: linear attention with the Taylor map and short convolutions; a hybrid stack; a window.
  const std::pair<const char*, const char*> models[] = {
      {"attention", " --threads 2"}, {"linear", ""}, {"mamba", ""}, {"window", " --window 5"},
      {"based", " --feature-map taylor --feature-dim 4 --short-conv 3"}, {"hybrid", " --mixers mamba,attention"},
      {"mamba2", " --head-dim 16 --state-size 16 --n-groups 2"}};
  for (auto [name, options] : models) {
    CAPTURE(name);
    const std::string n = name;
    const std::string model = n == "based" ? "linear" : n == "hybrid" ? "mamba" : n == "window" ? "attention" : n;
    const fs::path whole = scratch(std::string("whole-") + name), parts = scratch(std::string("parts-") + name);
    REQUIRE(run(small_run(model, whole, std::string(" --steps 50") + options)).code == 0);
    // Stop at a step that is neither a log, evaluation nor checkpoint step, and resume twice.
    Run a = run(small_run(model, parts, std::string(" --steps 50 --stop-at 13") + options));
    REQUIRE(a.code == 0);
    CHECK(a.out.find("paused at step 13/50") != std::string::npos);
    CHECK(json_value(parts / "summary.json", "status") == "\"paused\"");
    REQUIRE(run("train --resume '" + parts.string() + "' --stop-at 33").code == 0);
    Run c = run("train --resume '" + parts.string() + "'");
    REQUIRE(c.code == 0);
    CHECK(json_value(parts / "summary.json", "status") == "\"finished\"");
    CHECK(json_value(parts / "summary.json", "params_fnv1a") == json_value(whole / "summary.json", "params_fnv1a"));
    CHECK(metrics_without_timing(parts / "metrics.csv") == metrics_without_timing(whole / "metrics.csv"));
    std::string config = read_text(whole / "config.ini");
    for (size_t at; (at = config.find("whole-")) != std::string::npos;) config.replace(at, 6, "parts-");
    CHECK(read_text(parts / "config.ini") == config);
    // A finished run has nothing left to do.
    Run again = run("train --resume '" + parts.string() + "'");
    CHECK(again.code == 0);
    CHECK(again.out.find("nothing to do") != std::string::npos);
  }
}

TEST_CASE("train: --stop-at 0 checkpoints the initial weights; resuming gives the uninterrupted run") {
  const fs::path whole = scratch("init-whole"), parts = scratch("init-parts");
  REQUIRE(run(small_run("mamba", whole, " --steps 20")).code == 0);
  Run a = run(small_run("mamba", parts, " --steps 20 --stop-at 0"));
  REQUIRE(a.code == 0);
  CHECK(a.out.find("paused at step 0/20") != std::string::npos);
  CHECK(json_value(parts / "summary.json", "step") == "0");
  CHECK(json_value(parts / "summary.json", "final_train_loss") == "null");
  CHECK(read_text(parts / "metrics.jsonl").empty());
  const std::string init = json_value(parts / "summary.json", "params_fnv1a");
  CHECK(run("inspect '" + (parts / "last.h5").string() + "'").out.find("step 0") != std::string::npos);
  REQUIRE(run("train --resume '" + parts.string() + "'").code == 0);
  CHECK(json_value(parts / "summary.json", "params_fnv1a") == json_value(whole / "summary.json", "params_fnv1a"));
  CHECK(json_value(parts / "summary.json", "params_fnv1a") != init);
  CHECK(metrics_without_timing(parts / "metrics.csv") == metrics_without_timing(whole / "metrics.csv"));
  Run bad = run(small_run("mamba", scratch("init-bad"), " --steps 20 --stop-at=-1"));
  CHECK(bad.code == 2);
  CHECK(error_line(bad).find("--stop-at -1") != std::string::npos);
}

TEST_CASE("train: SIGINT and SIGTERM leave a checkpoint that resumes exactly") {
  const fs::path whole = scratch("sig-whole");
  const std::string many = " --steps 60 --eval-every 1000";
  REQUIRE(run(small_run("linear", whole, many)).code == 0);
  // TRILEMMA_WAIT_FOR_SIGNAL_AT makes the run wait for the signal after a known step (not a
  // log, evaluation or checkpoint step), so where it lands does not depend on timing.
  for (auto [sig, at] : {std::pair{SIGINT, 23}, std::pair{SIGTERM, 38}}) {
    CAPTURE(sig);
    const fs::path dir = scratch("sig-" + std::to_string(sig)), log = scratch("sig.log");
    const pid_t pid = spawn(words(small_run("linear", dir, many)), log, "TRILEMMA_WAIT_FOR_SIGNAL_AT=" + std::to_string(at));
    const std::string waiting = "waiting for a signal after step " + std::to_string(at);
    for (int i = 0; i < 12000 && read_text(log).find(waiting) == std::string::npos; ++i)  // 120 s at most
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(read_text(log).find(waiting) != std::string::npos);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK(json_value(dir / "summary.json", "status") == "\"interrupted\"");
    CHECK(json_value(dir / "summary.json", "step") == std::to_string(at));
    CHECK(no_temporary_files(dir));
    CHECK(run("inspect '" + (dir / "last.h5").string() + "'").out.find("step " + std::to_string(at) + ",") !=
          std::string::npos);
    REQUIRE(run("train --resume '" + dir.string() + "'").code == 0);
    CHECK(json_value(dir / "summary.json", "params_fnv1a") == json_value(whole / "summary.json", "params_fnv1a"));
    CHECK(metrics_without_timing(dir / "metrics.csv") == metrics_without_timing(whole / "metrics.csv"));
  }
}

TEST_CASE("train: early stop, progress output and lines") {
  const fs::path out = scratch("early");
  // Any accuracy reaches 0: the first evaluation stops the run.
  Run r = run(small_run("attention", out, " --steps 100 --early-stop 1e-9 --progress lines"));
  REQUIRE(r.code == 0);
  CHECK(json_value(out / "summary.json", "status") == "\"early_stop\"");
  CHECK(json_value(out / "summary.json", "step") == "20");
  CHECK(r.out.find("step 7/100  loss ") != std::string::npos);
  CHECK(r.out.find("valid step 20: token_acc ") != std::string::npos);
  CHECK(run("train --resume '" + out.string() + "'").out.find("nothing to do") != std::string::npos);

  // The live bar goes to stderr, redrawn in place.
  Run bar = run(small_run("attention", scratch("bar"), " --steps 20 --progress bar"));
  CHECK(bar.code == 0);
  CHECK(bar.err.find("\r\033[K20/20 [########################] 100%") != std::string::npos);
  CHECK(bar.err.find("ETA") != std::string::npos);
}

TEST_CASE("train: a run over a mix of pair counts stops only once every K reaches --early-stop") {
  // K = 1 is learned long before K = 6: the pooled accuracy (never below the lowest K's) would
  // stop the run at step 60 here, the lowest K's at step 200.
  const fs::path out = scratch("mix");
  Run r = run("train --model attention --n-heads 1 --pos learned --task mqar --vocab 64 --seq-len 24 --num-kv-pairs 1,6"
              " --d-model 32 --batch 16 --lr 0.003 --warmup 5 --eval-every 10 --eval-batches 2 --early-stop 0.2"
              " --steps 400 --progress none --threads 1 --out '" + out.string() + "'");
  REQUIRE(r.code == 0);
  std::ifstream metrics(out / "metrics.jsonl");
  double best = -1;
  int64_t first_at_threshold = -1, rows = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["split"] != "valid") continue;
    ++rows;
    REQUIRE(j.contains("acc@K=1"));
    REQUIRE(j.contains("acc@K=6"));
    const double lowest = std::min(j["acc@K=1"].get<double>(), j["acc@K=6"].get<double>());
    best = std::max(best, lowest);
    if (lowest >= 0.2 && first_at_threshold < 0) first_at_threshold = j["step"].get<int64_t>();
  }
  CHECK(rows > 1);
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  // best.h5 and the stop read the lowest K's accuracy, and the run stopped at the first
  // evaluation where it reached 0.2 (or ran its steps when none did).
  CHECK(summary["best_valid_acc"].get<double>() == best);
  CHECK(summary["status"] == (first_at_threshold >= 0 ? "early_stop" : "finished"));
  if (first_at_threshold >= 0) CHECK(summary["step"].get<int64_t>() == first_at_threshold);
  CHECK(summary["final_eval"].contains("acc@K=1"));
  CHECK(summary["final_eval"].contains("acc@K=6"));
}

TEST_CASE("train: the defaults are the calibrated recipe; a complete old config.ini keeps its own") {
  // Typed by hand, a run gets the recipe of docs/CALIBRATION.md.
  const fs::path fresh = scratch("recipe");
  REQUIRE(run(small_run("mamba", fresh, " --steps 1")).code == 0);
  const std::string text = read_text(fresh / "config.ini");
  for (const char* line : {"tie-embeddings = 1\n", "beta2 = 0.95\n", "schedule = wsd\n", "rescale-residual = 1\n"}) {
    CAPTURE(line);
    CHECK(text.find(line) != std::string::npos);
  }
  // A config.ini that states every option but rescale-residual (one written before it existed)
  // reads it as 0, as its run had it; a partial config file keeps the default.
  std::string old;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("rescale-residual", 0) != 0 && line.rfind("out ", 0) != 0)
      old += line + "\n";
  write_text(scratch("old.ini"), old);
  const fs::path again = scratch("again");
  REQUIRE(run("train --config '" + scratch("old.ini").string() + "' --out '" + again.string() + "'").code == 0);
  CHECK(read_text(again / "config.ini").find("rescale-residual = 0\n") != std::string::npos);
  write_text(scratch("partial.ini"), "model = mamba\ntask = mqar\nvocab = 64\nseq-len = 32\nsteps = 1\nd-model = 16\n"
                                     "threads = 1\nprogress = none\nnum-kv-pairs = 4\n");
  const fs::path partial = scratch("partial");
  REQUIRE(run("train --config '" + scratch("partial.ini").string() + "' --out '" + partial.string() + "'").code == 0);
  CHECK(read_text(partial / "config.ini").find("rescale-residual = 1\n") != std::string::npos);
}

TEST_CASE("train: metrics lines name their step") {
  CHECK(tri::train::metrics_line_step("{\"step\":42,\"split\":\"train\"}") == 42);
  CHECK(tri::train::metrics_line_step("42,train,1.5") == 42);
  CHECK(tri::train::metrics_line_step("step,split,loss") == -1);
  CHECK(tri::train::metrics_line_step("{\"step\":42,\"spl") == -1);  // torn by a crash
  CHECK(tri::train::metrics_line_step("42") == -1);
}

TEST_CASE("train: bad input is one line, the right exit code, and no files") {
  struct Bad {
    std::string args;  // after "train"
    int code;
    const char* names;  // a word the error must contain
  };
  const fs::path out = scratch("bad-out");
  const std::string o = " --out '" + out.string() + "'";
  const Bad cases[] = {
      {" --bogus 1", 2, "--bogus"},
      {" --steps abc", 2, "steps"},
      {" --steps 0", 2, "--steps"},
      {" --lr -1", 2, "--lr"},
      {" --model rnn", 2, "--model"},
      {" --d-model 30 --n-heads 4", 2, "--d-model 30 is not divisible by --n-heads 4"},
      {" --task copy --seq-len 10", 2, "--max-len 20"},
      {" --task mqar --seq-len 64 --num-kv-pairs 40", 2, "--num-kv-pairs 40"},
      {" --model attention --d-state 8", 2, "--d-state 8 is an option of mamba, not of model attention"},
      {" --model linear --window 8", 2, "--window 8 is an option of attention, not of model linear"},
      {" --model mamba --window 8", 2, "--window 8 is an option of attention, not of model mamba"},
      {" --window -1", 2, "--window -1 is out of range (allowed: 0..16777216)"},
      {" --task mqar --max-len 9", 2, "--max-len 9 is an option of copy, not of model attention on task mqar"},
      {" --rope-style interleaved", 2, "--rope-style 'interleaved' is not supported (allowed: half)"},
      {" --lr 0.01 --min-lr 0.1", 2, "--min-lr 0.1 is out of range (allowed: 0..0.01, at most --lr)"},
      {" --model mamba --pos rope", 2, "--pos 'rope' is not allowed for model mamba (allowed: none)"},
      {" --task mqar --seq-len 64 --pos learned --max-seq-len 32", 2,
       "--seq-len 64 exceeds the learned positions (--max-seq-len 32; allowed: at most 32 positions)"},
      {" --schedule linear", 2, "--schedule 'linear' unknown (allowed: constant, cosine, wsd)"},
      {" --optimizer adam", 2, "--optimizer 'adam' unknown (allowed: adamw, sgd)"},
      {" --pos relative", 2, "--pos 'relative' unknown (allowed: none, sinusoidal, learned, rope, alibi)"},
      {" --bias maybe", 2, "bias"},
      {" --resume /nonexistent/run", 2, "--resume"},
      {" --threads -1", 2, "--threads"},
  };
  for (const Bad& b : cases) {
    CAPTURE(b.args);
    Run r = run("train" + b.args + o);
    CHECK(r.code == b.code);
    CHECK(error_line(r).find(b.names) != std::string::npos);
    CHECK(!fs::exists(out));
  }
  // An unwritable output folder (its parent is a file): exit 1, nothing written.
  Run r = run("train --steps 2 --out /dev/null/run");
  CHECK(r.code == 1);
  CHECK(error_line(r).find("/dev/null/run") != std::string::npos);

  // An existing run is never overwritten; --resume continues it instead.
  const fs::path done = scratch("bad-existing");
  REQUIRE(run(small_run("attention", done, " --steps 3")).code == 0);
  const std::string before = read_text(done / "metrics.csv");
  r = run(small_run("attention", done, " --steps 3"));
  CHECK(r.code == 2);
  CHECK(error_line(r).find("already holds a run") != std::string::npos);
  CHECK(read_text(done / "metrics.csv") == before);
  // Resuming with a config that changes what was computed is refused.
  r = run("train --resume '" + done.string() + "' --lr 0.5");
  CHECK(r.code == 2);
  CHECK(error_line(r).find("--lr 0.5 differs from the run's 0.003") != std::string::npos);

  // A missing, truncated or foreign last.h5: exit 1, the run folder unchanged.
  const fs::path broken = scratch("bad-broken");
  REQUIRE(run(small_run("mamba", broken, " --steps 3")).code == 0);
  const std::string ckpt = read_text(broken / "last.h5");
  fs::remove(broken / "last.h5");
  r = run("train --resume '" + broken.string() + "'");
  CHECK(r.code == 1);
  CHECK(error_line(r).find("no such file") != std::string::npos);
  write_text(broken / "last.h5", ckpt.substr(0, ckpt.size() / 2));
  r = run("train --resume '" + broken.string() + "'");
  CHECK(r.code == 1);
  CHECK(error_line(r).find("not a valid HDF5 file") != std::string::npos);
  // Another model's parameters under this run's config.
  fs::copy_file(done / "last.h5", broken / "last.h5", fs::copy_options::overwrite_existing);
  std::system(("/usr/bin/python3 -c 'import h5py, sys\n"
               "a, b = h5py.File(sys.argv[1], \"r+\"), h5py.File(sys.argv[2], \"r\")\n"
               "[a[\"config\"].attrs.modify(k, v) for k, v in b[\"config\"].attrs.items()]' '" +
               (broken / "last.h5").string() + "' '" + (broken / "best.h5").string() + "'").c_str());
  const std::string metrics = read_text(broken / "metrics.csv");
  r = run("train --resume '" + broken.string() + "'");
  CHECK(r.code == 1);
  CHECK(error_line(r).find("last.h5") != std::string::npos);
  CHECK(read_text(broken / "metrics.csv") == metrics);
  CHECK(no_temporary_files(broken));
}
