// mqar: multi-query associative recall (Arora et al. 2023, Zoology; docs/TASKS.md).
//   k1 v1 .. kK vK, then the query region (zeros, or uniform tokens with random_fillers). Keys
//   from [1, V/2), values from [V/2, V), distinct within a row. Gaps g are drawn without
//   replacement from p(i) ~ i^(a-1), i = 1..(T-2K)/2; key j is queried at 2K + 2*(g_j - 1)
//   (Zoology's 0-based offset, so the largest gap still lands inside the row). Scored: the K
//   query positions, target the value.
//   A mix (--num-kv-pairs 4,8,16): row i of a batch holds K = list[i mod count] pairs, so every
//   batch covers the list in turn; extra metrics: the accuracy per K (acc@K=4, ...), and a run
//   stops early only once every K has reached the threshold (a capacity is read at the largest).
#include <algorithm>
#include <cmath>

#include "data/tasks.hpp"

namespace tri {

namespace {

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

class MqarTask : public TaskOptions {
 public:
  std::vector<int64_t> num_kv_pairs = {8};  // K, or the mix of K drawn row by row
  double power_a = 0.01;
  bool random_fillers = false;

  void visit(FieldVisitor& v) override {
    v.int_list("num-kv-pairs", num_kv_pairs, {1, int64_t(1) << 22},
               "key-value pairs K; a list (4,8,16) mixes them: row i of a batch holds the (i mod count)-th");
    v.real("power-a", power_a, {0.0, 1.0}, "query gaps drawn with p(i) ~ i^(a-1), a in (0, 1]");
    v.boolean("random-fillers", random_fillers, "fill the query region with random tokens instead of 0");
  }
  std::unique_ptr<Options> clone() const override { return std::make_unique<MqarTask>(*this); }

  int64_t default_seq_len() const override { return 128; }  // the (128, 8) point of Zoology's grid
  int64_t default_vocab() const override { return 8192; }

  void validate(const TaskConfig& c) const override {
    const int64_t T = c.length(), V = c.vocab_size();
    if (num_kv_pairs.empty()) throw Error("task mqar: --num-kv-pairs is empty (allowed: one K or a list of K >= 1)");
    for (size_t i = 0; i < num_kv_pairs.size(); ++i) {
      const int64_t K = num_kv_pairs[i];
      if (std::find(num_kv_pairs.begin(), num_kv_pairs.begin() + int64_t(i), K) != num_kv_pairs.begin() + int64_t(i))
        throw Error("task mqar: --num-kv-pairs " + int_list_text(num_kv_pairs) + " repeats " + std::to_string(K) +
                    " (allowed: distinct K)");
      if (K > V / 2 - 1)
        throw Error("task mqar: --num-kv-pairs " + std::to_string(K) + " needs " + std::to_string(K) +
                    " distinct keys, and --vocab " + std::to_string(V) + " holds " + std::to_string(V / 2 - 1) +
                    " (keys 1..V/2-1)");
      if (4 * K > T)
        throw Error("task mqar: --num-kv-pairs " + std::to_string(K) + " too large for --seq-len " +
                    std::to_string(T) + " (needs 4*num-kv-pairs <= seq-len)");
    }
    if (V <= T) throw Error("task mqar: --vocab " + std::to_string(V) + " must be > --seq-len " + std::to_string(T));
    if (!(power_a > 0))
      throw Error("task mqar: --power-a " + exact_number(power_a) + " out of range (allowed: (0, 1])");
  }

  void fill_row(const TaskConfig& c, Rng rng, Row& r) const override {
    thread_local std::vector<int32_t> keys, values;  // scratch, reused across rows
    thread_local std::vector<double> weights;
    const int64_t T = r.T, K = pairs_of_row(r.index), V = c.vocab_size(), space = (T - 2 * K) / 2;
    if (mixed()) r.group = K;
    distinct_ids(rng, 1, V / 2, K, keys);
    distinct_ids(rng, V / 2, V, K, values);
    for (int64_t j = 0; j < K; ++j) {
      r.x[2 * j] = keys[size_t(j)];
      r.x[2 * j + 1] = values[size_t(j)];
    }
    for (int64_t t = 2 * K; t < T; ++t) r.x[t] = random_fillers ? int32_t(rng.below(uint64_t(V))) : 0;
    // Sequential weighted sampling without replacement: draw one gap from the remaining weights,
    // zero its weight, repeat (what numpy's choice(replace=False, p=...) samples).
    weights.resize(size_t(space));
    double total = 0;
    for (int64_t i = 0; i < space; ++i) total += weights[size_t(i)] = std::pow(double(i + 1), power_a - 1);
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

  std::string group_name() const override { return "pairs"; }

  // A mix adds acc@K=k: the accuracy of the rows holding k pairs.
  void extra_scores(const TaskConfig&, const Batch& batch, const Tensor& logits, const GreedyDecoder*,
                    ExtraScores& out) const override {
    if (!mixed()) return;
    for (const auto& [k, a] : accuracy_by_group(batch, logits)) extra_score(out, pairs_metric(k)).add(a);
  }

  // A mix is learned when every K is: the smallest acc@K=k, so a run that has learned only its
  // small K keeps training. One K: the token accuracy.
  double stopping_accuracy(double token_acc, const ExtraScores& extra) const override {
    if (!mixed()) return token_acc;
    double lowest = 1;
    for (int64_t k : num_kv_pairs)
      for (const auto& [name, a] : extra)
        if (name == pairs_metric(k)) lowest = std::min(lowest, a.value());
    return lowest;
  }

  // Values come from [V/2, V). (A model that only learned the format guesses among the row's
  // K values and scores 1/K: the plateau MQAR training sits on before recall is learned.)
  double chance_accuracy(const TaskConfig& c) const override {
    return 1.0 / double(c.vocab_size() - c.vocab_size() / 2);
  }
  int64_t recall_source(const int32_t* x, int64_t t) const override { return after_first_occurrence(x, t); }

  std::string legend(const TaskConfig& c) const override {
    const int64_t V = c.vocab_size();
    return "keys 1.." + std::to_string(V / 2 - 1) + ", values " + std::to_string(V / 2) + ".." +
           std::to_string(V - 1) + ", filler 0" +
           (mixed() ? "; row i holds K = (" + int_list_text(num_kv_pairs, ' ') + ")[i mod " +
                          std::to_string(num_kv_pairs.size()) + "] pairs"
                    : "");
  }

 private:
  bool mixed() const { return num_kv_pairs.size() > 1; }
  int64_t pairs_of_row(int64_t row) const { return num_kv_pairs[size_t(row) % num_kv_pairs.size()]; }
  static std::string pairs_metric(int64_t k) { return "acc@K=" + std::to_string(k); }
};

}  // namespace

TaskSpec mqar_task() {
  return {"mqar", "multi-query associative recall", [] { return std::make_unique<MqarTask>(); }};
}

}  // namespace tri
