// selective-copy (Gu & Dao 2023, Mamba §4.1.1, Table 1; docs/TASKS.md).
//   Noise 0 with M data tokens (1..A-2) at sorted distinct positions among the first T-M slots,
//   then M markers A-1. Scored: the markers, targets the data tokens in order.
#include "data/tasks.hpp"

namespace tri {

namespace {

class SelectiveCopyTask : public TaskOptions {
 public:
  int64_t num_tokens = 16;  // M

  void visit(FieldVisitor& v) override {
    v.integer("num-tokens", num_tokens, {1, int64_t(1) << 23}, "data tokens to copy");
  }
  std::unique_ptr<Options> clone() const override { return std::make_unique<SelectiveCopyTask>(*this); }

  int64_t default_seq_len() const override { return 256; }

  void validate(const TaskConfig& c) const override {
    const int64_t T = c.length(), V = c.vocab_size();
    if (V < 3)
      throw Error("task selective-copy: --vocab " + std::to_string(V) + " too small (allowed: >= 3: noise, data, marker)");
    if (2 * num_tokens > T)
      throw Error("task selective-copy: --num-tokens " + std::to_string(num_tokens) +
                  " out of range (allowed: 1..seq-len/2 = " + std::to_string(T / 2) +
                  ": M data tokens among the first seq-len-M slots)");
  }

  void fill_row(const TaskConfig& c, Rng rng, Row& r) const override {
    const int64_t T = r.T, M = num_tokens, A = c.vocab_size(), slots = T - M;
    // Selection sampling (Knuth's algorithm S): M of the first T-M slots, visited in order.
    int64_t chosen = 0;
    for (int64_t t = 0; t < slots; ++t) {
      const bool take = int64_t(rng.below(uint64_t(slots - t))) < M - chosen;
      r.x[t] = take ? int32_t(1 + rng.below(uint64_t(A - 2))) : 0;
      if (take) r.score(T - M + chosen++, r.x[t]);
    }
    for (int64_t t = slots; t < T; ++t) r.x[t] = int32_t(A - 1);
  }

  double chance_accuracy(const TaskConfig& c) const override { return 1.0 / double(c.vocab_size() - 2); }

  std::string legend(const TaskConfig& c) const override {
    const int64_t V = c.vocab_size();
    return "noise 0, data 1.." + std::to_string(V - 2) + ", marker " + std::to_string(V - 1);
  }
};

}  // namespace

TaskSpec selective_copy_task() {
  return {"selective-copy", "copy the data tokens scattered in noise",
          [] { return std::make_unique<SelectiveCopyTask>(); }};
}

}  // namespace tri
