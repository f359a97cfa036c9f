// trilemma train: a model on a task, into a run folder (train/trainer.hpp); or --resume DIR to
// continue a run from DIR/last.h5 with the config saved in it.
#include <ctime>
#include <filesystem>
#include <set>

#include "framework/runtime.hpp"
#include "train/atomic_file.hpp"
#include "train/cli.hpp"
#include "train/run_config.hpp"
#include "train/trainer.hpp"

namespace tri::cli {

namespace fs = std::filesystem;

namespace {

// The options that make up a run's config (saved with it), in --help order.
po::options_description run_options() {
  po::options_description d(100);
  add_model_options(d);
  add_task_options(d);
  add_training_options(d);
  d.add_options()
      ("out", po::value<std::string>()->value_name("DIR")->default_value(""),
       "run folder; empty = checkpoints/<run-name>")
      ("run-name", po::value<std::string>()->value_name("NAME")->default_value(""),
       "empty = the --out folder's name, or <model>-<task>-<date>-<time>");
  return d;
}

// What may differ when a run is resumed: how long it runs and how it reports, not what it
// computes up to the step it stopped at.
const std::set<std::string> kResumeMayChange = {"steps", "eval-every", "eval-batches", "checkpoint-every",
                                                "keep", "log-every", "progress", "early-stop"};

bool holds_run(const fs::path& dir) {
  for (const char* f : {"config.ini", "last.h5", "metrics.jsonl", "summary.json"})
    if (fs::exists(dir / f)) return true;
  return false;
}

std::string default_run_name(const ConfigMap& c) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return c.at("model") + "-" + c.at("task") + "-" + stamp;
}

// A new run's resolved config; its folder is created only after every check passed.
ConfigMap new_run(const po::variables_map& vm, const po::options_description& opts) {
  ConfigMap c = config_text(vm, opts);
  c["threads"] = std::to_string(vm["threads"].as<int>());
  c["gemm"] = vm["gemm"].as<std::string>();
  resolve(c);                  // validates task and model
  (void)train_config(c);       // and the training options
  if (c["run-name"].empty())
    c["run-name"] = c["out"].empty() ? default_run_name(c) : fs::path(c["out"]).lexically_normal().filename().string();
  if (c["run-name"].find('/') != std::string::npos)
    throw UsageError("--run-name '" + c["run-name"] + "' contains '/' (allowed: a folder name)");
  if (c["out"].empty()) c["out"] = "checkpoints/" + c["run-name"];
  const fs::path dir = c["out"];
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
ConfigMap resumed_run(const po::variables_map& vm, const po::options_description& opts,
                      const std::string& dir, const CheckpointData& meta) {
  ConfigMap c = meta.config;
  const ConfigMap given_text = config_text(vm, opts);
  for (const auto& [key, given] : given_options(vm, opts)) {
    if (!given) continue;
    const std::string& value = given_text.at(key);
    if (kResumeMayChange.count(key)) {
      c[key] = value;
    } else if (!c.count(key) || c[key] != value) {
      std::string allowed;
      for (const std::string& k : kResumeMayChange) allowed += (allowed.empty() ? "--" : ", --") + k;
      throw UsageError("--" + key + " " + value + " differs from the run's " +
                       (c.count(key) ? c[key] : "(unset)") + "; a resumed run keeps its config (may change: " +
                       allowed + ", --threads, --gemm)");
    }
  }
  // Runtime: the run's own unless given now (results are bit-identical at the same thread count).
  for (const char* key : {"threads", "gemm"})
    if (!vm[key].defaulted()) c[key] = key == std::string("threads") ? std::to_string(vm[key].as<int>())
                                                                     : vm[key].as<std::string>();
  try {
    set_gemm_backend(c.at("gemm"));
    set_threads(std::stoi(c.at("threads")));
  } catch (const std::exception& e) {
    throw Error("checkpoint " + dir + "/last.h5: config: bad threads or gemm (" + e.what() + ")");
  }
  if (c.count("threads") && meta.config.count("threads") && c["threads"] != meta.config.at("threads"))
    std::fprintf(stderr, "note: resuming with %s threads, the run used %s: the last bits may differ\n",
                 c["threads"].c_str(), meta.config.at("threads").c_str());
  resolve(c);
  (void)train_config(c);
  c["out"] = dir;
  return c;
}

}  // namespace

void train_options(CommandOptions& o) {
  o.named.add(run_options());
  o.named.add_options()
      ("resume", po::value<std::string>()->value_name("DIR"),
       "continue the run in DIR from DIR/last.h5 with its saved config")
      ("stop-at", po::value<long>()->value_name("STEP")->default_value(0),
       "pause at this step (checkpoint, then exit; continue with --resume); 0 = never");
}

int run_train(const po::variables_map& vm) {
  const po::options_description opts = run_options();
  const long stop_at = vm["stop-at"].as<long>();
  if (stop_at < 0) throw UsageError("--stop-at " + std::to_string(stop_at) + " is negative (allowed: 0 = never, or a step)");

  ConfigMap config;
  std::string checkpoint;
  if (vm.count("resume")) {
    const std::string dir = vm["resume"].as<std::string>();
    if (!fs::is_directory(dir)) throw UsageError("--resume '" + dir + "' is not a folder (allowed: a run folder)");
    checkpoint = dir + "/last.h5";
    config = resumed_run(vm, opts, dir, read_checkpoint_meta(checkpoint));
  } else {
    config = new_run(vm, opts);
  }
  const std::string dir = config.at("out");
  Trainer trainer(config, dir);  // builds before anything is written
  if (!checkpoint.empty()) trainer.resume(checkpoint);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the run folder " + dir + ": " + ec.message());
  write_text_atomically(dir + "/config.ini", config_file_text(config));
  std::printf("%s run %s\nconfig (saved as %s/config.ini):\n", checkpoint.empty() ? "new" : "resumed",
              dir.c_str(), dir.c_str());
  for (const auto& [k, v] : config) std::printf("  %s = %s\n", k.c_str(), v.c_str());
  return trainer.run(stop_at);
}

}  // namespace tri::cli
