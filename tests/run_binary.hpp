// Running the built trilemma binary from a test: a private scratch folder and a run()
// that captures exit code, stdout and stderr.
#pragma once
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace trilemma_test {

namespace fs = std::filesystem;

struct Run {
  int code;
  std::string out, err;
};

// A private directory for this process's files, removed at exit.
inline fs::path scratch(const std::string& name) {
  static struct Dir {
    fs::path path = fs::temp_directory_path() / ("trilemma_test_" + std::to_string(getpid()));
    Dir() { fs::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } dir;
  return dir.path / name;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// Runs `env trilemma args` through the shell, capturing stdout and stderr separately.
inline Run run(const std::string& args, const std::string& env = "") {
  const fs::path out = scratch("out"), err = scratch("err");
  std::string cmd = env + " '" TRILEMMA_BINARY "' " + args + " >'" + out.string() + "' 2>'" +
                    err.string() + "'";
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(out), read_text(err)};
}

// Lines of a text; a last line without its newline counts too.
inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n + (!s.empty() && s.back() != '\n');
}

// The standard output of a shell command, without trailing newlines.
inline std::string capture(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "<popen failed>";
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// The value of a top-level key in a JSON file, as Python's json module prints it.
inline std::string json_value(const fs::path& file, const std::string& key) {
  const std::string cmd = "/usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); "
                          "print(json.dumps(d.get(sys.argv[2])))' '" + file.string() + "' '" + key + "'";
  return capture(cmd);
}

// A command line's words, for spawn(); a word in single quotes loses them (a path with spaces
// does not survive this: the tests' scratch paths have none).
inline std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w.size() > 1 && w[0] == '\'' ? w.substr(1, w.size() - 2) : w);
  return out;
}

// Starts the binary in the background with output to files and `env` (NAME=value) added to its
// environment; returns its pid. With a `launcher` (e.g. mpirun and its options), the launcher
// starts the binary.
inline pid_t spawn(const std::vector<std::string>& args, const fs::path& log, const std::string& env = "",
                   const std::vector<std::string>& launcher = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!env.empty()) putenv(const_cast<char*>(env.c_str()));
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (const std::string& a : launcher) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(const_cast<char*>(TRILEMMA_BINARY));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace trilemma_test
