// Runs and checkpoints written by an earlier trilemma keep working (tests/data/compat, made by
// the commands in its README before the run config became typed): for each family, a run
// paused at step 10 of 20 and the same run uninterrupted, with its evaluation and generation.
//  - the paused run resumes to step 20, and its parameters are the uninterrupted run's;
//  - the old checkpoint evaluates to the old evaluation and generates the old tokens;
//  - the old config.ini, read with --config, repeats the run.
// Bit for bit where this binary's float kernels give the old ones' bits: on a machine of the
// same kind (the CPU's vector features, oneDNN's ISA and the build type,
// tests/data/compat/machine.txt) whose kernels repeat the old uninterrupted run from its
// config exactly (a faster kernel may move the last bits on purpose; test_train_cli checks
// bit-exact resume within this binary), the check is identity. Elsewhere the first ten steps'
// last bits were another machine's or kernel's, so the check is a tolerance: the final
// parameters' RMS distance from the old run's, relative to how far those ten steps moved them,
// must be below 1e-3. A lost or misread optimizer state, step count or schedule moves them by
// O(1) of that; float rounding by ~1e-6.
#include <doctest/doctest.h>

#include <string>

#include "tests/run_binary.hpp"

namespace {

using namespace trilemma_test;

const fs::path kFixtures = fs::path(TRILEMMA_SOURCE_DIR) / "tests" / "data" / "compat";
const char* const kFamilies[] = {"attention", "linear", "mamba"};

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

std::string python(const std::string& program, const std::string& args) {
  return capture("/usr/bin/python3 -c '" + program + "' " + args);
}

std::string summary(const fs::path& dir, const std::string& key) {
  return python("import json, sys\nprint(json.load(open(sys.argv[1]))[sys.argv[2]])", q(dir / "summary.json") + " " + key);
}

// Non-timing metrics columns (step, split, loss, acc, seq_acc, grad_norm, lr).
std::string metrics(const fs::path& dir) {
  return python("import sys\nprint(\"\".join(\",\".join(l.split(\",\")[:7]) + \"\\n\" for l in open(sys.argv[1])))",
                q(dir / "metrics.csv"));
}

bool same_machine_kind() {
  const std::string here = capture("'" TRILEMMA_BINARY "' info --json | /usr/bin/python3 -c 'import json, sys\n"
                                   "d = json.load(sys.stdin)\nprint(\" | \".join(d[k] for k in (\"cpu_features\", \"onednn_isa\", \"build\")))'");
  return here + "\n" == read_text(kFixtures / "machine.txt");
}

// RMS of (new - old) over every parameter, relative to the RMS of (old - start): how far the
// two runs ended apart, in units of how far the steps moved the parameters.
double relative_distance(const fs::path& got, const fs::path& old, const fs::path& start) {
  const std::string r = python(
      "import h5py, numpy as np, sys\n"
      "g, o, s = (h5py.File(p, \"r\")[\"model\"] for p in sys.argv[1:4])\n"
      "d = sum(float(((g[k][()] - o[k][()]) ** 2).sum()) for k in o)\n"
      "m = sum(float(((o[k][()] - s[k][()]) ** 2).sum()) for k in o)\n"
      "print(repr((d / m) ** 0.5))",
      q(got) + " " + q(old) + " " + q(start));
  return std::stod(r);
}

}  // namespace

TEST_CASE("old run folders resume across the change, to the uninterrupted run's parameters") {
  const bool machine = same_machine_kind();
  for (const char* family : kFamilies) {
    CAPTURE(family);
    const fs::path paused = kFixtures / (std::string(family) + "-paused");
    const fs::path whole = kFixtures / (std::string(family) + "-whole");
    // The old config.ini repeats the run; identically when the kernels are the old ones.
    const fs::path again = scratch(std::string("compat-config-") + family);
    REQUIRE(run("train --config " + q(paused / "config.ini") + " --out " + q(again)).code == 0);
    CHECK(relative_distance(again / "last.h5", whole / "last.h5", paused / "last.h5") < 1e-3);
    const bool exact = machine && summary(again, "params_fnv1a") == summary(whole, "params_fnv1a");
    std::string kind = family;
    kind += machine ? ": fixture machine kind matches" : ": fixture machine kind differs";
    kind += exact ? ", kernels repeat the old run: bits compared" : ", kernels differ: parameters within 1e-3";
    MESSAGE(kind);
    const fs::path dir = scratch(std::string("compat-") + family);
    fs::copy(paused, dir, fs::copy_options::recursive);
    Run r = run("train --resume " + q(dir));
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(summary(dir, "step") == "20");
    CHECK(summary(dir, "status") == "finished");
    const double distance = relative_distance(dir / "last.h5", whole / "last.h5", paused / "last.h5");
    CAPTURE(distance);
    CHECK(distance < 1e-3);
    if (exact) {
      CHECK(summary(dir, "params_fnv1a") == summary(whole, "params_fnv1a"));
      CHECK(metrics(dir) == metrics(whole));
      CHECK(distance == 0);
    }
  }
}

TEST_CASE("old checkpoints evaluate and generate as they did") {
  const bool exact = same_machine_kind();
  for (const char* family : kFamilies) {
    CAPTURE(family);
    const fs::path whole = kFixtures / (std::string(family) + "-whole");
    Run r = run("eval " + q(whole / "last.h5") + " --json --threads 1");
    REQUIRE(r.code == 0);
    write_text(scratch("eval.json"), r.out);
    // The old JSON printed six significant digits; token counts are exact.
    const std::string compared = python(
        "import json, sys\n"
        "new, old = (json.load(open(p))[\"results\"][0] for p in sys.argv[1:3])\n"
        "print(abs(new[\"loss\"] - old[\"loss\"]) <= 1e-5 * old[\"loss\"] + 5e-6, new[\"rows\"] == old[\"rows\"],"
        " new[\"scored\"] == old[\"scored\"], round(abs(new[\"token_acc\"] - old[\"token_acc\"]) * new[\"scored\"]))",
        q(scratch("eval.json")) + " " + q(whole / "eval.json"));
    CHECK(compared.rfind("True True True ", 0) == 0);
    if (exact) CHECK(compared == "True True True 0");  // the same argmax at every scored position
  }
  // Copy: the rows generate() decodes, token for token.
  Run g = run("generate " + q(kFixtures / "linear-whole" / "last.h5") + " --threads 1 --rows 3");
  REQUIRE(g.code == 0);
  const std::string old = read_text(kFixtures / "linear-whole" / "generate.txt");
  auto rows = [](const std::string& text) { return text.substr(text.find("\nrow 0:")); };
  if (exact) CHECK(rows(g.out) == rows(old));
  CHECK(g.out.find("exact ") != std::string::npos);
}
