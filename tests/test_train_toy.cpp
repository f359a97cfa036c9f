// End to end: `trilemma demo` trains a small model on the lag task to high held-out accuracy,
// and two runs with the same seed give identical bits (losses and every parameter).
#include <doctest/doctest.h>


#include "tests/run_binary.hpp"

using namespace trilemma_test;

namespace {
// The text after `key` on the line that holds it, up to the next space (or the whole rest
// of the line when `key` starts the line with "final:").
std::string field(const std::string& text, const std::string& key, bool rest_of_line = false) {
  const size_t at = text.find(key);
  REQUIRE_MESSAGE(at != std::string::npos, "no '" << key << "' in:\n" << text);
  const size_t from = at + key.size(), end = text.find(rest_of_line ? '\n' : ' ', from);
  return text.substr(from, end == std::string::npos ? std::string::npos : end - from);
}
}  // namespace

TEST_CASE("demo learns the lag task and repeats bit for bit") {
  const std::string args = "demo --steps 150 --log-every 50 --threads 2";
  Run a = run(args), b = run(args);
  REQUIRE(a.code == 0);
  REQUIRE(b.code == 0);
  const double acc = std::stod(field(a.out, "token_acc "));
  CHECK(acc >= 0.95);
  // The loss falls from about log(16) = 2.77 to well under 0.5.
  CHECK(std::stod(field(a.out, "eval: loss ")) < 0.5);
  const std::string final_a = field(a.out, "final:", true), final_b = field(b.out, "final:", true);
  CHECK(final_a == final_b);

  SUBCASE("another seed gives other parameters") {
    Run c = run(args + " --seed 7");
    REQUIRE(c.code == 0);
    CHECK(field(c.out, "params_fnv1a ", true) != field(a.out, "params_fnv1a ", true));
  }
}

TEST_CASE("demo repeats bit for bit on one thread too") {
  Run a = run("demo --steps 60 --threads 1"), b = run("demo --steps 60 --threads 1");
  REQUIRE(a.code == 0);
  CHECK(field(a.out, "final:", true) == field(b.out, "final:", true));
}

TEST_CASE("demo rejects bad values with one line and exit code 2") {
  Run r = run("demo --lag 0");
  CHECK(r.code == 2);
  CHECK(r.err.find("--lag 0") != std::string::npos);
}
