// `trilemma train --config FILE` on untrusted text: boost's config-file parser with train's
// options and their notifiers, then the typed config (every field parsed, resolved and
// validated), as a new run builds it before touching any file.
#include "fuzz/fuzz_input.hpp"
#include "cli/cli.hpp"
#include "train/run_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tri::fuzz::single_threaded();
  const std::string& path = tri::fuzz::write_input(data, size, ".ini");
  tri::fuzz::expect_clean([&] {
    const auto vm = tri::cli::parse_command("train", {"--config", path});
    tri::cli::new_run_config(vm);
  });
  return 0;
}
