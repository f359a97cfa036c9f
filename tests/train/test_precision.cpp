// train --precision bf16: trains, gives the same bits twice, resumes bit for bit and records its
// precision, which eval keeps; on a CPU without native bf16 (forced with TRILEMMA_CPU_NO_BF16=1)
// train, eval and sweep refuse it in one line before anything is written, and `info` says which.
#include <doctest/doctest.h>

#include "framework/runtime/gemm_bf16.hpp"
#include "tests/run_files.hpp"

namespace {

using namespace trilemma_test;

std::string small_run(const fs::path& out, const std::string& extra) {
  return "train --model attention --task mqar --seq-len 32 --num-kv-pairs 4 --vocab 64 --d-model 32 --batch 16 "
         "--steps 20 --eval-every 10 --log-every 5 --threads 1 --progress none --out '" + out.string() + "'" + extra;
}

}  // namespace

TEST_CASE("train --precision bf16: the same bits twice, resumed bit for bit, recorded in the config") {
  if (!tri::bf16_unavailable_reason().empty()) {
    const Run r = run(small_run(scratch("bf16-here"), " --precision bf16"));
    CHECK(r.code == 2);
    MESSAGE("this CPU lacks native bf16: only the refusal was checked");
    return;
  }
  const fs::path a = scratch("bf16-a"), b = scratch("bf16-b"), parted = scratch("bf16-parted"), fp32 = scratch("fp32");
  REQUIRE(run(small_run(a, " --precision bf16")).code == 0);
  REQUIRE(run(small_run(b, " --precision bf16")).code == 0);
  REQUIRE(run(small_run(fp32, "")).code == 0);
  REQUIRE(run(small_run(parted, " --precision bf16 --stop-at 10")).code == 0);
  REQUIRE(run("train --resume '" + parted.string() + "' --threads 1 --progress none").code == 0);
  const std::string bits = json_value(a / "summary.json", "params_fnv1a");
  CHECK(json_value(b / "summary.json", "params_fnv1a") == bits);
  CHECK(json_value(parted / "summary.json", "params_fnv1a") == bits);
  CHECK(metrics_without_timing(parted / "metrics.csv") == metrics_without_timing(a / "metrics.csv"));
  CHECK(json_value(fp32 / "summary.json", "params_fnv1a") != bits);  // the GEMMs did round
  CHECK(read_text(a / "config.ini").find("precision = bf16") != std::string::npos);
  CHECK(read_text(fp32 / "config.ini").find("precision = fp32") != std::string::npos);
  // The checkpoint's /config carries it too: a resume with another precision is refused.
  const Run other = run("train --resume '" + parted.string() + "' --precision fp32 --steps 30 --threads 1");
  CHECK(other.code == 2);
  CHECK(other.err.find("--precision fp32 differs from the run's bf16") != std::string::npos);
  // eval runs a bf16 checkpoint in bf16 unless told otherwise; without bf16 it is refused, and
  // --precision fp32 evaluates it anyway.
  CHECK(run("eval '" + (a / "last.h5").string() + "' --threads 1").code == 0);
  const Run refused = run("eval '" + (a / "last.h5").string() + "' --threads 1", "TRILEMMA_CPU_NO_BF16=1");
  CHECK(refused.code == 2);
  CHECK(refused.err.find("--precision bf16 needs a CPU with native bf16") != std::string::npos);
  CHECK(run("eval '" + (a / "last.h5").string() + "' --threads 1 --precision fp32", "TRILEMMA_CPU_NO_BF16=1").code == 0);
  // bf16 inputs change the path, not the learning: 20 steps move the loss alike (within 5%).
  CHECK(metric(a, 20, "train", "loss") == doctest::Approx(metric(fp32, 20, "train", "loss")).epsilon(0.05));
}

TEST_CASE("train --precision bf16 on a CPU without it (forced off): one line, exit 2, nothing written") {
  const fs::path out = scratch("bf16-refused");
  const Run r = run(small_run(out, " --precision bf16"), "TRILEMMA_CPU_NO_BF16=1");
  CHECK(r.code == 2);
  CHECK(r.err == "trilemma: --precision bf16 needs a CPU with native bf16, and this one lacks avx512_bf16 and "
                 "amx_bf16 (switched off by TRILEMMA_CPU_NO_BF16=1) (allowed: fp32)\n");
  CHECK(!fs::exists(out));
  const fs::path grid = scratch("bf16.grid"), sweep_out = scratch("bf16-sweep");
  write_text(grid, "model = attention\ntask = mqar\nseq-len = 32\nnum-kv-pairs = 4\nvocab = 64\nd-model = 32\n"
                   "batch = 16\nsteps = 2\nprecision = bf16\n");
  const Run sweep = run("sweep '" + grid.string() + "' --out '" + sweep_out.string() + "' --threads 1",
                        "TRILEMMA_CPU_NO_BF16=1");
  CHECK(sweep.code == 2);
  CHECK(sweep.err.find("--precision bf16 needs a CPU with native bf16") != std::string::npos);
  CHECK(!fs::exists(sweep_out / "runs"));
  // fp32 is unaffected by the switch.
  CHECK(run(small_run(scratch("fp32-forced"), ""), "TRILEMMA_CPU_NO_BF16=1").code == 0);
  auto info_bf16 = [](const std::string& env) {
    const fs::path file = scratch("info.json");
    write_text(file, run("info --json", env).out);
    return json_value(file, "bf16");
  };
  CHECK(info_bf16("TRILEMMA_CPU_NO_BF16=1").find("not available (lacks") != std::string::npos);
  CHECK(info_bf16("").find(tri::bf16_unavailable_reason().empty() ? "native (" : "not available (lacks") !=
        std::string::npos);
  // The kernel it names follows the switch that takes AMX away.
  if (tri::bf16_unavailable_reason().empty())
    CHECK(info_bf16("TRILEMMA_CPU_NO_AMX=1").find("kernel: oneDNN's matmul") != std::string::npos);
}
