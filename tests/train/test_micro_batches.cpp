// --micro-batches K: each step's batch in K forward and backward passes whose gradients sum
// before one update. K passes reach the parameters of one pass on the same batches to float32
// rounding, the same bits every time for a given K, resume bit for bit (and refuse another K),
// record K in the run's config, and refuse a K above the batch in one line.
#include <doctest/doctest.h>

#include "tests/run_files.hpp"

namespace {

using namespace trilemma_test;

// A small MQAR run on a batch of 12 rows; a recurrent family (Mamba 2), whose scan and
// convolution take their rows per sequence, and whose logged accuracy sums over the passes.
std::string small_run(const fs::path& out, int64_t steps, const std::string& extra = "") {
  return "train --model mamba2 --task mqar --seq-len 32 --num-kv-pairs 4 --vocab 64 --d-model 32 --batch 12 "
         "--steps " + std::to_string(steps) + " --eval-every 10 --log-every 5 --threads 1 --progress none --out '" +
         out.string() + "'" + extra;
}

}  // namespace

TEST_CASE("train: --micro-batches K reaches one pass's parameters to float32 rounding, the same bits every time") {
  const fs::path start = scratch("mb-start"), one = scratch("mb1"), four = scratch("mb4"), again = scratch("mb4-again"),
                 uneven = scratch("mb5");
  REQUIRE(run(small_run(start, 20, " --stop-at 0")).code == 0);
  REQUIRE(run(small_run(one, 20)).code == 0);
  REQUIRE(run(small_run(four, 20, " --micro-batches 4")).code == 0);
  REQUIRE(run(small_run(again, 20, " --micro-batches 4")).code == 0);
  REQUIRE(run(small_run(uneven, 20, " --micro-batches 5")).code == 0);  // rows 2, 2, 3, 2, 3
  CHECK(json_value(four / "summary.json", "params_fnv1a") == json_value(again / "summary.json", "params_fnv1a"));
  CHECK(json_value(four / "summary.json", "params_fnv1a") != json_value(one / "summary.json", "params_fnv1a"));
  CHECK(read_text(four / "config.ini").find("micro-batches = 4") != std::string::npos);
  // K passes sum K partial gradients where one pass sums all rows in one GEMM: float32 rounding
  // apart (as P MPI ranks are, test_mpi.cpp). A pass counted twice, a row left out or a share
  // of the mean weighted wrongly moves the weights by O(0.1) of the distance they travelled.
  for (const fs::path& dir : {four, uneven}) {
    CAPTURE(dir);
    CHECK(relative_difference(dir / "last.h5", one / "last.h5", start / "last.h5") < 1e-4);
    // The logged loss and gradient norm are the global batch's, not a pass's; the logged
    // accuracy counts every pass's rows (a pass's alone would differ by O(1/K) of the rows).
    for (const char* key : {"loss", "grad_norm"}) {
      CAPTURE(key);
      CHECK(metric(dir, 20, "train", key) == doctest::Approx(metric(one, 20, "train", key)).epsilon(1e-5));
    }
    CHECK(metric(dir, 20, "train", "acc") == doctest::Approx(metric(one, 20, "train", "acc")).epsilon(1e-3));
  }
}

TEST_CASE("train: a run with --micro-batches resumes bit for bit, and K above the batch is refused in one line") {
  const fs::path whole = scratch("mb-whole"), parted = scratch("mb-parted");
  REQUIRE(run(small_run(whole, 20, " --micro-batches 3")).code == 0);
  REQUIRE(run(small_run(parted, 20, " --micro-batches 3 --stop-at 10")).code == 0);
  // Another K would change the rest of the run's bits: refused, as every option that shapes what
  // a step computes.
  const Run other = run("train --resume '" + parted.string() + "' --micro-batches 2 --threads 1 --progress none");
  CHECK(other.code == 2);
  CHECK(other.err.find("--micro-batches 2 differs from the run's 3") != std::string::npos);
  REQUIRE(run("train --resume '" + parted.string() + "' --threads 1 --progress none").code == 0);
  CHECK(json_value(parted / "summary.json", "params_fnv1a") == json_value(whole / "summary.json", "params_fnv1a"));
  CHECK(metrics_without_timing(parted / "metrics.csv") == metrics_without_timing(whole / "metrics.csv"));

  const Run bad = run(small_run(scratch("mb-bad"), 5, " --micro-batches 13"));
  CHECK(bad.code == 2);
  CHECK(bad.err == "trilemma: --micro-batches 13 is out of range (allowed: 1..12, at most --batch)\n");
}
