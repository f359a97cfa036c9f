// The trilemma binary end to end: help, info (text and JSON), config files, exit codes and
// one-line errors. JSON is checked by Python's json module, an independent parser.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "framework/runtime/runtime.hpp"
#include "tests/run_binary.hpp"

extern "C" char* openblas_get_corename(void);

namespace {

using namespace trilemma_test;

// The value of a top-level key of a JSON text, printed by Python ("<invalid json>" when it
// does not parse, "<missing>" when the key is absent).
std::string json_value(const std::string& json, const std::string& key) {
  const fs::path file = scratch("value.json");
  write_text(file, json);
  std::string cmd =
      "/usr/bin/python3 -c 'import json, sys\n"
      "try: d = json.load(open(sys.argv[1]))\n"
      "except ValueError: print(\"<invalid json>\"); sys.exit()\n"
      "print(json.dumps(d[sys.argv[2]]) if sys.argv[2] in d else \"<missing>\")' '" +
      file.string() + "' '" + key + "'";
  return capture(cmd);
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

TEST_CASE("cli: no command, --help and help list the commands") {
  for (std::string args : {"", "--help", "help"}) {
    CAPTURE(args);
    Run r = run(args);
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    for (const char* cmd : {"info", "bench", "help"})
      CHECK(r.out.find(std::string("  ") + cmd + " ") != std::string::npos);
  }
}

TEST_CASE("cli: info --help lists every option with its default") {
  Run r = run("info --help");
  CHECK(r.code == 0);
  CHECK(r.out.find("--threads N (=0)") != std::string::npos);
  CHECK(r.out.find("0 = the physical cores") != std::string::npos);
  CHECK(r.out.find("--gemm NAME (=auto)") != std::string::npos);
  CHECK(r.out.find("--config FILE") != std::string::npos);
  CHECK(r.out.find("--json") != std::string::npos);
  // `help info` is the same text.
  CHECK(run("help info").out == r.out);
}

TEST_CASE("cli: info prints the banner with the OpenBLAS kernel and the threads") {
  Run r = run("info");
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  // This process loads the same OpenBLAS under the same environment, so picks the same kernel.
  CHECK(r.out.find(std::string("kernel=") + openblas_get_corename()) != std::string::npos);
  CHECK(r.out.find("threads: " + std::to_string(tri::physical_cores()) + " ") != std::string::npos);
  CHECK(run("info --threads 1").out.find("threads: 1 ") != std::string::npos);
  CHECK(run("info --threads 0").out.find("threads: " + std::to_string(tri::physical_cores())) !=
        std::string::npos);
}

TEST_CASE("cli: info --json is one JSON object with the banner's fields") {
  Run r = run("info --json --threads 1");
  CHECK(r.code == 0);
  CHECK(count_lines(r.out) == 1);
  CHECK(json_value(r.out, "threads") == "1");
  CHECK(json_value(r.out, "openblas_threads") == "1");
  CHECK(json_value(r.out, "openblas_core") == quoted(openblas_get_corename()));
  CHECK(json_value(r.out, "gemm_backend") == quoted("dnnl"));
  CHECK(json_value(r.out, "physical_cores") == std::to_string(tri::physical_cores()));
  for (const char* key : {"version", "openblas_config", "openblas_core_generic", "onednn_version",
                          "onednn_isa", "logical_cpus", "cpu_model", "cpu_features", "warning"}) {
    std::string name = key;
    CAPTURE(name);
    std::string v = json_value(r.out, key);
    CHECK(v != "<missing>");
    CHECK(v != "<invalid json>");
  }
  CHECK(json_value(run("info --json --gemm openblas").out, "gemm_backend") == quoted("openblas"));
}

TEST_CASE("cli: bad command lines exit 2 with one line naming the bad value") {
  struct Bad {
    const char* args;
    const char* named;
  };
  const Bad cases[] = {
      {"frobnicate", "'frobnicate'"},
      {"info --no-such-option", "'--no-such-option'"},
      {"info --threads -1", "-1"},
      {"info --threads abc", "'abc'"},
      {"info --threads", "--threads"},
      {"info --gemm foo", "'foo'"},
      {"info stray", "'stray'"},
      {"bench", "--benchmark"},
      {"bench nosuch", "'nosuch'"},
      {"bench gemm --sizes 64,x", "'x'"},
      {"bench gemm --repeats 0", "--repeats 0"},
      {"bench gemm --min-time -1", "--min-time -1"},
      // Boost's messages would substitute these placeholders forever (a hang, found by fuzzing).
      {"info --x%original_token%", "'%original_token%'"},
      {"info --threads %value%", "'%value%'"},
  };
  for (const Bad& b : cases) {
    std::string args = b.args;
    CAPTURE(args);
    Run r = run(b.args);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.rfind("trilemma: ", 0) == 0);
    CHECK(r.err.find(b.named) != std::string::npos);
  }
  // What is allowed is named too.
  CHECK(run("info --gemm foo").err.find("auto, dnnl, openblas") != std::string::npos);
  CHECK(run("frobnicate").err.find("info") != std::string::npos);
}

TEST_CASE("cli: --config sets options and the command line overrides them") {
  const fs::path config = scratch("threads.ini");
  write_text(config, "# a comment\nthreads = 1\ngemm = openblas\n");
  Run r = run("info --json --config '" + config.string() + "'");
  CHECK(r.code == 0);
  CHECK(json_value(r.out, "threads") == "1");
  CHECK(json_value(r.out, "gemm_backend") == quoted("openblas"));
  r = run("info --json --threads 2 --config '" + config.string() + "'");
  CHECK(json_value(r.out, "threads") == "2");
  CHECK(json_value(r.out, "gemm_backend") == quoted("openblas"));

  const fs::path bad = scratch("bad.ini");
  write_text(bad, "threads = 1\nno_such_key = 3\n");
  r = run("info --config '" + bad.string() + "'");
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("no_such_key") != std::string::npos);

  const fs::path looping = scratch("placeholder.ini");  // the fuzzer's input that hung, in short
  write_text(looping, "threads = 1\nw1eiltg-decay %%%%original_token% = 2\n");
  r = run("info --config '" + looping.string() + "'");
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("%original_token%") != std::string::npos);

  const std::string missing = scratch("missing.ini").string();
  r = run("info --config '" + missing + "'");
  CHECK(r.code == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find(missing) != std::string::npos);
  CHECK(r.err.find("No such file") != std::string::npos);
}

TEST_CASE("cli: a generic OpenBLAS kernel in use is never silent, and unused is not a warning") {
  Run r = run("info --gemm openblas", "OPENBLAS_CORETYPE=Prescott");
  CHECK(r.code == 0);
  size_t at = r.out.find("\nWARNING: ");
  REQUIRE(at != std::string::npos);
  std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  CHECK(line.find("Prescott") != std::string::npos);
  CHECK(json_value(run("info --json --gemm openblas", "OPENBLAS_CORETYPE=Prescott").out, "warning") != "null");
  // GEMM on oneDNN (the default) does not use the slow kernel: the banner names it, no warning.
  r = run("info", "OPENBLAS_CORETYPE=Prescott");
  CHECK(r.out.find("(GENERIC, slow)") != std::string::npos);
  CHECK(r.out.find("WARNING") == std::string::npos);
  CHECK(json_value(run("info --json", "OPENBLAS_CORETYPE=Prescott").out, "warning") == "null");
  // A measurement on the slow kernel says so in its summary line, on stdout, before the numbers.
  r = run("bench gemm --sizes 32 --model-shapes false --repeats 1 --min-time 0.001 --threads 1 --gemm openblas",
          "OPENBLAS_CORETYPE=Prescott");
  CHECK(r.code == 0);
  CHECK(r.out.rfind("trilemma ", 0) == 0);
  CHECK(r.out.find("\nWARNING: GEMM runs on OpenBLAS's generic 'Prescott' kernel") != std::string::npos);
  CHECK(r.err.empty());
  // An AVX2 kernel on a CPU that has AVX2: no warning.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    CHECK(run("info --gemm openblas", "OPENBLAS_CORETYPE=Haswell").out.find("WARNING") == std::string::npos);
}

namespace {

// Whether `condition`, a Python expression over `rows` (bench gemm --json's rows), holds.
bool gemm_rows_satisfy(const std::string& json, const std::string& condition) {
  const fs::path file = scratch("bench_gemm.json"), script = scratch("bench_gemm_rows.py");
  write_text(file, json);
  write_text(script, "import json, sys\nrows = json.load(open(sys.argv[1]))['rows']\nsys.exit(0 if " + condition +
                         " else 1)\n");
  return std::system(("/usr/bin/python3 '" + script.string() + "' '" + file.string() + "'").c_str()) == 0;
}

}  // namespace

TEST_CASE("cli: bench gemm runs (tiny sizes) and prints JSON rows, nothing else") {
  Run r = run("bench gemm --sizes 32,48 --model-shapes false --repeats 1 --min-time 0.001 "
              "--threads 1 --json");
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(count_lines(r.out) == 1);
  CHECK(json_value(r.out, "threads") == "1");
  // As a table, the one-line runtime summary comes first.
  Run table = run("bench gemm --sizes 32 --model-shapes false --repeats 1 --min-time 0.001 --threads 1");
  CHECK(table.code == 0);
  CHECK(table.out.rfind("trilemma ", 0) == 0);
  CHECK(table.out.find("1 thread of") != std::string::npos);
  // Two rows, each with three positive GFLOP/s figures.
  CHECK(gemm_rows_satisfy(r.out, "[r['m'] for r in rows] == [32, 48] and all(r[k] > 0 for r in rows "
                                 "for k in ('framework', 'onednn', 'openblas'))"));
}

TEST_CASE("cli: bench gemm times given shapes, cold, and names a malformed shape in one line") {
  Run r = run("bench gemm --sizes 16 --model-shapes false --shapes 40x24x8:TN,8x40x24:NT --cold true "
              "--repeats 1 --min-time 0.001 --threads 1 --json");
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(json_value(r.out, "cold") == "true");
  CHECK(gemm_rows_satisfy(r.out, "[(r['m'], r['n'], r['k'], r['op']) for r in rows] == [(16, 16, 16, 'NN'), "
                                 "(40, 24, 8, 'TN'), (8, 40, 24, 'NT')] and all(r['onednn'] > 0 for r in rows)"));
  for (const char* bad : {"40x24:NT", "40x24x8:NX", "40x0x8:NN", "40x24x8"}) {
    Run e = run(std::string("bench gemm --sizes 16 --model-shapes false --shapes ") + bad + " --threads 1");
    CHECK(e.code == 2);
    CHECK(count_lines(e.err) == 1);
    CHECK(e.err.find(std::string("'") + bad + "'") != std::string::npos);
  }
}
