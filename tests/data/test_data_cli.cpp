// `trilemma data`: the rows a user sees (show) and the batches a dump writes, which must be the
// ones the trainer draws.
#include <doctest/doctest.h>

#include <string>

#include "data/tasks.hpp"
#include "framework/io/h5.hpp"
#include "tests/compare.hpp"
#include "tests/run_binary.hpp"

namespace {

using namespace tri;
using trilemma_test::set_options;

TaskConfig config(const std::string& task, const TextMap& options = {}) {
  TaskConfig c = TaskConfig::of(task);
  set_options(c, options);
  return c;
}

}  // namespace

TEST_CASE("tasks: trilemma data show") {
  using trilemma_test::run;
  trilemma_test::Run r = run("data show --task mqar --rows 2 --threads 1");
  CHECK(r.code == 0);
  CHECK(r.err.empty());  // no banner: data show measures nothing
  CHECK(r.out.find("row 1: 8 scored") != std::string::npos);
  CHECK(r.out.find("row 2") == std::string::npos);
  CHECK(r.out.find("[") != std::string::npos);
  CHECK(r.out.find("keys 1..4095, values 4096..8191, filler 0") != std::string::npos);
  for (const char* task : {"copy", "selective-copy", "induction", "needle"}) {
    CAPTURE(task);
    CHECK(run(std::string("data show --task ") + task + " --rows 1 --threads 1").code == 0);
  }
  CHECK(run("data show --task needle --rows 2 --threads 1").out.find("row 1: 1 scored, distance 16") != std::string::npos);
  struct Bad {
    const char* args;
    const char* named;
  };
  r = run("data show --task mqar --seq-len 32 --vocab 64 --num-kv-pairs 2,8 --rows 2 --threads 1");
  CHECK(r.code == 0);
  CHECK(r.out.find("row 0: 2 scored, pairs 2") != std::string::npos);
  CHECK(r.out.find("row 1: 8 scored, pairs 8") != std::string::npos);
  CHECK(r.out.find("row i holds K = (2 8)[i mod 2] pairs") != std::string::npos);
  for (Bad bad : {Bad{"data show --task mqar --num-kv-pairs 40", "--num-kv-pairs 40"},
                  Bad{"data show --task mqar --num-kv-pairs ''", "--num-kv-pairs '' holds no value"},
                  Bad{"data show --task mqar --num-kv-pairs 4,40", "--num-kv-pairs 40 too large for --seq-len 128"},
                  Bad{"data show --task mqar --vocab 16 --seq-len 12 --num-kv-pairs 2,8", "--vocab 16 holds 7"},
                  Bad{"data show --task bogus", "--task 'bogus' unknown"}, Bad{"data show --task mqar --rows 0", "--rows"},
                  Bad{"data show --task needle --distance 5,x", "--distance"},
                  Bad{"data show --task mqar --split test", "--split"}, Bad{"data list --task mqar", "list"},
                  Bad{"data show --task copy --seq-len 10", "--max-len"},
                  Bad{"data show --task mqar --max-len 9", "--max-len 9 is an option of copy, not of task mqar"}}) {
    CAPTURE(bad.args);
    r = run(std::string(bad.args) + " --threads 1");
    CHECK(r.code == 2);
    CHECK(trilemma_test::count_lines(r.err) == 1);
    CHECK(r.err.find(bad.named) != std::string::npos);
  }
}

TEST_CASE("tasks: trilemma data dump writes the batches the trainer draws") {
  using trilemma_test::run;
  const std::string file = trilemma_test::scratch("dump.h5").string();
  trilemma_test::Run r = run("data dump --task needle --seq-len 40 --distance 4,16 --seed 5 --batch 3 --batches 4"
                             " --rows 6 --out '" + file + "' --threads 1");
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("batches 3..6 of 6 x 40 tokens") != std::string::npos);
  const TaskConfig c = config("needle", {{"seq-len", "40"}, {"distance", "4,16"}});
  H5File f(file, H5File::Mode::read);
  Shape shape;
  const std::vector<int32_t> inputs = f.read_ints("/inputs", &shape), targets = f.read_ints("/targets"),
                             mask = f.read_ints("/mask");
  CHECK(shape == Shape{4, 6, 40});
  // Batch i of the file is batch 3 + i of the training stream of seed 5, as Trainer draws it.
  for (int64_t i = 0; i < 4; ++i) {
    const Batch b = make_batch(c, stream_seed(5, "train"), uint64_t(3 + i), 6);
    const size_t at = size_t(i * 6 * 40), n = 6 * 40;
    CHECK(std::vector<int32_t>(inputs.begin() + at, inputs.begin() + at + n) == b.inputs.values());
    CHECK(std::vector<int32_t>(targets.begin() + at, targets.begin() + at + n) == b.targets.values());
    CHECK(std::vector<int32_t>(mask.begin() + at, mask.begin() + at + n) == std::vector<int32_t>(b.mask.begin(), b.mask.end()));
  }
  CHECK(f.attr_string("/", "task") == "needle");
  CHECK(f.attr_string("/", "split") == "train");
  CHECK(f.attr_int("/", "seed") == 5);
  CHECK(f.attr_int("/", "first_batch") == 3);
  CHECK(f.attr_string("/", "task_config").find("distance = 4,16\n") != std::string::npos);

  struct Bad {
    const char* args;
    const char* named;
  };
  for (Bad bad : {Bad{"data dump --task mqar", "--out"}, Bad{"data dump --task mqar --out x.h5", "--rows B"}, Bad{"data show --task mqar --out x.h5", "--out is an option of data dump"},
                  Bad{"data show --task mqar --batches 2", "--batches is an option of data dump"},
                  Bad{"data dump --task mqar --batches 0 --out x.h5", "--batches 0"}}) {
    CAPTURE(bad.args);
    r = run(std::string(bad.args) + " --threads 1");
    CHECK(r.code == 2);
    CHECK(trilemma_test::count_lines(r.err) == 1);
    CHECK(r.err.find(bad.named) != std::string::npos);
  }
  r = run("data dump --task mqar --rows 2 --out '" + trilemma_test::scratch("no-folder").string() + "/x.h5' --threads 1");
  CHECK(r.code == 1);
  CHECK(trilemma_test::count_lines(r.err) == 1);
}
