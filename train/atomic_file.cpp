#include "train/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "framework/stop_signals.hpp"
#include "framework/tensor.hpp"

namespace tri {

namespace fs = std::filesystem;

namespace {

// fsync on a path opened read-only (a file or a folder); false when either call fails.
bool fsync_path(const std::string& p, int flags) {
  const int fd = ::open(p.c_str(), flags);
  if (fd < 0) return false;
  const bool ok = ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

}  // namespace

void write_atomically(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw Error(path + ": folder " + folder.string() + " does not exist or is not a folder");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // Created and recorded before anything is written: a signal that ends the process removes it.
  int err = stop_signals::create_temporary(tmp);
  if (err == EEXIST) {  // left by a killed process that had this pid
    fs::remove(tmp, ec);
    err = stop_signals::create_temporary(tmp);
  }
  if (err != 0) throw Error(path + ": cannot create " + tmp + ": " + std::strerror(err));
  try {
    write(tmp);
    if (!fsync_path(tmp, O_RDONLY)) throw Error("fsync failed on " + tmp);
    if (const int e = stop_signals::commit_temporary(tmp, path); e != 0)
      throw Error("rename " + tmp + " failed: " + std::strerror(e));
  } catch (const std::exception& e) {  // any failure: no temporary file left behind
    stop_signals::remove_temporary(tmp);
    throw Error(path + ": " + e.what());
  }
  // The rename is durable only once the folder entry is on disk.
  if (!fsync_path(folder.string(), O_RDONLY | O_DIRECTORY))
    throw Error(path + ": fsync failed on folder " + folder.string());
}

void write_text_atomically(const std::string& path, const std::string& text) {
  write_atomically(path, [&](const std::string& tmp) {
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) throw Error("cannot create " + tmp + ": " + std::strerror(errno));
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) throw Error("cannot write " + tmp + ": " + std::strerror(errno));
  });
}

}  // namespace tri
