#include "train/run_config.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

#include "framework/runtime.hpp"

namespace tri::cli {

void add_model_options(po::options_description& d) {
  d.add_options()
      ("model", po::value<std::string>()->value_name("NAME")->default_value("attention"),
       "sequence mixer: attention, linear (linear attention) or mamba")
      ("d-model", po::value<long>()->value_name("N")->default_value(64), "model width")
      ("n-layers", po::value<long>()->value_name("N")->default_value(2), "blocks")
      ("n-heads", po::value<long>()->value_name("N")->default_value(4),
       "attention / linear attention heads (must divide d-model)")
      ("pos", po::value<std::string>()->value_name("NAME")->default_value("none"),
       "positions: none, sinusoidal, learned, rope, alibi (alibi: attention only; mamba: none)")
      ("norm", po::value<std::string>()->value_name("NAME")->default_value("pre"),
       "pre: x + f(LN(x)); post: LN(x + f(x)) as the book's block")
      ("mlp", po::value<std::string>()->value_name("NAME")->default_value("gelu"),
       "none or gelu (d_ff = 4 d-model) after each mixer")
      ("bias", po::value<bool>()->value_name("BOOL")->default_value(false, "0"),
       "biases on the q/k/v/out projections")
      ("feature-map", po::value<std::string>()->value_name("NAME")->default_value("elu"),
       "linear attention phi: elu (elu+1), relu or identity")
      ("d-state", po::value<long>()->value_name("N")->default_value(16), "mamba: SSM state size N")
      ("d-conv", po::value<long>()->value_name("N")->default_value(4), "mamba: causal conv width")
      ("expand", po::value<long>()->value_name("N")->default_value(2), "mamba: inner width = expand * d-model")
      ("dt-rank", po::value<long>()->value_name("N")->default_value(0), "mamba: dt projection rank; 0 = ceil(d-model/16)")
      ("ssm-selective", po::value<bool>()->value_name("BOOL")->default_value(true, "1"),
       "mamba: input-dependent dt, B, C (0: time-invariant, S4D-like)")
      ("a-init", po::value<std::string>()->value_name("NAME")->default_value("s4d-real"),
       "mamba: A init s4d-real, s4d-lin or hippo-legs (the last two need --ssm-selective 0)")
      ("tie-embeddings", po::value<bool>()->value_name("BOOL")->default_value(false, "0"),
       "use the embedding as the output head")
      ("max-seq-len", po::value<long>()->value_name("N")->default_value(0),
       "learned positions' table size; 0 = the task's seq-len");
}

namespace {

template <class T>
po::typed_value<T>* maybe_default(po::typed_value<T>* v, bool on, const T& value) {
  return on ? v->default_value(value) : v;
}
template <class T>
po::typed_value<T>* maybe_default(po::typed_value<T>* v, bool on, const T& value, const char* text) {
  return on ? v->default_value(value, text) : v;
}

}  // namespace

void add_task_options(po::options_description& d, bool with_defaults) {
  const bool w = with_defaults;
  d.add_options()
      ("task", maybe_default(po::value<std::string>()->value_name("NAME"), w, std::string("mqar")),
       "copy, selective-copy, mqar, induction or needle")
      ("seq-len", maybe_default(po::value<long>()->value_name("N"), w, 0L),
       "row length; 0 = the task's default (copy 2*max-len+3, mqar 128, others 256)")
      ("vocab", maybe_default(po::value<long>()->value_name("N"), w, 0L),
       "vocabulary (selective-copy, mqar, induction, needle); 0 = default (16; mqar and needle 8192)")
      ("alphabet", maybe_default(po::value<long>()->value_name("N"), w, 26L), "copy: alphabet size")
      ("min-len", maybe_default(po::value<long>()->value_name("N"), w, 5L), "copy: shortest string")
      ("max-len", maybe_default(po::value<long>()->value_name("N"), w, 20L), "copy: longest string")
      ("num-tokens", maybe_default(po::value<long>()->value_name("M"), w, 16L),
       "selective-copy: data tokens to copy")
      ("num-kv-pairs", maybe_default(po::value<long>()->value_name("K"), w, 8L), "mqar: key-value pairs")
      ("power-a", maybe_default(po::value<double>()->value_name("A"), w, 0.01, "0.01"),
       "mqar: query gaps drawn with p(i) ~ i^(a-1)")
      ("random-fillers", maybe_default(po::value<bool>()->value_name("BOOL"), w, false, "0"),
       "mqar: fill the query region with random tokens instead of 0")
      ("distance", maybe_default(po::value<std::string>()->value_name("LIST"), w, std::string("4,16,64,128,250")),
       "needle: key-query distances, comma-separated; row i uses the (i mod count)-th");
}

void add_training_options(po::options_description& d) {
  d.add_options()
      ("optimizer", po::value<std::string>()->value_name("NAME")->default_value("adamw"), "adamw or sgd")
      ("lr", po::value<double>()->value_name("X")->default_value(1e-3, "0.001"), "peak learning rate")
      ("min-lr", po::value<double>()->value_name("X")->default_value(0.0, "0"), "cosine schedule: final learning rate")
      ("schedule", po::value<std::string>()->value_name("NAME")->default_value("cosine"),
       "learning rate after warm-up: cosine (to min-lr at the last step) or constant")
      ("warmup", po::value<long>()->value_name("N")->default_value(50), "linear warm-up steps")
      ("beta1", po::value<double>()->value_name("X")->default_value(0.9, "0.9"), "adamw beta1")
      ("beta2", po::value<double>()->value_name("X")->default_value(0.999, "0.999"), "adamw beta2")
      ("eps", po::value<double>()->value_name("X")->default_value(1e-8, "1e-08"), "adamw epsilon")
      ("weight-decay", po::value<double>()->value_name("X")->default_value(0.1, "0.1"),
       "decoupled (adamw) or L2 (sgd) weight decay; never on norms, biases, embeddings")
      ("momentum", po::value<double>()->value_name("X")->default_value(0.0, "0"), "sgd momentum")
      ("clip", po::value<double>()->value_name("X")->default_value(1.0, "1"), "global grad-norm clip; 0 = off")
      ("batch", po::value<long>()->value_name("N")->default_value(32), "rows per training batch")
      ("steps", po::value<long>()->value_name("N")->default_value(1000), "training steps")
      ("eval-every", po::value<long>()->value_name("N")->default_value(100),
       "steps between evaluations (and at the last step)")
      ("eval-batches", po::value<long>()->value_name("N")->default_value(4), "batches per evaluation")
      ("eval-batch", po::value<long>()->value_name("N")->default_value(0), "rows per evaluation batch; 0 = --batch")
      ("early-stop", po::value<double>()->value_name("ACC")->default_value(0.0, "0"),
       "stop once evaluation token accuracy reaches ACC (Zoology: 0.99); 0 = never")
      ("checkpoint-every", po::value<long>()->value_name("N")->default_value(0),
       "steps between last.h5 checkpoints; 0 = at every evaluation")
      ("keep", po::value<long>()->value_name("K")->default_value(0),
       "also keep the last K checkpoints as step-NNNNNNN.h5; 0 = only last.h5 and best.h5")
      ("seed", po::value<long>()->value_name("S")->default_value(0), "seed of the initialisation and of the data streams")
      ("log-every", po::value<long>()->value_name("N")->default_value(10), "steps between metrics rows")
      ("progress", po::value<std::string>()->value_name("MODE")->default_value("auto"),
       "auto (a bar on a terminal, else lines), bar, lines or none");
}

std::string exact_number(double v) {
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

ConfigMap config_text(const po::variables_map& vm, const po::options_description& d) {
  ConfigMap out;
  for (const auto& opt : d.options()) {
    const std::string& key = opt->long_name();
    if (!vm.count(key)) continue;
    const boost::any& v = vm[key].value();
    if (auto* p = boost::any_cast<long>(&v)) out[key] = std::to_string(*p);
    else if (auto* p = boost::any_cast<int>(&v)) out[key] = std::to_string(*p);
    else if (auto* p = boost::any_cast<double>(&v)) out[key] = exact_number(*p);
    else if (auto* p = boost::any_cast<bool>(&v)) out[key] = *p ? "1" : "0";
    else if (auto* p = boost::any_cast<std::string>(&v)) out[key] = *p;
  }
  return out;
}

std::map<std::string, bool> given_options(const po::variables_map& vm, const po::options_description& d) {
  std::map<std::string, bool> out;
  for (const auto& opt : d.options()) {
    const std::string& key = opt->long_name();
    out[key] = vm.count(key) && !vm[key].defaulted();
  }
  return out;
}

// ---- typed getters: each names the option, the bad text and what is allowed
namespace {

const std::string& text_of(const ConfigMap& c, const std::string& key) {
  auto it = c.find(key);
  if (it == c.end()) throw UsageError("config: missing --" + key);
  return it->second;
}

// Every piece of `text` between separators, empty ones included.
std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> pieces;
  size_t pos = 0;
  for (size_t end; (end = text.find(separator, pos)) != std::string::npos; pos = end + 1)
    pieces.push_back(text.substr(pos, end - pos));
  pieces.push_back(text.substr(pos));
  return pieces;
}

int64_t get_int(const ConfigMap& c, const std::string& key, int64_t lo, int64_t hi) {
  const std::string& s = text_of(c, key);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError("--" + key + " '" + s + "' is not an integer");
  if (v < lo || v > hi)
    throw UsageError("--" + key + " " + s + " is out of range (allowed: " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ")");
  return v;
}

double get_double(const ConfigMap& c, const std::string& key, double lo, double hi) {
  const std::string& s = text_of(c, key);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') throw UsageError("--" + key + " '" + s + "' is not a number");
  if (!(v >= lo && v <= hi))
    throw UsageError("--" + key + " " + s + " is out of range (allowed: " + number_text(lo) + ".." +
                     number_text(hi) + ")");
  return v;
}

bool get_bool(const ConfigMap& c, const std::string& key) {
  const std::string& s = text_of(c, key);
  for (const char* t : {"1", "true", "yes", "on"})
    if (s == t) return true;
  for (const char* f : {"0", "false", "no", "off"})
    if (s == f) return false;
  throw UsageError("--" + key + " '" + s + "' is not a boolean (allowed: 1, 0, true, false, yes, no, on, off)");
}

std::string get_choice(const ConfigMap& c, const std::string& key, std::initializer_list<const char*> allowed) {
  const std::string& s = text_of(c, key);
  std::string list;
  for (const char* a : allowed) {
    if (s == a) return s;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw UsageError("--" + key + " '" + s + "' unknown (allowed: " + list + ")");
}

constexpr int64_t kBig = int64_t(1) << 40;

}  // namespace

int64_t config_int(const ConfigMap& c, const std::string& key, int64_t lo, int64_t hi) {
  return get_int(c, key, lo, hi);
}

std::vector<int64_t> parse_int_list(const std::string& option, const std::string& text, int64_t lo,
                                    int64_t hi, bool spaces_too) {
  const std::string allowed = "(allowed: integers " + std::to_string(lo) + ".." + std::to_string(hi) +
                              (spaces_too ? " separated by spaces or commas)" : ", comma-separated)");
  auto bad = [&](const std::string& item) {
    return UsageError("--" + option + ": '" + item + "' in '" + text + "' is not allowed " + allowed);
  };
  const std::vector<std::string> fields = split(text, ',');
  std::vector<int64_t> out;
  for (const std::string& field : fields) {
    std::vector<std::string> items;  // runs of spaces are one separator
    for (const std::string& w : spaces_too ? split(field, ' ') : std::vector<std::string>{field})
      if (!w.empty()) items.push_back(w);
    if (items.empty() && fields.size() > 1) throw bad(field);  // "64,,128"
    for (const std::string& item : items) {
      char* rest = nullptr;
      errno = 0;
      const long long v = std::strtoll(item.c_str(), &rest, 10);
      if (*rest != '\0' || errno == ERANGE || v < lo || v > hi) throw bad(item);
      out.push_back(v);
    }
  }
  if (out.empty()) throw UsageError("--" + option + " '" + text + "' holds no value " + allowed);
  return out;
}

TaskConfig task_config(const ConfigMap& c) {
  TaskConfig t;
  t.task = get_choice(c, "task", {"copy", "selective-copy", "mqar", "induction", "needle"});
  t.seq_len = get_int(c, "seq-len", 0, int64_t(1) << 24);
  t.vocab = get_int(c, "vocab", 0, int64_t(1) << 30);
  t.alphabet = get_int(c, "alphabet", 1, int64_t(1) << 30);
  t.min_len = get_int(c, "min-len", 1, int64_t(1) << 23);
  t.max_len = get_int(c, "max-len", 1, int64_t(1) << 23);
  t.num_tokens = get_int(c, "num-tokens", 1, int64_t(1) << 23);
  t.num_kv_pairs = get_int(c, "num-kv-pairs", 1, int64_t(1) << 22);
  t.power_a = get_double(c, "power-a", 0.0, 1.0);
  t.random_fillers = get_bool(c, "random-fillers");
  t.distances = parse_int_list("distance", text_of(c, "distance"), 1, int64_t(1) << 24, false);
  try {
    t.validate();
  } catch (const Error& e) {
    throw UsageError(std::string("task ") + e.what());
  }
  return t;
}

ModelConfig model_config(const ConfigMap& c, const TaskConfig& task) {
  ModelConfig m;
  m.family = get_choice(c, "model", {"attention", "linear", "mamba"});
  m.vocab = task.vocab_size();
  m.d_model = get_int(c, "d-model", 1, 1 << 16);
  m.n_layers = get_int(c, "n-layers", 1, 1024);
  m.n_heads = get_int(c, "n-heads", 1, 1 << 16);
  m.pos = get_choice(c, "pos", {"none", "sinusoidal", "learned", "rope", "alibi"});
  m.norm = get_choice(c, "norm", {"pre", "post"});
  m.mlp = get_choice(c, "mlp", {"none", "gelu"});
  m.bias = get_bool(c, "bias");
  m.feature_map = get_choice(c, "feature-map", {"elu", "relu", "identity"});
  m.d_state = get_int(c, "d-state", 1, 1 << 12);
  m.d_conv = get_int(c, "d-conv", 1, 64);
  m.expand = get_int(c, "expand", 1, 64);
  m.dt_rank = get_int(c, "dt-rank", 0, 1 << 16);
  m.ssm_selective = get_bool(c, "ssm-selective");
  m.a_init = get_choice(c, "a-init", {"s4d-real", "s4d-lin", "hippo-legs"});
  m.tie_embeddings = get_bool(c, "tie-embeddings");
  const int64_t max_len = get_int(c, "max-seq-len", 0, int64_t(1) << 24);
  m.max_seq_len = max_len ? max_len : task.length();
  if (m.family == "linear" && m.pos == "alibi")
    throw UsageError("--pos alibi is for --model attention only (linear: none, sinusoidal, learned, rope)");
  if (m.pos == "learned" && task.length() > m.max_seq_len)
    throw UsageError("--seq-len " + std::to_string(task.length()) + " exceeds the learned positions' --max-seq-len " +
                     std::to_string(m.max_seq_len) + " (allowed: seq-len <= max-seq-len)");
  try {
    m.validate();
  } catch (const Error& e) {
    throw UsageError(std::string("model ") + e.what());
  }
  return m;
}

TrainConfig train_config(const ConfigMap& c) {
  TrainConfig t;
  t.optimizer = get_choice(c, "optimizer", {"adamw", "sgd"});
  t.lr = get_double(c, "lr", 0.0, 10.0);
  t.min_lr = get_double(c, "min-lr", 0.0, t.lr);
  t.schedule = get_choice(c, "schedule", {"cosine", "constant"});
  t.beta1 = get_double(c, "beta1", 0.0, 0.999999);
  t.beta2 = get_double(c, "beta2", 0.0, 0.999999999);
  t.eps = get_double(c, "eps", 1e-30, 1.0);
  t.weight_decay = get_double(c, "weight-decay", 0.0, 10.0);
  t.momentum = get_double(c, "momentum", 0.0, 0.999999);
  t.clip = get_double(c, "clip", 0.0, 1e12);
  t.batch = get_int(c, "batch", 1, 1 << 20);
  t.steps = get_int(c, "steps", 1, kBig);
  t.warmup = get_int(c, "warmup", 0, kBig);  // beyond --steps: warm-up throughout
  t.eval_every = get_int(c, "eval-every", 1, kBig);
  t.eval_batches = get_int(c, "eval-batches", 1, 1 << 20);
  t.eval_batch = get_int(c, "eval-batch", 0, 1 << 20);
  if (!t.eval_batch) t.eval_batch = t.batch;
  t.early_stop = get_double(c, "early-stop", 0.0, 1.0);
  t.checkpoint_every = get_int(c, "checkpoint-every", 0, kBig);
  if (!t.checkpoint_every) t.checkpoint_every = t.eval_every;
  t.keep = get_int(c, "keep", 0, 1 << 20);
  t.seed = uint64_t(get_int(c, "seed", 0, INT64_MAX));
  t.log_every = get_int(c, "log-every", 1, kBig);
  t.progress = get_choice(c, "progress", {"auto", "bar", "lines", "none"});
  return t;
}

void resolve(ConfigMap& c) {
  const TaskConfig task = task_config(c);
  c["seq-len"] = std::to_string(task.length());
  c["vocab"] = std::to_string(task.vocab_size());
  if (c.count("model")) {
    const ModelConfig m = model_config(c, task);
    c["max-seq-len"] = std::to_string(m.max_seq_len);
    if (m.family == "mamba") c["dt-rank"] = std::to_string(m.resolved_dt_rank());
  }
  if (c.count("eval-batch") && c["eval-batch"] == "0") c["eval-batch"] = c["batch"];
  if (c.count("checkpoint-every") && c["checkpoint-every"] == "0") c["checkpoint-every"] = c["eval-every"];
  if (c.count("threads") && c["threads"] == "0") c["threads"] = std::to_string(physical_cores());
}

std::string config_file_text(const ConfigMap& c) {
  std::string s;
  for (const auto& [k, v] : c) s += k + " = " + v + "\n";
  return s;
}

}  // namespace tri::cli
