// trilemma <command> [options] (train/cli_main.cpp has the commands).
#include "train/cli.hpp"

int main(int argc, char** argv) { return tri::cli::run_cli({argv + 1, argv + argc}); }
