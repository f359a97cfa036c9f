// Row generators of the synthetic tasks (layouts in tasks.hpp and specs/TASKS.md).
#include "data/tasks.hpp"

#include <cmath>

#include "framework/rng.hpp"

namespace tri {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

[[noreturn]] void bad(const TaskConfig& c, const std::string& what) {
  throw Error(c.task + ": " + what);
}

// One row's views into the batch: inputs x, targets y, mask m, all of length T.
struct Row {
  int32_t* x;
  int32_t* y;
  uint8_t* m;
  int64_t T;
  void score(int64_t t, int32_t target) {
    y[t] = target;
    m[t] = 1;
  }
};

// `count` distinct ids from [lo, hi), in draw order (rejection: count is small next to hi-lo).
void distinct_ids(Rng& rng, int64_t lo, int64_t hi, int64_t count, std::vector<int32_t>& out) {
  out.clear();
  while (int64_t(out.size()) < count) {
    const int32_t id = int32_t(lo + int64_t(rng.below(uint64_t(hi - lo))));
    bool seen = false;
    for (int32_t o : out) seen |= o == id;
    if (!seen) out.push_back(id);
  }
}

void copy_row(const TaskConfig& c, Rng& rng, Row r) {
  const int32_t A = int32_t(c.alphabet), BOS = A, SEP = A + 1, EOS = A + 2, PAD = A + 3;
  const int64_t L = c.min_len + int64_t(rng.below(uint64_t(c.max_len - c.min_len + 1)));
  r.x[0] = BOS;
  for (int64_t i = 0; i < L; ++i) r.x[1 + i] = r.x[L + 2 + i] = int32_t(rng.below(uint64_t(A)));
  r.x[L + 1] = SEP;
  r.x[2 * L + 2] = EOS;
  for (int64_t t = 2 * L + 3; t < r.T; ++t) r.x[t] = PAD;
  for (int64_t t = L + 1; t <= 2 * L + 1; ++t) r.score(t, r.x[t + 1]);  // s, then EOS
}

void selective_copy_row(const TaskConfig& c, Rng& rng, Row r) {
  const int64_t T = r.T, M = c.num_tokens, A = c.vocab_size(), slots = T - M;
  // Selection sampling (Knuth's algorithm S): M of the first T-M slots, visited in order.
  int64_t chosen = 0;
  for (int64_t t = 0; t < slots; ++t) {
    const bool take = int64_t(rng.below(uint64_t(slots - t))) < M - chosen;
    r.x[t] = take ? int32_t(1 + rng.below(uint64_t(A - 2))) : 0;
    if (take) r.score(T - M + chosen++, r.x[t]);
  }
  for (int64_t t = slots; t < T; ++t) r.x[t] = int32_t(A - 1);
}

void mqar_row(const TaskConfig& c, Rng& rng, Row r, std::vector<int32_t>& keys,
              std::vector<int32_t>& values, std::vector<double>& weights) {
  const int64_t T = r.T, K = c.num_kv_pairs, V = c.vocab_size(), space = (T - 2 * K) / 2;
  distinct_ids(rng, 1, V / 2, K, keys);
  distinct_ids(rng, V / 2, V, K, values);
  for (int64_t j = 0; j < K; ++j) {
    r.x[2 * j] = keys[size_t(j)];
    r.x[2 * j + 1] = values[size_t(j)];
  }
  for (int64_t t = 2 * K; t < T; ++t) r.x[t] = c.random_fillers ? int32_t(rng.below(uint64_t(V))) : 0;
  // Sequential weighted sampling without replacement: draw one gap from the remaining weights,
  // zero its weight, repeat (what numpy's choice(replace=False, p=...) samples).
  weights.resize(size_t(space));
  double total = 0;
  for (int64_t i = 0; i < space; ++i) total += weights[size_t(i)] = std::pow(double(i + 1), c.power_a - 1);
  for (int64_t j = 0; j < K; ++j) {
    const double u = rng.uniform() * total;
    double acc = 0;
    int64_t g = -1, last = -1;  // g is 0-based; `last` guards against rounding at the top end
    for (int64_t i = 0; i < space && g < 0; ++i) {
      if (weights[size_t(i)] == 0) continue;
      last = i;
      acc += weights[size_t(i)];
      if (u < acc) g = i;
    }
    if (g < 0) g = last;
    total -= weights[size_t(g)];
    weights[size_t(g)] = 0;
    const int64_t q = 2 * K + 2 * g;
    r.x[q] = keys[size_t(j)];
    r.score(q, values[size_t(j)]);
  }
}

void induction_row(const TaskConfig& c, Rng& rng, Row r) {
  const int64_t T = r.T, V = c.vocab_size();
  for (int64_t t = 0; t < T - 1; ++t) r.x[t] = int32_t(1 + rng.below(uint64_t(V - 1)));
  const int64_t p = int64_t(rng.below(uint64_t(T - 3)));  // p + 1 < T - 2
  r.x[p] = 0;
  r.x[T - 1] = 0;
  r.score(T - 1, r.x[p + 1]);
}

void needle_row(const TaskConfig& c, Rng& rng, Row r, int64_t distance) {
  const int64_t T = r.T, V = c.vocab_size();
  for (int64_t t = 0; t < T; ++t) r.x[t] = int32_t(1 + rng.below(uint64_t(V / 4 - 1)));
  const int32_t key = int32_t(V / 4 + int64_t(rng.below(uint64_t(V / 2 - V / 4))));
  const int32_t value = int32_t(V / 2 + int64_t(rng.below(uint64_t(V - V / 2))));
  const int64_t p = T - 2 - distance;
  r.x[p] = key;
  r.x[p + 1] = value;
  r.x[T - 1] = key;
  r.score(T - 1, value);
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"copy", "selective-copy", "mqar", "induction", "needle"};
  return names;
}

int64_t default_seq_len(const TaskConfig& c) {
  if (c.task == "copy") return 2 * c.max_len + 3;
  if (c.task == "mqar") return 128;
  return 256;
}

int64_t TaskConfig::length() const { return seq_len ? seq_len : default_seq_len(*this); }

int64_t TaskConfig::vocab_size() const {
  if (task == "copy") return alphabet + 4;
  if (vocab) return vocab;
  return task == "mqar" || task == "needle" ? 8192 : 16;
}

void TaskConfig::validate() const {
  bool known = false;
  std::string names;
  for (const std::string& n : task_names()) {
    known |= n == task;
    names += (names.empty() ? "" : ", ") + n;
  }
  if (!known) throw Error("unknown task '" + task + "' (allowed: " + names + ")");
  const int64_t T = length(), V = vocab_size();
  if (T < 1 || T > (int64_t(1) << 24)) bad(*this, "seq_len " + num(T) + " out of range (allowed: 1..16777216)");
  if (task != "copy" && vocab != 0 && (vocab < 2 || vocab > (int64_t(1) << 30)))
    bad(*this, "vocab " + num(vocab) + " out of range (allowed: 2..1073741824)");
  if (task == "copy") {
    if (alphabet < 1 || alphabet > (int64_t(1) << 30)) bad(*this, "alphabet " + num(alphabet) + " out of range (allowed: >= 1)");
    if (min_len < 1) bad(*this, "min_len " + num(min_len) + " must be >= 1");
    if (max_len < min_len) bad(*this, "max_len " + num(max_len) + " must be >= min_len " + num(min_len));
    if (T < 2 * max_len + 3)
      bad(*this, "seq_len " + num(T) + " cannot hold a string of max_len " + num(max_len) +
                     " (needs seq_len >= 2*max_len+3 = " + num(2 * max_len + 3) + ")");
  } else if (task == "selective-copy") {
    if (V < 3) bad(*this, "vocab " + num(V) + " too small (allowed: >= 3: noise, data, marker)");
    if (num_tokens < 1 || 2 * num_tokens > T)
      bad(*this, "num_tokens (M) " + num(num_tokens) + " out of range (allowed: 1..seq_len/2 = " + num(T / 2) +
                     ": M data tokens among the first seq_len-M slots)");
  } else if (task == "mqar") {
    if (num_kv_pairs < 1) bad(*this, "num_kv_pairs " + num(num_kv_pairs) + " must be >= 1");
    if (4 * num_kv_pairs > T)
      bad(*this, "num_kv_pairs " + num(num_kv_pairs) + " too large for seq_len " + num(T) +
                     " (needs 4*num_kv_pairs <= seq_len)");
    if (V <= T) bad(*this, "vocab " + num(V) + " must be > seq_len " + num(T));
    if (!(power_a > 0 && power_a <= 1))
      bad(*this, "power_a " + std::to_string(power_a) + " out of range (allowed: (0, 1])");
  } else if (task == "induction") {
    if (T < 4) bad(*this, "seq_len " + num(T) + " too short (allowed: >= 4)");
  } else if (task == "needle") {
    if (V < 8) bad(*this, "vocab " + num(V) + " too small (allowed: >= 8: fillers, keys, values)");
    if (distances.empty()) bad(*this, "distance list is empty (allowed: distances 1..seq_len-2)");
    for (int64_t d : distances)
      if (d < 1 || d > T - 2)
        bad(*this, "distance " + num(d) + " does not fit seq_len " + num(T) + " (allowed: 1.." + num(T - 2) + ")");
  }
}

uint64_t stream_seed(uint64_t base_seed, const std::string& split) {
  if (split == "train") return seed_mix(base_seed, 0x7472'6169'6E00'0001ull);
  if (split == "eval") return seed_mix(base_seed, 0x6576'616C'0000'0002ull);
  throw Error("split '" + split + "' unknown (allowed: train, eval)");
}

Batch make_batch(const TaskConfig& cfg, uint64_t seed, uint64_t batch_index, int64_t batch_size) {
  cfg.validate();
  if (batch_size < 1) throw Error("make_batch: batch_size " + num(batch_size) + " must be >= 1");
  const int64_t B = batch_size, T = cfg.length();
  std::vector<int32_t> x(size_t(B * T), 0), y(size_t(B * T), kIgnoreIndex);
  Batch batch;
  batch.mask.assign(size_t(B * T), 0);
  std::vector<int32_t> keys, values;  // mqar scratch, reused across rows
  std::vector<double> weights;
  const uint64_t batch_seed = seed_mix(seed, batch_index);
  for (int64_t b = 0; b < B; ++b) {
    Rng rng(seed_mix(batch_seed, uint64_t(b)));
    Row r{x.data() + b * T, y.data() + b * T, batch.mask.data() + b * T, T};
    if (cfg.task == "copy") copy_row(cfg, rng, r);
    else if (cfg.task == "selective-copy") selective_copy_row(cfg, rng, r);
    else if (cfg.task == "mqar") mqar_row(cfg, rng, r, keys, values, weights);
    else if (cfg.task == "induction") induction_row(cfg, rng, r);
    else {
      const int64_t d = cfg.distances[size_t(b) % cfg.distances.size()];
      needle_row(cfg, rng, r, d);
      batch.distance.push_back(d);
    }
  }
  batch.inputs = IntTensor(Shape{B, T}, std::move(x));
  batch.targets = IntTensor(Shape{B, T}, std::move(y));
  return batch;
}

AnswerSpan copy_answer_span(const Batch& batch, int64_t row) {
  const int64_t T = batch.inputs.shape[1];
  const uint8_t* m = batch.mask.data() + row * T;
  int64_t first = 0;
  while (first < T && !m[first]) ++first;
  int64_t n = 0;
  while (first + n < T && m[first + n]) ++n;
  if (n == 0) throw Error("copy_answer_span: row " + num(row) + " has no scored position");
  return {first + 1, n};
}

}  // namespace tri
