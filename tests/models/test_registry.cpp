// The registries of model families and tasks (models/family.hpp, data/tasks.hpp):
//  - a toy mixer and a toy task, defined only in this file and registered at run time, train,
//    checkpoint, resume, evaluate and show their rows through the command line's own code
//    (run_cli, in this process): adding a mixer or a task needs no other file;
//  - every option the command line declares has the default of its struct, and an option that
//    two families or tasks share is the same option in both;
//  - every built-in family names its PyTorch twin, and tests/torch/models.py maps the family to
//    that class;
//  - registering a taken name is an error;
//  - the registries of position encodings, optimizers, schedules and benchmarks list their names,
//    and an unknown name is one line naming it and the allowed ones, the same line everywhere.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include "framework/core/argmax.hpp"
#include "framework/core/autograd.hpp"
#include "framework/core/init.hpp"
#include "bench/bench.hpp"
#include "framework/config/registry.hpp"
#include "framework/optim/optim.hpp"
#include "models/family.hpp"
#include "models/lm.hpp"
#include "models/position_encodings.hpp"
#include "tests/compare.hpp"
#include "tests/run_binary.hpp"
#include "cli/cli.hpp"
#include "cli/cli_options.hpp"
#include "train/optimizers.hpp"

using namespace tri;
namespace fs = std::filesystem;

namespace {

// ---- a toy mixer: y_t = W x_{t - shift} (zeros before the start) ---------------------------

struct ShiftOptions : Options {
  int64_t shift = 1;
  void visit(FieldVisitor& v) override { v.integer("shift", shift, {1, 64}, "how far back the mixer looks"); }
  std::unique_ptr<Options> clone() const override { return std::make_unique<ShiftOptions>(*this); }
};

struct ShiftState : MixerState {
  std::vector<Tensor> last;  // the last `shift` inputs [B, 1, D], oldest first
  int64_t bytes() const override { return int64_t(last.size() * sizeof(float)) * (last.empty() ? 0 : last[0].numel()); }
};

class ShiftMixer : public Mixer {
 public:
  ShiftMixer(const ModelConfig& cfg, Rng& rng)
      : shift_(cfg.options<ShiftOptions>().shift), d_(cfg.d_model), w_(init_linear_weight(d_, d_, rng)) {
    add_parameter("weight", w_);
  }
  Tensor forward(const Tensor& x, const Tensor& residual) override {
    const int64_t B = x.size(0), T = x.size(1), s = std::min(shift_, T);
    Tensor shifted = concat({Tensor::zeros(Shape{B, s, d_}), slice(x, 1, 0, T - s)}, 1);
    return linear(shifted, w_, Tensor(), residual);
  }
  std::unique_ptr<MixerState> new_state(int64_t batch) const override {
    auto st = std::make_unique<ShiftState>();
    for (int64_t i = 0; i < shift_; ++i) st->last.push_back(Tensor::zeros(Shape{batch, 1, d_}));
    return st;
  }
  Tensor step(const Tensor& x, MixerState& state) override {
    NoGradGuard no_grad;
    ShiftState& st = state_as<ShiftState>(state, "shift");
    Tensor y = linear(st.last.front(), w_);
    st.last.erase(st.last.begin());
    st.last.push_back(x.clone());
    return y;
  }
  int64_t state_bytes(int64_t) const override { return shift_ * d_ * int64_t(sizeof(float)); }

 private:
  int64_t shift_, d_;
  Tensor w_;
};

FamilySpec shift_family() {
  FamilySpec f;
  f.name = "shift";
  f.summary = "a test mixer: the input shift steps back";
  f.options = [] { return std::make_unique<ShiftOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<ShiftMixer>(c, rng); };
  f.norm = Norm::Kind::rms;
  f.positions = {"none", "learned"};
  f.decode_state = "the last shift inputs";
  return f;
}

// ---- a toy task: the target at t is the input at t - lag; extra metric: the later half ---

class LagTask : public TaskOptions {
 public:
  int64_t lag = 1;
  void visit(FieldVisitor& v) override { v.integer("lag", lag, {1, 1 << 20}, "how far back the target lies"); }
  std::unique_ptr<Options> clone() const override { return std::make_unique<LagTask>(*this); }
  int64_t default_seq_len() const override { return 24; }
  void validate(const TaskConfig& c) const override {
    if (lag >= c.length()) throw Error("task lag: --lag " + std::to_string(lag) + " must be below --seq-len");
  }
  void fill_row(const TaskConfig& c, Rng rng, Row& r) const override {
    for (int64_t t = 0; t < r.T; ++t) r.x[t] = int32_t(rng.below(uint64_t(c.vocab_size())));
    for (int64_t t = lag; t < r.T; ++t) r.score(t, r.x[t - lag]);
  }
  std::string legend(const TaskConfig& c) const override {
    return "tokens 0.." + std::to_string(c.vocab_size() - 1);
  }
  double chance_accuracy(const TaskConfig& c) const override { return 1.0 / double(c.vocab_size()); }
  void extra_scores(const TaskConfig&, const Batch& batch, const Tensor& logits, const GreedyDecoder*,
                    ExtraScores& out) const override {
    const int64_t B = batch.inputs.shape()[0], T = batch.inputs.shape()[1], V = logits.size(-1);
    Accuracy& late = extra_score(out, "late_acc");
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = T / 2; t < T; ++t) {
        const int64_t i = b * T + t;
        late.correct += argmax(logits.data() + i * V, V) == batch.targets.data()[i];
        ++late.total;
      }
  }
};

TaskSpec lag_task() {
  return {"lag", "a test task: the token lag steps back", [] { return std::make_unique<LagTask>(); }};
}

void register_toys() {
  static const bool done = [] {
    register_family(shift_family());
    register_task(lag_task());
    return true;
  }();
  (void)done;
}

int run_cli_line(const std::string& line) {
  std::vector<std::string> args;
  std::istringstream words(line);
  for (std::string w; words >> w;) args.push_back(w);
  return cli::run_cli(args);
}

// What a command line run in this process printed on stderr, and its exit code.
std::pair<int, std::string> run_cli_stderr(const std::string& line) {
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* f = std::tmpfile();
  dup2(fileno(f), 2);
  const int code = run_cli_line(line);
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(f);
  std::string err;
  for (int c; (c = std::fgetc(f)) != EOF;) err += char(c);
  std::fclose(f);
  return {code, err};
}

std::string summary_field(const fs::path& dir, const std::string& expr) {
  return trilemma_test::capture("/usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))\nprint(json.dumps(" +
                                expr + "))' '" + (dir / "summary.json").string() + "'");
}

}  // namespace

TEST_CASE("a mixer and a task defined in one file train, resume and evaluate through the CLI's code") {
  register_toys();
  using trilemma_test::scratch;
  const fs::path dir = scratch("toy"), paused = scratch("toy-paused");
  const std::string run = " --model shift --shift 1 --task lag --lag 1 --vocab 8 --d-model 16 --mlp none --batch 16"
                          " --lr 0.02 --warmup 5 --eval-every 40 --eval-batches 2 --progress none --threads 1";
  REQUIRE(run_cli_line("train" + run + " --steps 80 --out " + dir.string()) == 0);
  CHECK(summary_field(dir, "d[\"status\"]") == "\"finished\"");
  // The toy learns its task: the previous token, exactly, on held-out rows (chance is 1/8).
  CHECK(summary_field(dir, "d[\"final_eval\"][\"token_acc\"] > 0.95") == "true");
  CHECK(summary_field(dir, "[d[\"config\"][k] for k in (\"model\", \"shift\", \"task\", \"lag\")]") ==
        "[\"shift\", 1, \"lag\", 1]");
  CHECK(summary_field(dir, "\"late_acc\" in d[\"final_eval\"]") == "true");  // the task's own metric
  CHECK(summary_field(dir, "d[\"state_bytes_per_sequence\"]") == std::to_string(2 * 16 * 4));  // 2 layers
  const std::string config = trilemma_test::read_text(dir / "config.ini");
  CHECK(config.find("shift = 1\n") != std::string::npos);
  CHECK(config.find("d-state") == std::string::npos);  // only the options of this family

  // Stopped and resumed, it reaches the uninterrupted run's bits.
  REQUIRE(run_cli_line("train" + run + " --steps 80 --stop-at 33 --out " + paused.string()) == 0);
  REQUIRE(run_cli_line("train --resume " + paused.string()) == 0);
  CHECK(summary_field(paused, "d[\"params_fnv1a\"]") == summary_field(dir, "d[\"params_fnv1a\"]"));

  // Evaluation, at other lengths too; the checkpoint names its family and task.
  CHECK(run_cli_line("eval " + (dir / "last.h5").string() + " --lengths 24,48 --threads 1") == 0);
  CHECK(run_cli_line("eval " + (dir / "last.h5").string() + " --lag 2 --threads 1") == 0);
  CHECK(run_cli_line("generate " + (dir / "last.h5").string() + " --prompt 1,2,3 --max-new 4 --threads 1") == 0);
  CHECK(run_cli_line("data show --task lag --lag 3 --rows 1") == 0);

  // Its options are options like any other: checked, and refused for other families and tasks.
  const std::string bad = " --steps 1 --out " + scratch("toy-bad").string();
  for (auto [line, error] : {std::pair{"train --model shift --shift 0 --task lag", "--shift 0 is out of range (allowed: 1..64)"},
                             {"train --model attention --shift 2 --task lag", "--shift 2 is an option of shift, not of model attention"},
                             {"train --model shift --task mqar --lag 2", "--lag 2 is an option of lag, not of model shift on task mqar"},
                             {"train --model shift --task lag --lag 24", "task lag: --lag 24 must be below --seq-len"}}) {
    const auto [code, err] = run_cli_stderr(line + bad);
    INFO(std::string(line) << ": " << err);
    CHECK(code == 2);
    CHECK(err.find(std::string("trilemma: ") + error) == 0);
    CHECK(trilemma_test::count_lines(err) == 1);
  }
  CHECK(!fs::exists(scratch("toy-bad")));

  // Decoding through its recurrent state equals its parallel forward.
  ModelConfig c = ModelConfig::of("shift");
  c.vocab = 8, c.d_model = 16;
  c.options<ShiftOptions>().shift = 3;
  LanguageModel m(c, 1);
  NoGradGuard no_grad;
  const IntTensor ids = trilemma_test::random_ids(2, 10, 8, 5);
  const Tensor full = m.forward(ids);
  DecodeState st = m.new_decode_state(2);
  for (int64_t t = 0; t < 10; ++t) {
    const Tensor one = m.step(IntTensor(Shape{2, 1}, std::vector<int32_t>{ids.data()[t], ids.data()[10 + t]}), st);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t v = 0; v < 8; ++v)
        REQUIRE(one.data()[b * 8 + v] == doctest::Approx(full.data()[(b * 10 + t) * 8 + v]).epsilon(1e-5));
  }
}

TEST_CASE("every declared option has its struct's default, and shared options agree") {
  register_toys();
  cli::po::options_description all(100);
  all.add(cli::model_options()).add(cli::task_options()).add(cli::training_options()).add(cli::runtime_options());
  // The defaults as the structs write them: the default run, then each family's and task's own.
  TextMap want;
  write_text(train::RunConfig(), want);
  std::map<std::string, std::string> owner;
  auto own = [&](const Options& o, const std::string& name) {
    TextMap t;
    write_text(o, t);
    for (const auto& [k, v] : t) {
      if (want.count(k) && owner.count(k)) {
        INFO(k << ": " << owner[k] << " and " << name);
        CHECK(want[k] == v);  // a key two families or tasks share has one default
      }
      if (!want.count(k) || owner.count(k)) want[k] = v;
      owner[k] = name;
    }
  };
  for (const FamilySpec* f : families()) own(*f->options(), f->name);
  for (const TaskSpec* t : tasks()) own(*t->options(), t->name);
  for (const auto& opt : all.options()) {
    const std::string& key = opt->long_name();
    INFO(key);
    REQUIRE(want.count(key) == 1);
    boost::any value;
    REQUIRE(opt->semantic()->apply_default(value));
    std::string text;
    if (auto* i = boost::any_cast<int64_t>(&value)) text = std::to_string(*i);
    else if (auto* d = boost::any_cast<double>(&value)) text = exact_number(*d);
    else if (auto* b = boost::any_cast<bool>(&value)) text = *b ? "1" : "0";
    else text = boost::any_cast<std::string>(value);
    CHECK(text == want[key]);
  }
  CHECK(all.options().size() == want.size());  // and every field is declared
}

TEST_CASE("every built-in family names its PyTorch twin, which models.py maps it to") {
  std::string pairs;
  for (const char* name : {"attention", "linear", "mamba", "deltanet", "gated_deltanet", "mamba2"}) {
    const FamilySpec& f = family_spec(name);
    REQUIRE(!f.parity_model.empty());
    pairs += std::string(pairs.empty() ? "" : " ") + f.name + "=" + f.parity_model;
  }
  const std::string got = trilemma_test::capture(
      "cd '" TRILEMMA_SOURCE_DIR "/tests/torch' && /usr/bin/python3 -c 'import models\n"
      "print(\" \".join(f\"{k}={v.__name__}\" for k, v in models.MIXERS.items()))'");
  CHECK(got == pairs);
}

TEST_CASE("registering a taken name is an error; unknown names list the registered ones") {
  register_toys();
  CHECK_THROWS_WITH_AS(register_family(shift_family()), doctest::Contains("'shift' exists already"), Error);
  CHECK_THROWS_WITH_AS(register_task(lag_task()), doctest::Contains("'lag' exists already"), Error);
  CHECK_THROWS_WITH_AS(family_spec("rnn"), doctest::Contains("(allowed: attention, linear, mamba, deltanet, gated_deltanet, mamba2, shift)"), Error);
  CHECK_THROWS_WITH_AS(task_spec("sort"), doctest::Contains("needle, lag)"), Error);
}

TEST_CASE("each registry lists its names; an unknown name is the one line naming the allowed ones") {
  using Names = std::vector<std::string>;
  CHECK(position_names() == Names{"none", "sinusoidal", "learned", "rope", "alibi"});
  CHECK(schedule_names() == Names{"constant", "cosine", "wsd"});
  CHECK(train::optimizer_names() == Names{"adamw", "sgd"});
  CHECK(bench::benchmark_names() == Names{"gemm", "mixers", "data", "scaling", "train", "decode"});
  auto message = [](auto lookup) {
    try {
      lookup();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([] { position_spec("relative"); }) ==
        "--pos 'relative' unknown (allowed: none, sinusoidal, learned, rope, alibi)");
  CHECK(message([] { schedule_spec("linear"); }) == "--schedule 'linear' unknown (allowed: constant, cosine, wsd)");
  CHECK(message([] { LrSchedule("linear", 1e-3, 0, 10); }) ==
        "--schedule 'linear' unknown (allowed: constant, cosine, wsd)");
  CHECK(message([] { train::optimizer_spec("adam"); }) == "--optimizer 'adam' unknown (allowed: adamw, sgd)");
  CHECK(message([] { bench::benchmark_spec("gpu"); }) ==
        "benchmark 'gpu' unknown (allowed: gemm, mixers, data, scaling, train, decode)");
  // A choice field's check says it in the same words.
  train::OptimizerConfig c;
  c.optimizer = "adam";
  CHECK(message([&] { check_ranges(c); }) == "--optimizer 'adam' unknown (allowed: adamw, sgd)");
  CHECK(unknown_name("--x", "y", {"a", "b"}).what() == std::string("--x 'y' unknown (allowed: a, b)"));
}

TEST_CASE("registry entries: optimizers build their own kind, encodings state what they do") {
  LanguageModel m(ModelConfig::of("mamba"), 1);
  for (const std::string& name : train::optimizer_names()) {
    train::OptimizerConfig c;
    c.optimizer = name;
    c.lr = 0.25;
    const std::unique_ptr<Optimizer> opt = train::make_optimizer(c, m);
    CHECK(opt->name() == name);
    CHECK(opt->lr() == 0.25);  // the config's --lr, the one place it is set
  }
  for (const std::string& name : position_names()) {
    const PositionSpec& p = position_spec(name);
    CHECK(p.table == (name == "learned"));
    CHECK(p.rotary == (name == "rope"));
    CHECK(p.alibi == (name == "alibi"));
    CHECK(p.sinusoids == (name == "sinusoidal"));
  }
  for (const FamilySpec* f : families())
    for (const std::string& p : f->positions) CHECK_NOTHROW(position_spec(p));
  FamilySpec odd = shift_family();
  odd.name = "odd-positions";
  odd.positions = {"none", "relative"};
  CHECK_THROWS_WITH_AS(register_family(odd), doctest::Contains("--pos 'relative' unknown"), Error);
  // The learned table's limit, checked in one place.
  ModelConfig learned = ModelConfig::of("attention");
  learned.pos = "learned", learned.max_seq_len = 32;
  CHECK_NOTHROW(check_position_limit(learned, 32, "--seq-len 32"));
  CHECK_THROWS_WITH_AS(check_position_limit(learned, 33, "--seq-len 33"),
                       "--seq-len 33 exceeds the learned positions (--max-seq-len 32; allowed: at most 32 positions)",
                       Error);
  learned.pos = "rope";
  CHECK_NOTHROW(check_position_limit(learned, 1 << 20, "--seq-len 1048576"));
}

TEST_CASE("the command line: unknown benchmarks are one line, and help lists every benchmark") {
  const auto [code, err] = run_cli_stderr("bench gpu");
  CHECK(code == 2);
  CHECK(err == "trilemma: benchmark 'gpu' unknown (allowed: gemm, mixers, data, scaling, train, decode)\n");
  const std::string help = trilemma_test::capture("'" TRILEMMA_BINARY "' help");
  CHECK(help.find("run a benchmark (gemm, mixers, data, scaling, train, decode)") != std::string::npos);
}
