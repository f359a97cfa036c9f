// placeholder entry so the build has a target; replaced by the CLI.
#include <cstdio>
#include "framework/runtime.hpp"
int main() { std::fputs(tri::runtime_banner().c_str(), stdout); }
