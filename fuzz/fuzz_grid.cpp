// `trilemma sweep --grid FILE` on untrusted text: the grid parser, its expansion into runs (each
// resolved and validated) and the run ids.
#include "fuzz/fuzz_input.hpp"
#include "sweep/grid.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tri::fuzz::single_threaded();
  const std::string& path = tri::fuzz::write_input(data, size, ".grid");
  tri::fuzz::expect_clean([&] { tri::sweep::read_grid(path); });
  return 0;
}
