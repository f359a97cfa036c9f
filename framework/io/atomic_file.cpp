#include "framework/io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "framework/system/stop_signals.hpp"
#include "framework/core/tensor.hpp"

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

namespace {

// The pid of a `<name>.tmp.<pid>` file name, 0 when the name is not one.
pid_t temporary_owner(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return 0;
  const std::string digits = name.substr(at + 5);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  return pid_t(std::stol(digits));
}

}  // namespace

int remove_dead_temporaries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const pid_t pid = temporary_owner(e.path().filename().string());
    if (pid <= 0 || pid == ::getpid() || !e.is_regular_file(ec)) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge (EPERM)
    removed += fs::remove(e.path(), ec) ? 1 : 0;
  }
  return removed;
}

}  // namespace tri
