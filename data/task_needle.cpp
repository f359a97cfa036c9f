// needle: a key-value pair at a chosen distance from the query (docs/TASKS.md).
//   Fillers from [1, V/4), one key from [V/4, V/2) at T-2-d and its value from [V/2, V) right
//   after it; the last input is the key. Scored: t = T-1, target the value. Row i of a batch
//   uses distance distances[i % count]; extra metrics: the accuracy per distance (acc@d).
//   --distractors: fillers drawn from the values' range too, so the value is no longer the one
//   token of its kind in the row: reaching it needs the key matched, not only a long reach.
#include "data/tasks.hpp"

namespace tri {

namespace {

class NeedleTask : public TaskOptions {
 public:
  std::vector<int64_t> distances = {4, 16, 64, 128, 250};
  bool distractors = false;

  void visit(FieldVisitor& v) override {
    v.int_list("distance", distances, {1, int64_t(1) << 24},
               "key-query distances, comma-separated; row i uses the (i mod count)-th");
    v.boolean("distractors", distractors,
              "fillers drawn from the values' range too: the answer must be found by its key", FieldAge::added_later);
  }
  std::unique_ptr<Options> clone() const override { return std::make_unique<NeedleTask>(*this); }

  int64_t default_seq_len() const override { return 256; }
  int64_t default_vocab() const override { return 8192; }

  void validate(const TaskConfig& c) const override {
    const int64_t T = c.length(), V = c.vocab_size();
    if (V < 8) throw Error("task needle: --vocab " + std::to_string(V) + " too small (allowed: >= 8: fillers, keys, values)");
    for (int64_t d : distances)
      if (d > T - 2)
        throw Error("task needle: --distance " + std::to_string(d) + " does not fit --seq-len " + std::to_string(T) +
                    " (allowed: 1.." + std::to_string(T - 2) + ")");
  }

  void fill_row(const TaskConfig& c, Rng rng, Row& r) const override {
    const int64_t T = r.T, V = c.vocab_size(), distance = distances[size_t(r.index) % distances.size()];
    // Fillers: [1, V/4), or with distractors [1, V/4) and [V/2, V) alike.
    const uint64_t low = uint64_t(V / 4 - 1), fillers = distractors ? low + uint64_t(V - V / 2) : low;
    for (int64_t t = 0; t < T; ++t) {
      const uint64_t f = rng.below(fillers);
      r.x[t] = int32_t(f < low ? 1 + f : uint64_t(V / 2) + (f - low));
    }
    const int32_t key = int32_t(V / 4 + int64_t(rng.below(uint64_t(V / 2 - V / 4))));
    const int32_t value = int32_t(V / 2 + int64_t(rng.below(uint64_t(V - V / 2))));
    const int64_t p = T - 2 - distance;
    r.x[p] = key;
    r.x[p + 1] = value;
    r.x[T - 1] = key;
    r.score(T - 1, value);
    r.group = distance;
  }

  double chance_accuracy(const TaskConfig& c) const override {
    return 1.0 / double(c.vocab_size() - c.vocab_size() / 2);
  }
  int64_t recall_source(const int32_t* x, int64_t t) const override { return after_first_occurrence(x, t); }

  std::string legend(const TaskConfig& c) const override {
    const int64_t V = c.vocab_size();
    auto n = [](int64_t v) { return std::to_string(v); };
    return "fillers 1.." + n(V / 4 - 1) + (distractors ? " and " + n(V / 2) + ".." + n(V - 1) : "") + ", keys " +
           n(V / 4) + ".." + n(V / 2 - 1) + ", values " + n(V / 2) + ".." + n(V - 1);
  }

  std::string group_name() const override { return "distance"; }

  // acc@d: the accuracy of the rows at distance d, by increasing d.
  void extra_scores(const TaskConfig&, const Batch& batch, const Tensor& logits, const GreedyDecoder*,
                    ExtraScores& out) const override {
    for (const auto& [d, a] : accuracy_by_group(batch, logits)) extra_score(out, "acc@" + std::to_string(d)).add(a);
  }
};

}  // namespace

TaskSpec needle_task() {
  return {"needle", "recall a value at a set distance", [] { return std::make_unique<NeedleTask>(); }};
}

}  // namespace tri
