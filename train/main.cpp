// trilemma <command> [options] (train/cli_main.cpp has the commands).
#include <malloc.h>

#include "train/cli.hpp"

int main(int argc, char** argv) {
  // Freed heap memory stays in the process: glibc returns the heap's top to the system once it
  // exceeds 128 KiB, and every batch that follows faults its pages in again, which costs more
  // than drawing the batch (bench data: 2x). Tensors have their own cache (framework/tensor.hpp).
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return tri::cli::run_cli({argv + 1, argv + argc});
}
