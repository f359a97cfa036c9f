// The checks a file gets when it is opened for reading, before any of its contents is read:
// HDF5 1.10.8 crashes on some corrupt structures that carry no checksum, so a file is only
// read once none can be reached.
// - The 1.10 format (what trilemma writes): superblock and object headers are checksummed, data
//   has Fletcher-32. Only a group's "dense" storage (a fractal heap, used beyond 8 links or
//   attributes unless the group says otherwise) has no checksum; trilemma never writes it, and
//   a file holding it is refused: the walk checks each group before it lists it.
// - The legacy format (superblock version 0 or 1: what h5py writes by default, and trilemma's
//   checkpoints before the 1.10 format) has no checksums at all. Before this process opens it,
//   the file is opened and read whole in a child process: every object, attribute and dataset,
//   a superset of the reads trilemma makes. If the child dies (or hangs), the file is refused;
//   otherwise HDF5, deterministic on the same bytes, can open and read it here. The open itself
//   belongs in the child: it reads the root group's header, whose size is unchecked.
#pragma once
#include <cstdint>
#include <string>

namespace tri {

// Why the file at `path` may not be opened, or "" when it may (the legacy format's check).
std::string unsafe_to_open(const std::string& path);

// Why the open file `file` (an hid_t) may not be read, or "" when it may (the 1.10 format's).
std::string unsafe_to_read(int64_t file);

}  // namespace tri
