// trilemma train: a model on a task, into a run folder (train/trainer.hpp); or --resume DIR to
// continue a run from DIR/last.h5 with the config saved in it.
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>

#include "framework/system/distributed.hpp"
#include "framework/runtime/runtime.hpp"
#include "framework/io/atomic_file.hpp"
#include "cli/cli.hpp"
#include "cli/cli_options.hpp"
#include "framework/io/folder_lock.hpp"
#include "train/run_config.hpp"
#include "train/trainer.hpp"

namespace tri::cli {

using namespace tri::train;

namespace fs = std::filesystem;

namespace {

// The options that make up a run's config (saved with it), in --help order.
po::options_description run_options() {
  po::options_description d(100);
  d.add(model_options()).add(task_options()).add(training_options());
  return d;
}

// What may differ when a run is resumed: how long it runs and how it reports, not what it
// computes up to the step it stopped at; and the runtime.
const std::set<std::string> kResumeMayChange = {"steps", "eval-every", "eval-batches", "checkpoint-every",
                                                "keep", "log-every", "progress", "early-stop", "eval-lengths",
                                                "on-nonfinite", "detect-anomaly"};
const std::set<std::string> kRuntime = {"threads", "gemm"};

bool holds_run(const fs::path& dir) {
  for (const char* f : {"config.ini", "last.h5", "metrics.jsonl", "summary.json"})
    if (fs::exists(dir / f)) return true;
  return false;
}

std::string default_run_name(const RunConfig& c) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return c.model.name() + "-" + c.task.task + "-" + stamp;
}

// A new run's config, from the options given; its folder is created only after every check.
RunConfig new_run(const po::variables_map& vm) {
  RunConfig c = new_run_config(vm);
  RunSettings& r = c.run;
  if (r.run_name.empty())
    r.run_name = r.out.empty() ? default_run_name(c) : fs::path(r.out).lexically_normal().filename().string();
  if (r.run_name.find('/') != std::string::npos)
    throw UsageError("--run-name '" + r.run_name + "' contains '/' (allowed: a folder name)");
  if (r.out.empty()) r.out = "checkpoints/" + r.run_name;
  const fs::path dir = r.out;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError("--out '" + dir.string() + "' is a file (allowed: a folder, new or empty)");
  if (holds_run(dir))
    throw UsageError("--out '" + dir.string() + "' already holds a run (continue it with --resume " +
                     dir.string() + ", or choose another --out)");
  return c;
}

// A resumed run's config: the saved one, with the options that may change taken from the
// command line; any other option given must agree with the saved value.
RunConfig resumed_run(const po::variables_map& vm, const std::string& dir, const CheckpointData& meta) {
  RunConfig c;
  try {
    c = RunConfig::from_text(meta.config);
  } catch (const Error& e) {
    throw Error("checkpoint " + dir + "/last.h5: config: " + e.what());
  }
  TextMap saved;
  write_text(c, saved);
  std::string allowed;
  for (const std::string& k : kResumeMayChange) allowed += (allowed.empty() ? "--" : ", --") + k;
  const po::options_description options = run_options();
  for (const auto& opt : options.options()) {
    const std::string& key = opt->long_name();
    if (!given(vm, key) || kResumeMayChange.count(key)) continue;
    const std::string value = given_text(vm, key);
    auto it = saved.find(key);
    if (it == saved.end() || it->second != value)
      throw UsageError("--" + key + " " + value + " differs from the run's " +
                       (it == saved.end() ? std::string("(unset)") : it->second) +
                       "; a resumed run keeps its config (may change: " + allowed + ", --threads, --gemm)");
  }
  read_given(vm, c, kResumeMayChange);
  read_given(vm, c, kRuntime);  // the run's own runtime unless given now
  as_usage_error([&] {
    c.resolve();
    c.validate();
    return 0;
  });
  if (c.runtime.threads != std::stoll(saved.at("threads")) && dist::rank() == 0)
    std::fprintf(stderr, "note: resuming with %lld threads, the run used %s: the last bits may differ\n",
                 (long long)c.runtime.threads, saved.at("threads").c_str());
  c.run.out = dir;
  return c;
}

// A job of P ranks: each takes batch / P rows of every batch, with its own --threads.
void check_ranks(const RunConfig& c) {
  const int64_t P = dist::size();
  if (c.run.batch < P)
    throw UsageError("--batch " + std::to_string(c.run.batch) + " is smaller than the " + std::to_string(P) +
                     " MPI ranks (allowed: a global batch of at least one row per rank)");
  const int64_t cores = runtime_info().physical_cores, local = dist::local_size();
  if (dist::rank() == 0 && local * c.runtime.threads > cores)
    std::fprintf(stderr, "note: %lld ranks x %lld threads on this machine, which has %lld cores: oversubscribed, "
                 "slower than %lld x %lld (set --threads)\n", (long long)local, (long long)c.runtime.threads,
                 (long long)cores, (long long)local, (long long)std::max<int64_t>(1, cores / local));
}

}  // namespace

RunConfig new_run_config(const po::variables_map& vm) {
  RunConfig c = as_usage_error([&] {
    return RunConfig::of(vm["model"].as<std::string>(), vm["task"].as<std::string>());
  });
  read_given(vm, c);
  // A config.ini of an earlier trilemma states every option of its time: the options added
  // since read as they were then (rescale-residual 0), so the file repeats its run.
  read_unstated_as_before(c, [&](const std::string& key) { return given(vm, key); });
  if (c.model.hybrid() && !vm["model"].defaulted() && vm["model"].as<std::string>() != c.model.family)
    throw UsageError("--model " + vm["model"].as<std::string>() + " differs from the first entry of --mixers " +
                     c.model.mixers + " (allowed: that entry, or --model left out)");
  refuse_foreign(vm, c, run_options(), "model " + c.model.name() + " on task " + c.task.task);
  as_usage_error([&] {
    c.resolve();
    c.validate();
    return 0;
  });
  return c;
}

void train_options(CommandOptions& o) {
  o.named.add(run_options());
  o.named.add_options()
      ("resume", po::value<std::string>()->value_name("DIR"),
       "continue the run in DIR from DIR/last.h5 with its saved config")
      ("stop-at", po::value<int64_t>()->value_name("STEP"),
       "pause at this step (checkpoint, then exit; continue with --resume); 0 = before the first "
       "step, a checkpoint of the initial weights")
      ("profile", po::bool_switch(),
       "print where the step time goes at the end: ms per step of each op kind, forward and "
       "backward, over the steps after the first two, and the GFLOP/s of those that count FLOPs");
}

int run_train(const po::variables_map& vm) {
  const int64_t stop_at = vm.count("stop-at") ? vm["stop-at"].as<int64_t>() : -1;  // -1: never
  if (vm.count("stop-at") && stop_at < 0)
    throw UsageError("--stop-at " + std::to_string(stop_at) + " is negative (allowed: a step, 0 = before the first)");

  // Under mpirun: one of P ranks, each with a slice of every batch; rank 0 prints and writes.
  dist::init();
  const bool writer = dist::rank() == 0;
  if (!writer && !std::freopen("/dev/null", "w", stdout)) throw Error("cannot silence the output of rank " + std::to_string(dist::rank()));
  RunConfig config;
  std::string checkpoint;
  std::optional<FolderLock> lock;  // one process per run folder, from before its files are read
  if (vm.count("resume")) {
    const std::string dir = vm["resume"].as<std::string>();
    if (!fs::is_directory(dir)) throw UsageError("--resume '" + dir + "' is not a folder (allowed: a run folder)");
    if (writer) lock.emplace(dir, ".lock", "run folder");
    checkpoint = dir + "/last.h5";
    config = resumed_run(vm, dir, read_checkpoint_meta(checkpoint));
  } else {
    config = new_run(vm);
  }
  config.runtime.apply();
  if (dist::size() > 1) check_ranks(config);
  const std::string dir = config.run.out;
  std::optional<CheckpointSizeLimit> limit;  // a resumed model is no larger than its checkpoint
  if (!checkpoint.empty()) limit.emplace(checkpoint);
  Trainer trainer(config, dir);  // builds before anything is written
  if (!checkpoint.empty()) trainer.resume(checkpoint);
  limit.reset();
  trainer.set_profile(vm["profile"].as<bool>());
  dist::barrier();  // every rank has checked the folder before rank 0 writes into it
  if (!writer) return trainer.run(stop_at);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the run folder " + dir + ": " + ec.message());
  if (!lock) lock.emplace(dir, ".lock", "run folder");
  remove_dead_temporaries(dir);  // a killed run's half-written files
  TextMap text;
  write_text(config, text);
  write_text_atomically(dir + "/config.ini", config_file_text(text));
  std::printf("%s\n%s run %s\nconfig (saved as %s/config.ini):\n", runtime_summary().c_str(),
              checkpoint.empty() ? "new" : "resumed", dir.c_str(), dir.c_str());
  for (const auto& [k, v] : text) std::printf("  %s = %s\n", k.c_str(), v.c_str());
  return trainer.run(stop_at);
}

}  // namespace tri::cli
