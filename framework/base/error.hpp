// The two kinds of error every layer throws: a runtime failure (a file, the disk, a corrupt
// checkpoint: exit code 1) and bad input typed by the user (an option, a value, a grid: exit
// code 2). Each message is one line that names the bad value and what is allowed.
#pragma once
#include <stdexcept>

namespace tri {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A bad command line, option or value.
struct UsageError : Error {
  using Error::Error;
};

// Calls fn; an Error it throws becomes a UsageError (exit code 2): for checks of what was
// typed on the command line.
template <class F>
auto as_usage_error(F&& fn) {
  try {
    return fn();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace tri
