// One process at a time per run folder (and per sweep shard): an exclusive flock on a lock file
// in the folder, held for the lifetime of the object. The kernel drops it when the process
// ends in any way (SIGKILL included), so a stale lock file never blocks the next run.
#pragma once
#include <string>

namespace tri {

class FolderLock {
 public:
  // Locks <dir>/<name>; if another process holds it, throws an Error naming the folder, the
  // holder's pid and `what` (e.g. "run folder").
  FolderLock(const std::string& dir, const std::string& name, const std::string& what);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tri
