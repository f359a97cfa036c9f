// trilemma bench scaling: the book's complexity columns, measured. For each model family and
// sequence length T, three rows:
//   model   one training step of a whole LanguageModel on a batch of the induction task
//           (forward, cross-entropy, backward, clipping, AdamW), and its peak extra memory; the
//           lengths are timed in interleaved rounds;
//   mixer   forward + backward of one mixer alone (bench mixers' measure_mixer);
//   decode  the time per generated token once the recurrent state holds T tokens (KV cache,
//           (S, z), (conv state, h)), one sequence, fed token by token through step().
// `bench decode` prints the decode rows alone, by default over contexts 128 .. 8192.
// The families share d_model, layers and heads; no MLP, so the blocks differ by the mixer only;
// RoPE where the family takes it (attention, linear), else no positions (Mamba): any T works.
// --window W adds attention with a sliding window of W as one more series after the others
// (its rows carry "window": W): O(T W) to train, a KV cache of at most W rows to decode.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "bench/bench.hpp"
#include "data/tasks.hpp"
#include "framework/core/argmax.hpp"
#include "framework/core/autograd.hpp"
#include "framework/optim/optim.hpp"
#include "framework/runtime/runtime.hpp"
#include "models/attention.hpp"
#include "models/family.hpp"
#include "models/layers.hpp"
#include "models/lm.hpp"
#include "framework/io/atomic_file.hpp"
#include "train/run_config.hpp"

namespace tri::bench {

using namespace tri::train;

namespace {

constexpr int64_t kVocab = 64;
constexpr const char* kTask = "induction";  // its seq-len can be any T >= 4

struct Settings {
  std::vector<std::string> families;
  std::vector<int64_t> lens;  // ascending
  int64_t batch, d_model, n_layers, heads, window;
  int repeats, decode_tokens;
};

struct Measurement {
  std::string family, what, pos;  // family: the variant (ModelConfig::variant)
  int64_t window, n_layers;  // attention's sliding window; 0: none (the row has no window field)
  int64_t T, batch;
  double ms;
  std::optional<int64_t> peak_bytes;  // none for decode
  int64_t state_bytes;                // the model's, per sequence, after T tokens
  std::vector<int64_t> layer_state_bytes;  // the same, per layer
  int repeats;                        // timings the median is taken over
};


// cfg (a family or a stack) at the bench's shape: no MLP, an untied head, RoPE where every
// layer's family takes it, else no positions; then `overrides` (a variant's own options) on top.
ModelConfig scaling_model(ModelConfig cfg, const Settings& s, const TextMap& overrides = {}) {
  cfg.vocab = kVocab;
  cfg.d_model = s.d_model;
  cfg.n_layers = s.n_layers;
  cfg.mlp = "none";
  cfg.tie_embeddings = false;  // the shape the committed measurements have: a head of its own
  cfg.pos = "rope";
  for (const std::string& f : cfg.layer_families()) {
    const std::vector<std::string>& positions = family_spec(f).positions;
    if (std::find(positions.begin(), positions.end(), "rope") == positions.end()) cfg.pos = "none";
  }
  read_text(cfg, {{"n-heads", std::to_string(s.heads)}}, false);  // every family with heads (a shared key)
  cfg.max_seq_len = s.lens.back() + s.decode_tokens;
  return as_usage_error([&] {
    read_text(cfg, overrides, false);
    return cfg.checked();
  });
}

ModelConfig family_model(const std::string& family, const Settings& s, int64_t window = 0) {
  ModelConfig cfg = ModelConfig::of(family);
  if (window) cfg.options<MultiHeadAttentionOptions>().window = window;
  return scaling_model(cfg, s);
}

// --variant MIXERS[:KEY=VALUE...]: a stack (mixers joined by '+') and its options.
ModelConfig variant_model(const std::string& spec, const Settings& s) {
  std::vector<std::string> parts;
  for (size_t start = 0; start <= spec.size();) {
    const size_t colon = std::min(spec.find(':', start), spec.size());
    parts.push_back(spec.substr(start, colon - start));
    start = colon + 1;
  }
  TextMap overrides;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError("--variant " + spec + ": '" + parts[i] + "' is not KEY=VALUE (allowed: MIXERS[:KEY=VALUE...])");
    overrides[parts[i].substr(0, eq)] = parts[i].substr(eq + 1);
  }
  const bool hybrid = parts[0].find('+') != std::string::npos;
  ModelConfig cfg = as_usage_error([&] {
    ModelConfig c = ModelConfig::of(hybrid ? ModelConfig().family : parts[0]);
    if (hybrid) read_text(c, {{"mixers", parts[0]}}, false);  // the option boxes follow the families named
    for (const std::string& f : c.layer_families()) family_spec(f);
    return c;
  });
  const std::vector<std::string> keys = field_keys(cfg);
  for (const auto& [key, value] : overrides)
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw UsageError("--variant " + spec + ": '" + key + "' is not an option of " + cfg.name() +
                       " (allowed: see `trilemma train --help`)");
  return scaling_model(cfg, s, overrides);
}

Batch task_batch(int64_t T, int64_t rows) {
  TaskConfig task = TaskConfig::of(kTask);
  task.vocab = kVocab;
  task.seq_len = T;
  return make_batch(task, stream_seed(0, "train"), 0, rows);
}

// One training step of cfg at each of the lengths, timed interleaved (measure_steps_interleaved):
// the fitted exponent compares the lengths, so they share the machine's bursts of load.
std::vector<StepCost> model_step_costs(const ModelConfig& cfg, const Settings& s) {
  struct Case {
    LanguageModel model;
    std::vector<Parameter> params;
    AdamW opt;
    Batch batch;
    Case(const ModelConfig& cfg, const Batch& b) : model(cfg, 1), params(model.parameters()), opt(params), batch(b) {}
  };
  std::vector<std::unique_ptr<Case>> cases;
  std::vector<std::function<void()>> steps;
  for (int64_t T : s.lens) {
    cases.push_back(std::make_unique<Case>(cfg, task_batch(T, s.batch)));
    steps.push_back([c = cases.back().get()] {
      backward(c->model.loss(c->batch.inputs, c->batch.targets));
      clip_grad_norm(c->params, 1.0);
      c->opt.step();
      c->opt.zero_grad();
    });
  }
  return measure_steps_interleaved(steps, s.repeats);
}

// One pass of a single sequence through step(): fed the task's tokens up to each T (ascending),
// then timed while it generates --decode-tokens tokens greedily. A T the pass has already gone
// beyond starts from a fresh state. A warm-up pass over the first T comes first, so the first
// length does not pay for first use (kernel set-up, first-touch pages of the state).
std::vector<double> decode_ms_per_token(LanguageModel& model, const Settings& s) {
  const Batch prompt = task_batch(s.lens.back(), 1);
  DecodeState state = model.new_decode_state(1);
  Tensor logits;
  auto feed = [&](int32_t token) { logits = model.step(IntTensor(Shape{1, 1}, {token}), state); };
  for (int64_t i = 0; i < s.lens.front() + s.decode_tokens; ++i) feed(prompt.inputs.data()[i % s.lens.back()]);
  state = model.new_decode_state(1);
  std::vector<double> medians;
  for (int64_t T : s.lens) {
    if (state.pos > T) state = model.new_decode_state(1);
    while (state.pos < T) feed(prompt.inputs.data()[state.pos]);
    std::vector<double> ms;
    for (int i = 0; i < s.decode_tokens; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      feed(int32_t(argmax(logits.data(), logits.size(-1))));
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    medians.push_back(median(ms));
  }
  return medians;
}

Json measurement_json(const Measurement& m, const Settings& s) {
  Json j = {{"model", m.family},       {"what", m.what},
            {"seq_len", m.T},          {"batch", m.batch},
            {"d_model", s.d_model},    {"n_layers", m.n_layers},
            {"ms", m.ms},              {"peak_bytes", m.peak_bytes ? Json(*m.peak_bytes) : Json(nullptr)},
            {"state_bytes", m.state_bytes}, {"repeats", m.repeats},
            {"pos", m.pos},            {"heads", s.heads},
            {"vocab", kVocab},         {"task", kTask},
            {"threads", num_threads()}};
  if (m.window) j["window"] = m.window;
  j["layer_state_bytes"] = m.layer_state_bytes;
  return j;
}

// The sliding window of cfg's attention layers (0: none, or no attention layer).
int64_t window_of(const ModelConfig& cfg) {
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const ModelConfig layer = cfg.layer(i);
    if (const auto* attention = dynamic_cast<const MultiHeadAttentionOptions*>(layer.mixer.get()))
      return attention->window;
  }
  return 0;
}

// The table's name of a series: the family, and its window when it has one.
std::string series_name(const std::string& family, int64_t window) {
  return window ? family + " w=" + std::to_string(window) : family;
}

}  // namespace

std::vector<std::string> family_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    try {
      family_spec(name);
    } catch (const Error& e) {
      throw UsageError("--models " + text + ": " + e.what());
    }
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

// decode_only: `bench decode`, the decode rows alone over longer contexts by default.
int scaling_rows(const po::variables_map& vm, bool decode_only) {
  Settings s;
  s.families = family_list(vm["models"].as<std::string>());
  s.lens = bench_sizes(vm, "seq-lens", decode_only ? "128,256,512,1024,2048,4096,8192" : "256,512,1024,2048,4096");
  std::sort(s.lens.begin(), s.lens.end());
  s.lens.erase(std::unique(s.lens.begin(), s.lens.end()), s.lens.end());
  if (s.lens.front() < 4)
    throw UsageError("--seq-lens " + std::to_string(s.lens.front()) + " too short (allowed: >= 4, the induction task)");
  s.batch = vm["batch"].as<int>();
  s.d_model = vm["d-model"].as<int>();
  s.n_layers = vm["n-layers"].as<int>();
  s.heads = vm["heads"].as<int>();
  s.repeats = bench_repeats(vm, 3);
  s.decode_tokens = vm["decode-tokens"].as<int>();
  s.window = vm["window"].as<int>();
  const bool json = vm["json"].as<bool>();
  const std::string out = vm.count("out") ? vm["out"].as<std::string>() : "";
  std::vector<ModelConfig> configs;
  for (const std::string& f : s.families) configs.push_back(family_model(f, s));  // all checked first
  if (s.window) configs.push_back(family_model("attention", s, s.window));
  if (vm.count("variant"))
    for (const std::string& spec : vm["variant"].as<std::vector<std::string>>()) configs.push_back(variant_model(spec, s));
  // The model column: wide enough for every series' name.
  int name_width = 10;
  for (const ModelConfig& cfg : configs)
    name_width = std::max(name_width, int(series_name(cfg.variant(), window_of(cfg)).size()));

  if (!json)
    std::printf("scaling: B=%lld D=%lld layers=%lld heads=%lld, task %s (vocab %lld), no MLP; median of %d "
                "(decode: one sequence, median of %d tokens); %d thread%s, load average %.2f\n"
                "%-*s %-6s %-5s %6s %10s %10s %14s %10s\n",
                (long long)s.batch, (long long)s.d_model, (long long)s.n_layers, (long long)s.heads, kTask,
                (long long)kVocab, s.repeats, s.decode_tokens, num_threads(), num_threads() == 1 ? "" : "s",
                load_average(), name_width, "model", "what", "pos", "T", "ms", "peak MB", "state B/seq", "tokens/s");
  std::string lines;
  auto report = [&](const Measurement& m) {
    const std::string line = measurement_json(m, s).dump();
    lines += line + "\n";
    const std::string name = series_name(m.family, m.window);
    if (json) std::printf("%s\n", line.c_str());
    else if (m.peak_bytes)
      std::printf("%-*s %-6s %-5s %6lld %10.3f %10.1f %14lld\n", name_width, name.c_str(), m.what.c_str(), m.pos.c_str(),
                  (long long)m.T, m.ms, double(*m.peak_bytes) / (1 << 20), (long long)m.state_bytes);
    else
      std::printf("%-*s %-6s %-5s %6lld %10.3f %10s %14lld %10.0f\n", name_width, name.c_str(), m.what.c_str(), m.pos.c_str(),
                  (long long)m.T, m.ms, "-", (long long)m.state_bytes, 1e3 / m.ms);
    std::fflush(stdout);
  };
  for (const ModelConfig& cfg : configs) {
    LanguageModel decoder(cfg, 1);
    const int64_t window = window_of(cfg), layers = cfg.n_layers;
    const std::string name = cfg.variant();
    if (!decode_only) {
      const std::vector<StepCost> costs = model_step_costs(cfg, s);
      for (size_t i = 0; i < s.lens.size(); ++i)
        report({name, "model", cfg.pos, window, layers, s.lens[i], s.batch, costs[i].ms, costs[i].peak_bytes,
                decoder.state_bytes(s.lens[i]), decoder.layer_state_bytes(s.lens[i]), s.repeats});
    }
    // A hybrid's layers are not one mixer: its rows are the model's and decode's.
    for (int64_t T : decode_only || cfg.hybrid() ? std::vector<int64_t>{} : s.lens) {
      const MixerCost m = measure_mixer(cfg, s.batch, T, s.repeats);
      report({name, "mixer", cfg.pos, window, layers, T, s.batch, m.cost.ms, m.cost.peak_bytes, decoder.state_bytes(T),
              decoder.layer_state_bytes(T), s.repeats});
    }
    const std::vector<double> decode_ms = decode_ms_per_token(decoder, s);
    // A growing KV cache leaves blocks of every length in the tensor cache: give them back.
    memory_release_cache();
    for (size_t i = 0; i < s.lens.size(); ++i)
      report({name, "decode", cfg.pos, window, layers, s.lens[i], 1, decode_ms[i], std::nullopt,
              decoder.state_bytes(s.lens[i]), decoder.layer_state_bytes(s.lens[i]), s.decode_tokens});
  }
  if (!out.empty()) {
    write_text_atomically(out, lines);
    if (!json) std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

int bench_scaling(const po::variables_map& vm) { return scaling_rows(vm, false); }
int bench_decode(const po::variables_map& vm) { return scaling_rows(vm, true); }

}  // namespace tri::bench
