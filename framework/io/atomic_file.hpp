// Atomic file replacement: a crash at any moment leaves either the old file or the new one.
#pragma once
#include <functional>
#include <string>

namespace tri {

// Creates `<path>.tmp.<pid>` empty in the same folder, calls write(tmp) (which overwrites it),
// fsyncs it, renames it over `path` and fsyncs the folder. A signal that ends the process
// removes the temporary file first (framework/system/stop_signals.hpp). On any failure the temporary file is removed, an existing
// `path` is untouched and an Error naming `path` and the cause is thrown.
void write_atomically(const std::string& path, const std::function<void(const std::string& tmp)>& write);

// The same for a text file.
void write_text_atomically(const std::string& path, const std::string& text);

// Removes the temporaries that killed writers left in `dir` (SIGKILL, a power cut: no code of
// theirs ran): `<name>.tmp.<pid>` files of `dir` itself whose pid no longer runs. Call it while
// holding the folder's lock, so that no writer of the folder's own files is alive; the pid check
// spares a live process that writes a file of its own there. Returns how many it removed.
int remove_dead_temporaries(const std::string& dir);

}  // namespace tri
