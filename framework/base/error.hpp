// The two kinds of error every layer throws: a runtime failure (a file, the disk, a corrupt
// checkpoint: exit code 1) and bad input typed by the user (an option, a value, a grid: exit
// code 2). Each message is one line that names the bad value and what is allowed.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

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

// The one message for a name (of a registry entry, a choice, an action) that is not among `allowed`:
//   --task 'sort' unknown (allowed: copy, selective-copy, mqar, induction, needle)
inline Error unknown_name(const std::string& option, const std::string& name, const std::vector<std::string>& allowed) {
  std::string list;
  for (const std::string& a : allowed) list.append(list.empty() ? "" : ", ").append(a);
  return Error(option + " '" + name + "' unknown (allowed: " + list + ")");
}

}  // namespace tri
