// main() of every test suite. TRILEMMA_TEST_GEMM (auto, dnnl, openblas, or mkl where built in) selects the GEMM
// backend before any test runs, so CTest can run the same suite through each backend.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "framework/runtime/runtime.hpp"
#include "framework/core/tensor.hpp"

int main(int argc, char** argv) {
  if (const char* gemm = std::getenv("TRILEMMA_TEST_GEMM"); gemm && *gemm) {
    try {
      tri::set_gemm_backend(gemm);
    } catch (const tri::Error& e) {
      std::fprintf(stderr, "TRILEMMA_TEST_GEMM: %s\n", e.what());
      return 2;
    }
  }
  doctest::Context context(argc, argv);
  return context.run();
}
