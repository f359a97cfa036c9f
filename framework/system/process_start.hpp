// How a trilemma process begins, before any thread exists: the OpenMP wait policy, SIGINT and
// SIGTERM blocked in every thread (framework/system/stop_signals.hpp) and the heap's trimming settings.
// trilemma's main calls it first; so does every program that must behave as trilemma does
// (the tests' signal-storm helper).
#pragma once

namespace tri {

// May execute the process again (the same argv) so that what it sets is in place from the first
// instruction; returns in the process that goes on.
void start_process(char** argv);

}  // namespace tri
