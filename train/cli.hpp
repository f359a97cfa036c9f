// The trilemma command-line tool: `trilemma <command> [options]`.
// Commands are rows of one table (main.cpp); each lives in its own train/cmd_<name>.cpp and
// provides an options builder and a run function. main.cpp adds the common options
// (--config, --threads, --gemm, --help), parses the command line and the config file, applies
// the runtime settings, prints the runtime banner and calls run.
#pragma once
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "framework/tensor.hpp"

namespace tri::cli {

namespace po = boost::program_options;

// A command's options: named ones (also read from --config) and positional arguments, each
// mapped onto a named option.
struct CommandOptions {
  po::options_description named{100};
  po::positional_options_description positional;
};

struct Command {
  const char* name;
  const char* summary;                    // one line, for `trilemma help`
  void (*add_options)(CommandOptions&);
  int (*run)(const po::variables_map&);   // returns the exit code
  bool prints_runtime;  // prints the runtime itself (info); others get the banner on stderr
};

// A bad command line, option or value: exit code 2 (a runtime tri::Error exits with 1).
struct UsageError : Error {
  using Error::Error;
};

inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A notifier for po::value<T>()->notifier(...): rejects values outside [lo, hi] while the
// command line is parsed, before the command starts.
template <class T>
auto in_range(const std::string& option, T lo, T hi) {
  return [=](const T& v) {
    if (!(v >= lo && v <= hi))
      throw UsageError("--" + option + " " + number_text(v) + " is out of range (allowed: " +
                       number_text(lo) + ".." + number_text(hi) + ")");
  };
}

// One pair per command, defined in train/cmd_<name>.cpp.
void info_options(CommandOptions& o);
int run_info(const po::variables_map& vm);
void bench_options(CommandOptions& o);
int run_bench(const po::variables_map& vm);
void inspect_options(CommandOptions& o);
int run_inspect(const po::variables_map& vm);
void demo_options(CommandOptions& o);
int run_demo(const po::variables_map& vm);
void data_options(CommandOptions& o);
int run_data(const po::variables_map& vm);
void train_options(CommandOptions& o);
int run_train(const po::variables_map& vm);
void eval_options(CommandOptions& o);
int run_eval(const po::variables_map& vm);
void generate_options(CommandOptions& o);
int run_generate(const po::variables_map& vm);

// Hand-written JSON: a quoted, escaped string and a number (null when not finite).
inline std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

inline std::string json_number(double v) {
  return std::isfinite(v) ? number_text(v) : "null";
}

}  // namespace tri::cli
