// trilemma bench train: the training step (forward, cross-entropy, backward, clipping, AdamW) of
// whole models at the sizes the PyTorch comparison uses (bench/vs_torch.py, docs/BENCHMARKS.md).
// Each (configuration, model) row runs in a child process of its own, so its peak RSS is its
// own. Per row: the median step time over --repeats timed steps (after two warm-up steps), tokens
// per second, peak RSS, the GEMM-class FLOPs of a step (sgemm calls and the attention kernel) and
// their rate as a share of the sgemm peak, measured in the row's process first (square 2048).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "bench/bench.hpp"
#include "data/tasks.hpp"
#include "framework/config/registry.hpp"
#include "framework/core/autograd.hpp"
#include "framework/ops/ops.hpp"
#include "framework/system/process.hpp"
#include "framework/runtime/profile.hpp"
#include "framework/core/rng.hpp"
#include "framework/runtime/runtime.hpp"
#include "models/family.hpp"
#include "models/layers.hpp"
#include "models/lm.hpp"
#include "train/run_config.hpp"
#include "train/trainer.hpp"

namespace tri::bench {

using namespace tri::train;

namespace {

// The sizes of the comparison. Attention and linear attention: pre-norm blocks with a GELU MLP,
// biases on the projections, learned positions; Mamba: its blocks alone (no MLP, as in the
// paper). Vocabulary 64, the induction task.
// The experiments' sizes (E64, E256, E1024: the models the grids train): d 64, 2 layers, no MLP,
// tied embeddings, 1 head with learned positions (Mamba: none), no biases, vocabulary 512, batch
// 64; the task the grids train at that length: MQAR with T / 16 pairs, and from T 512 (where
// MQAR needs a vocabulary above T) the needle, as the grids at T 1024 do.
struct TrainSize {
  std::string name, summary;  // the --configs value; for --help
  int64_t d_model, n_layers, heads, seq_len, batch;
  bool experiment = false;
};

TrainSize train_size(const char* name, int64_t d_model, int64_t n_layers, int64_t heads, int64_t seq_len,
                     int64_t batch, bool experiment = false) {
  const std::string summary = "d " + std::to_string(d_model) + ", " + std::to_string(n_layers) + " layers, " +
                              std::to_string(heads) + (heads == 1 ? " head" : " heads") + ", T " +
                              std::to_string(seq_len) + ", B " + std::to_string(batch) +
                              (experiment ? "; the experiments' model: no MLP, tied, vocabulary 512" : "");
  return {name, summary, d_model, n_layers, heads, seq_len, batch, experiment};
}

// Adding a size: one line here.
Registry<TrainSize>& train_sizes() {
  static Registry<TrainSize> r("--configs", {train_size("S", 128, 2, 4, 256, 16),
                                             train_size("W", 512, 4, 8, 256, 8),
                                             train_size("L1024", 128, 2, 4, 1024, 4),
                                             train_size("L2048", 128, 2, 4, 2048, 4),
                                             train_size("L4096", 128, 2, 4, 4096, 4),
                                             train_size("E64", 64, 2, 1, 64, 64, true),
                                             train_size("E256", 64, 2, 1, 256, 64, true),
                                             train_size("E1024", 64, 2, 1, 1024, 64, true)});
  return r;
}
constexpr int kWarmupSteps = 2;

constexpr int64_t kExperimentVocab = 512;

std::string task_of(const TrainSize& size) {
  if (!size.experiment) return "induction";
  return size.seq_len < kExperimentVocab ? "mqar" : "needle";
}

RunConfig train_config(const TrainSize& size, const std::string& family, const std::string& precision) {
  RunConfig c = RunConfig::of(family, task_of(size));
  const bool heads = dynamic_cast<HeadOptions*>(c.model.mixer.get()) != nullptr;
  TextMap text = {{"vocab", size.experiment ? std::to_string(kExperimentVocab) : "64"},
                  {"d-model", std::to_string(size.d_model)},
                  {"n-layers", std::to_string(size.n_layers)},
                  {"seq-len", std::to_string(size.seq_len)},
                  {"batch", std::to_string(size.batch)},
                  {"precision", precision},
                  {"mlp", heads && !size.experiment ? "gelu" : "none"}};
  // The comparison's rows (S, W, L) keep PyTorch's models' untied head (bench/torch_models.py);
  // the experiments' rows are tied, as the recipe is.
  text["tie-embeddings"] = size.experiment ? "1" : "0";
  if (size.experiment && task_of(size) == "mqar") text["num-kv-pairs"] = std::to_string(size.seq_len / 16);
  if (heads) {
    text["n-heads"] = std::to_string(size.heads);
    text["bias"] = size.experiment ? "0" : "1";
    text["pos"] = "learned";
  }
  return as_usage_error([&] {
    read_text(c, text, false);
    c.resolve();
    c.validate();
    return c;
  });
}

rusage self_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u;
}
double peak_rss_mib() { return double(self_usage().ru_maxrss) / 1024.0; }  // ru_maxrss is in KiB

// GFLOP/s of square n x n sgemm on the selected backend: the median of `repeats` timed calls.
double sgemm_peak_gflops(int64_t n, int repeats) {
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  std::vector<double> s;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sgemm(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    if (r > 0) s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * double(n) * double(n) * double(n) / median(s) * 1e-9;
}

// One row, in this process: the model trained for kWarmupSteps + `steps` steps on batches drawn
// before the clock starts.
// With micro > 1 the step runs as `micro` forward and backward passes over B / micro rows each,
// their gradients summed (the loss of each scaled by 1 / micro), then one clip and one AdamW, as
// `train --micro-batches` runs it: each pass's tensors micro times smaller.
Json train_row(const TrainSize& size, const std::string& family, int steps, bool profile, int micro,
               const std::string& precision) {
  const RunConfig c = train_config(size, family, precision);
  set_gemm_precision(precision_of(precision));  // the peak below is that precision's GEMM's
  const double peak = sgemm_peak_gflops(2048, 5);  // first: the row's process is still fresh
  LanguageModel model(c.model, seed_mix(uint64_t(c.run.seed), 0));  // as train initialises it
  const std::vector<Parameter> params = model.parameters();
  std::unique_ptr<Optimizer> opt = make_optimizer(c.optimizer, model);
  std::vector<Batch> batches;
  const uint64_t stream = stream_seed(c.run.seed, "train");
  for (int s = 0; s < (kWarmupSteps + steps) * micro; ++s)
    batches.push_back(make_batch(c.task, stream, uint64_t(s), size.batch / micro));
  std::vector<double> ms;
  int64_t flops = 0, faults = 0, activations = 0;
  for (int s = 0; s < kWarmupSteps + steps; ++s) {
    if (s == kWarmupSteps) {
      profile_enable(profile);
      profile_reset();
    }
    const int64_t f0 = flop_count(), faults0 = self_usage().ru_minflt;
    const auto t0 = std::chrono::steady_clock::now();
    profile_mark();
    const int64_t live0 = memory_live_bytes();
    for (int m = 0; m < micro; ++m) {
      const Batch& b = batches[size_t(s * micro + m)];
      Tensor loss = cross_entropy(model.forward(b.inputs), b.targets);
      if (micro > 1) loss = mul_scalar(loss, 1.f / float(micro));
      activations = memory_live_bytes() - live0;
      backward(loss);
    }
    {
      ProfilePhase p("clip_grad_norm");
      clip_grad_norm(params, c.optimizer.clip);
    }
    {
      ProfilePhase p("adamw");
      opt->step();
      opt->zero_grad();
    }
    if (s >= kWarmupSteps) {
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      flops = flop_count() - f0;
      faults += self_usage().ru_minflt - faults0;
    }
  }
  profile_enable(false);
  const double med = median(ms);
  Json row = {{"config", size.name},
              {"model", family},
              {"task", task_of(size)},
              {"batch", size.batch},
              {"micro_batches", micro},
              {"precision", precision},
              {"seq_len", size.seq_len},
              {"d_model", size.d_model},
              {"n_layers", size.n_layers},
              {"n_heads", dynamic_cast<HeadOptions*>(c.model.mixer.get()) ? Json(size.heads) : Json(nullptr)},
              {"mlp", c.model.mlp},
              {"params", model.num_parameters()},
              {"steps", steps},
              {"ms_median", med},
              {"ms", ms},
              {"tokens_per_s", double(size.batch * size.seq_len) / med * 1e3},
              {"peak_rss_mib", peak_rss_mib()},
              {"peak_tensor_mib", double(memory_peak_bytes()) / (1 << 20)},  // of that, in tensors
              {"activation_mib", double(activations) / (1 << 20)},  // what the forward leaves for backward
              {"gflop_per_step", double(flops) * 1e-9},
              {"gflops", double(flops) * 1e-6 / med},
              {"sgemm_peak_gflops", peak},
              {"peak_share", double(flops) * 1e-6 / med / peak},
              {"page_faults_per_step", double(faults) / steps},  // fresh pages: memory not reused
              {"threads", num_threads()},
              {"gemm", runtime_info().gemm_backend}};
  if (profile) {
    Json ops = Json::array();
    for (const OpTime& r : profile_table())
      ops.push_back({{"op", r.op},
                     {"calls", double(r.calls) / steps},
                     {"forward_ms", r.forward_ms / steps},
                     {"backward_ms", r.backward_ms / steps},
                     {"gflop", double(r.flops) * 1e-9 / steps}});  // counted in its windows
    row["profile"] = ops;
    row["profile_text"] = profile_report(steps, peak);
  }
  return row;
}

// Runs `copies` children of /proc/self/exe with `args` at once (as a sweep's lanes run) and
// returns their stdouts; throws when one exits non-zero.
std::vector<std::string> run_children(const std::vector<std::string>& args, int copies, const std::string& label) {
  std::vector<process::Child> children;
  for (int i = 0; i < copies; ++i) {
    process::Launch l;
    l.argv = args;
    l.capture_stdout = true;
    children.push_back(process::launch(l));
  }
  std::vector<std::string> out;
  for (const process::Child& child : children) out.push_back(process::read_all(child.stdout_fd));
  for (const process::Child& child : children)
    if (const process::Exit e = process::wait_for(child.pid); !e.ok())
      throw Error("bench train: the row '" + label + "' failed (" + e.text() + ")");
  return out;
}

// One row's result: a single child's, or with several at once the first's, its step time the
// median of their medians and each one's beside it.
Json combined_row(const std::vector<std::string>& outputs) {
  Json row = Json::parse(outputs.at(0));
  std::vector<double> medians;
  for (const std::string& o : outputs) medians.push_back(Json::parse(o)["ms_median"].get<double>());
  row["processes"] = int64_t(outputs.size());
  if (outputs.size() > 1) {
    row["ms_median_per_process"] = medians;
    row["ms_median"] = median(medians);
    row["tokens_per_s"] = row["batch"].get<double>() * row["seq_len"].get<double>() / median(medians) * 1e3;
  }
  return row;
}

void print_row(const Json& r) {
  const double share = r["peak_share"].get<double>();
  const int64_t processes = r.value("processes", int64_t(1));
  const std::string config = r["config"].get<std::string>() + (processes > 1 ? " x" + std::to_string(processes) : "");
  std::printf("%-8s %-10s %10lld %10.1f %11.0f %9.0f %8.1f %6.0f%%\n", config.c_str(),
              r["model"].get<std::string>().c_str(), (long long)r["params"].get<int64_t>(),
              r["ms_median"].get<double>(), r["tokens_per_s"].get<double>(), r["peak_rss_mib"].get<double>(),
              r["gflops"].get<double>(), 100 * share);
  if (r.contains("profile_text")) std::printf("%s\n", r["profile_text"].get<std::string>().c_str());
  std::fflush(stdout);
}

}  // namespace

std::string train_sizes_help(const std::string& lead) { return train_sizes().help(lead); }

int bench_train(const po::variables_map& vm) {
  const std::vector<std::string> families = family_list(vm["models"].as<std::string>());
  std::vector<const TrainSize*> sizes;
  for (const std::string& n : split(vm.count("configs") ? vm["configs"].as<std::string>()
                                                                : joined(train_sizes().names(), ","),
                                    ','))
    sizes.push_back(as_usage_error([&] { return &train_sizes().find(n); }));
  const std::string precision = vm["precision"].as<std::string>();
  set_gemm_precision(precision_of(precision));  // bf16 on a CPU without it: refused before any row runs
  set_gemm_precision(Precision::fp32);
  for (const TrainSize* s : sizes)
    for (const std::string& f : families) train_config(*s, f, precision);  // every row checked before any runs
  const int steps = bench_repeats(vm, 10);
  const int processes = vm["processes"].as<int>();
  const bool json = vm["json"].as<bool>(), profile = vm["profile"].as<bool>();
  const int micro = vm["micro-batches"].as<int>();
  for (const TrainSize* s : sizes)
    if (s->batch % micro != 0)
      throw UsageError("--micro-batches " + std::to_string(micro) + " does not divide " + s->name + "'s batch of " +
                       std::to_string(s->batch));
  if (vm["row"].as<bool>()) {  // a child: one row, one JSON line
    std::printf("%s\n", train_row(*sizes.at(0), families.at(0), steps, profile, micro, precision).dump().c_str());
    return 0;
  }
  // The parent runs no OpenMP region: its idle threads would compete with the row's under
  // OMP_WAIT_POLICY=active.
  if (!json)
    std::printf("train step, median of %d steps after %d warm-up; peak = share of the sgemm peak (2048^3) "
                "measured in the row's process; load average %.2f\n%-8s %-10s %10s %10s %11s %9s %8s %7s\n",
                steps, kWarmupSteps, load_average(), "config", "model", "params", "ms/step", "tokens/s",
                "RSS MiB", "GFLOP/s", "peak");
  for (const TrainSize* s : sizes)
    for (const std::string& f : families) {
      std::vector<std::string> args = {"trilemma", "bench", "train", "--row", "--configs", s->name,
                                       "--models", f, "--repeats", std::to_string(steps), "--micro-batches",
                                       std::to_string(micro), "--precision", precision, "--threads",
                                       std::to_string(num_threads()), "--gemm", runtime_info().gemm_backend,
                                       "--json"};
      if (profile) args.push_back("--profile");
      const Json r = combined_row(run_children(args, processes, std::string(s->name) + " " + f));
      if (json) {
        std::printf("%s\n", r.dump().c_str());
        std::fflush(stdout);
      } else {
        print_row(r);
      }
    }
  return 0;
}

}  // namespace tri::bench
