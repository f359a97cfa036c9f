// Atomic file replacement: a crash at any moment leaves either the old file or the new one.
#pragma once
#include <functional>
#include <string>

namespace tri {

// Calls write(tmp) with `<path>.tmp.<pid>` in the same folder, fsyncs it, renames it over
// `path` and fsyncs the folder. On any failure the temporary file is removed, an existing
// `path` is untouched and an Error naming `path` and the cause is thrown.
void write_atomically(const std::string& path, const std::function<void(const std::string& tmp)>& write);

// The same for a text file.
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace tri
