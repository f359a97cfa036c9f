// trilemma <command> [options] (cli/cli_main.cpp has the commands).
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "framework/system/process_start.hpp"
#include "cli/cli.hpp"

namespace {

// SIGINT and SIGTERM blocked before any library's initialiser runs (OpenBLAS starts its threads
// in one), so that every thread is born with them blocked (framework/system/stop_signals.hpp says why):
// the executable's .preinit_array runs first. The raw system call: nothing is initialised yet,
// a sanitizer's runtime included.
__attribute__((no_sanitize("address", "undefined"))) void block_stop_signals_first(int, char**, char**) {
  const uint64_t set = (uint64_t(1) << (SIGINT - 1)) | (uint64_t(1) << (SIGTERM - 1));
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, nullptr, sizeof set);
}
__attribute__((section(".preinit_array"), used)) void (*const kBlockStopSignalsFirst)(int, char**, char**) =
    block_stop_signals_first;

}  // namespace

int main(int argc, char** argv) {
  tri::start_process(argv);
  return tri::cli::run_cli({argv + 1, argv + argc});
}
