// The synthetic recall tasks of docs/TASKS.md and their registry. A row is (inputs, next-token
// targets, loss mask) of length seq_len. Every row is a pure function of (stream seed, batch
// index, row) drawn with tri::Rng only, so a stream can resume at any batch, evaluation can take
// any slice, and the same seed gives the same bits on every machine.
//
// A task is one file (data/task_<name>.cpp): its options, its row generator, the legend of its
// tokens and the metrics it adds, as a TaskOptions subclass, and its entry (a TaskSpec). The
// built-ins are listed once in tasks.cpp; tests may register more (register_task).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <utility>
#include <vector>

#include "framework/ops/ops.hpp"
#include "framework/config/options.hpp"
#include "framework/core/rng.hpp"

namespace tri {

struct TaskConfig;

struct Batch {
  IntTensor inputs;            // [B, T]
  IntTensor targets;           // [B, T], kIgnoreIndex where mask is 0
  std::vector<uint8_t> mask;   // [B*T], 1 at scored positions
  std::vector<int64_t> group;  // [B], a row's group for the task's extra metrics (needle: the
                               // key-query distance); empty when the task has none
};

// One row of a batch being drawn: inputs x, targets y, mask m, all of length T.
struct Row {
  int32_t* x;
  int32_t* y;
  uint8_t* m;
  int64_t T;
  int64_t index;  // the row's index in its batch
  int64_t group;  // set by tasks with groups (Batch::group)
  void score(int64_t t, int32_t target) {
    y[t] = target;
    m[t] = 1;
  }
};

// A share of hits: token accuracies and the tasks' extra metrics.
struct Accuracy {
  int64_t correct = 0, total = 0;
  double value() const { return total ? double(correct) / double(total) : 0.0; }
  void add(const Accuracy& o) { correct += o.correct, total += o.total; }
};
// The metrics a task adds beyond token and sequence accuracy, by name, in the task's order
// (needle: "acc@4", "acc@16", ...; mqar's mix: "acc@K=4", ...; copy: "gen_acc").
using ExtraScores = std::vector<std::pair<std::string, Accuracy>>;
Accuracy& extra_score(ExtraScores& scores, const std::string& name);  // added when missing

// Greedy decoding of the model under evaluation: the tokens generated after `prompt`, at most
// max_new, ending early with stop_token (>= 0) included. Tasks with a generated answer score it.
using GreedyDecoder = std::function<std::vector<int32_t>(const std::vector<int32_t>& prompt,
                                                         int64_t max_new, int32_t stop_token)>;

// A task's own options and behaviour. visit() lists its option fields (keys unique across the
// tasks, as they share one command line).
class TaskOptions : public Options {
 public:
  virtual int64_t default_seq_len() const = 0;
  virtual int64_t default_vocab() const { return 16; }
  // A vocabulary the task's own options fix (copy: alphabet + 4); --vocab is then 0 or that.
  virtual int64_t fixed_vocab() const { return 0; }
  // Throws an Error naming the bad option and its limit; seq-len and vocab are resolved.
  virtual void validate(const TaskConfig& c) const = 0;
  // Draws row r from its own generator (by value: its state stays in registers); every input
  // is written, targets default to kIgnoreIndex.
  virtual void fill_row(const TaskConfig& c, Rng rng, Row& r) const = 0;
  // What its token ids mean, e.g. "keys 1..31, values 32..63, filler 0".
  virtual std::string legend(const TaskConfig& c) const = 0;
  // What Batch::group holds for this task (needle: "distance").
  virtual std::string group_name() const { return "group"; }
  // A task with a generated answer (its scored span, decoded greedily) returns the token that
  // ends it (copy: EOS); -1: none.
  virtual int32_t stop_token(const TaskConfig&) const { return -1; }
  // The task's extra metrics over one batch and its logits [B, T, V]; `decode` is null when
  // the caller does not decode (then metrics that need it are left out).
  virtual void extra_scores(const TaskConfig&, const Batch&, const Tensor& /*logits*/,
                            const GreedyDecoder* /*decode*/, ExtraScores&) const {}
  // The validation accuracy early stopping and best.h5 read: by default the token accuracy;
  // mqar's mix, its lowest accuracy over K.
  virtual double stopping_accuracy(double token_acc, const ExtraScores& /*extra*/) const { return token_acc; }
  // The token accuracy of a uniform guess among the answers the task can score (mqar: one of
  // the V/2 value ids); the level an accuracy is read against.
  virtual double chance_accuracy(const TaskConfig& c) const = 0;
  // The task at another sequence length, for length generalisation: by default the same kind
  // of row in a longer (or shorter) sequence; copy, at another length than its own, makes
  // every string fill the sequence.
  virtual void set_length(TaskConfig& c, int64_t seq_len) const;

  // For attention maps: the earlier input position holding what scored position t of a row
  // (inputs x) recalls, e.g. mqar's value after the matching key; -1 when the task names none.
  virtual int64_t recall_source(const int32_t* /*x*/, int64_t /*t*/) const { return -1; }
};

// The argmax accuracy of the scored positions of each group's rows (Batch::group), by group.
std::map<int64_t, Accuracy> accuracy_by_group(const Batch& batch, const Tensor& logits);

// The position right after the first earlier occurrence of x[t] (-1 if none): the recall source
// of mqar, induction and needle, whose query token repeats the token before the answer.
int64_t after_first_occurrence(const int32_t* x, int64_t t);

struct TaskSpec {
  std::string name;     // the --task value
  std::string summary;  // one line for --help
  std::function<std::unique_ptr<TaskOptions>()> options;  // the task's options at their defaults
  std::type_index options_type = typeid(void);             // filled by the registry from options()
};

// Adds a task; an Error when the name is taken.
void register_task(TaskSpec spec);
// The entry of `name`; an Error naming the registered tasks when there is none.
const TaskSpec& task_spec(const std::string& name);
std::vector<std::string> task_names();
std::vector<const TaskSpec*> tasks();

// A task and its options: the fields every task shares, and those of the task `task` names.
struct TaskConfig : Options {
  std::string task = "mqar";
  int64_t seq_len = 0;  // 0: the task's default (copy 2*max-len+3, mqar 128, others 256)
  int64_t vocab = 0;    // 0: the task's default (16; mqar and needle 8192; copy alphabet + 4)
  OptionsBox<TaskOptions> options;

  TaskConfig();  // mqar with every default
  static TaskConfig of(const std::string& task);  // `task` with every default
  const TaskOptions& behaviour() const { return *options; }

  int64_t length() const;      // seq_len, or the task's default when 0
  int64_t vocab_size() const;  // ids are 0..vocab_size()-1

  void visit(FieldVisitor& v) override;  // task, seq-len, vocab, then the task's own
  std::unique_ptr<Options> clone() const override { return std::make_unique<TaskConfig>(*this); }
  // Ranges, then the task's own checks; an Error naming the first bad option and its limit.
  void validate() const;
};

// The seed of one of a run's three streams from one base seed: "train" (the batches it trains on),
// "valid" (its periodic evaluations: early stopping, best.h5, choosing a recipe) and "eval" (the
// held-out test stream: the final evaluation a run reports, `trilemma eval`, `generate`).
// Distinct constants through seed_mix, so no two streams share a row.
uint64_t stream_seed(uint64_t base_seed, const std::string& split);

// Batch `batch_index` of the stream `seed` (validates cfg first).
Batch make_batch(const TaskConfig& cfg, uint64_t seed, uint64_t batch_index, int64_t batch_size);

// The answer of row b of a task with a generated answer: the first run of scored positions
// predicts inputs[start .. start+length) (copy: the string and EOS); the prompt is
// inputs[0, start).
struct AnswerSpan {
  int64_t start, length;
};
AnswerSpan answer_span(const Batch& batch, int64_t row);

}  // namespace tri
