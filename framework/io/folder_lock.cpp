#include "framework/io/folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "framework/core/tensor.hpp"

namespace tri {

FolderLock::FolderLock(const std::string& dir, const std::string& name, const std::string& what) {
  const std::string path = dir + "/" + name;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open the lock file " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (e != EWOULDBLOCK) throw Error("cannot lock " + path + ": " + std::strerror(e));
    std::string holder(pid, size_t(n > 0 ? n : 0));
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw Error(what + " " + dir + " is in use by another trilemma process" +
                (holder.empty() ? std::string() : " (pid " + holder + ")") +
                "; wait for it to finish or stop it first (lock: " + path + ")");
  }
  // The holder's pid, for the message a second process prints (informative only).
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    // A full disk must not stop a run that holds the lock: the pid is only for messages.
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace tri
