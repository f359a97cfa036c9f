// What the fuzz targets share: the input as a file (the readers under test take paths, as the
// CLI gives them), and the rule for what an input may do. A fuzz target returns normally when
// the code under test accepts the input or refuses it with the project's own one-line errors
// (tri::Error, boost::program_options::error, as run_cli turns them into "trilemma: ..." lines);
// anything else is a finding: a crash, a sanitizer report, or another exception, whose message
// ("stoll", "bad_alloc") would not tell a user what was wrong.
#pragma once
#include <unistd.h>

#include <boost/program_options/errors.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "framework/runtime/runtime.hpp"
#include "framework/core/tensor.hpp"

namespace tri::fuzz {

// A per-process file holding the current input; removed at exit.
struct InputFile {
  std::string path;
  ~InputFile() { std::remove(path.c_str()); }
};

inline const std::string& input_path(const char* extension) {
  static const InputFile file{(std::filesystem::temp_directory_path() /
                               ("trilemma-fuzz-" + std::to_string(getpid()) + extension)).string()};
  return file.path;
}

inline const std::string& write_input(const uint8_t* data, size_t size, const char* extension) {
  const std::string& path = input_path(extension);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

// Runs fn on the input; the project's own errors are expected outcomes.
template <class F>
void expect_clean(F&& fn) {
  try {
    fn();
  } catch (const tri::Error&) {
  } catch (const boost::program_options::error&) {
  }
}

// One thread: the targets parse and load, they do not compute.
inline void single_threaded() { set_threads(1); }

}  // namespace tri::fuzz
