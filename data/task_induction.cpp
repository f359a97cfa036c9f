// induction: induction heads (Mamba §4.1.2, Table 2/11; Olsson et al. 2022; docs/TASKS.md).
//   Content tokens 1..V-1 at 0..T-2, with the pair (trigger 0, x) at p, p+1 < T-2; the last
//   input is the trigger. Scored: t = T-1, target x.
#include "data/tasks.hpp"

namespace tri {

namespace {

class InductionTask : public TaskOptions {
 public:
  void visit(FieldVisitor&) override {}  // no options of its own
  std::unique_ptr<Options> clone() const override { return std::make_unique<InductionTask>(*this); }

  int64_t default_seq_len() const override { return 256; }

  void validate(const TaskConfig& c) const override {
    if (c.length() < 4)
      throw Error("task induction: --seq-len " + std::to_string(c.length()) + " too short (allowed: >= 4)");
  }

  void fill_row(const TaskConfig& c, Rng rng, Row& r) const override {
    const int64_t T = r.T, V = c.vocab_size();
    for (int64_t t = 0; t < T - 1; ++t) r.x[t] = int32_t(1 + rng.below(uint64_t(V - 1)));
    const int64_t p = int64_t(rng.below(uint64_t(T - 3)));  // p + 1 < T - 2
    r.x[p] = 0;
    r.x[T - 1] = 0;
    r.score(T - 1, r.x[p + 1]);
  }

  double chance_accuracy(const TaskConfig& c) const override { return 1.0 / double(c.vocab_size() - 1); }
  int64_t recall_source(const int32_t* x, int64_t t) const override { return after_first_occurrence(x, t); }

  std::string legend(const TaskConfig& c) const override {
    return "trigger 0, content 1.." + std::to_string(c.vocab_size() - 1);
  }
};

}  // namespace

TaskSpec induction_task() {
  return {"induction", "recall the token after the earlier trigger", [] { return std::make_unique<InductionTask>(); }};
}

}  // namespace tri
