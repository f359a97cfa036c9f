// A running process's signal set-up as /proc shows it: whether it has a handler for SIGINT or
// SIGTERM, and which of its threads block them.
#pragma once
#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <string>

#include "tests/run_files.hpp"

namespace trilemma_test {

struct StopSignalSetup {
  bool handler = false;  // SigCgt holds SIGINT or SIGTERM
  int receivers = 0;     // threads named "signals" (in sigwait, which /proc shows as unblocked)
  int blocking = 0;      // other threads that block both
  int unblocking = 0;    // other threads that do not: any of them could run a signal's action
};

// "Key:\tvalue" lines of a /proc status file.
inline std::string proc_field(const std::string& status, const std::string& key) {
  for (const std::string& line : text_lines(status))
    if (line.rfind(key + ":\t", 0) == 0) return line.substr(key.size() + 2);
  return "";
}

inline StopSignalSetup stop_signal_setup(pid_t pid) {
  const uint64_t stops = (uint64_t(1) << (SIGINT - 1)) | (uint64_t(1) << (SIGTERM - 1));
  const fs::path proc = "/proc/" + std::to_string(pid);
  StopSignalSetup s;
  s.handler = (std::stoull(proc_field(read_text(proc / "status"), "SigCgt"), nullptr, 16) & stops) != 0;
  for (const auto& task : fs::directory_iterator(proc / "task")) {
    const std::string status = read_text(task.path() / "status");
    if (proc_field(status, "Name") == "signals") ++s.receivers;
    else if ((std::stoull(proc_field(status, "SigBlk"), nullptr, 16) & stops) == stops) ++s.blocking;
    else ++s.unblocking;
  }
  return s;
}

}  // namespace trilemma_test
