// Files in HDF5's legacy format (superblock version 0 or 1: what h5py writes by default, and
// trilemma's checkpoints before the 1.10 format) carry no checksums, and HDF5 1.10.8 crashes on
// some corrupt ones (fuzzing found a null pointer in H5A__close while it iterates attributes).
// Such a file is first read whole in a child process: every object, attribute and dataset, a
// superset of the reads trilemma makes. If the child dies (or hangs), the file is refused;
// otherwise HDF5, which is deterministic on the same bytes, can read it here. Files of the 1.10
// format (checksummed superblock and object headers, Fletcher-32 data) skip this.
#pragma once
#include <cstdint>
#include <string>

namespace tri {

// Whether the open file `file` (an hid_t) has a legacy superblock (no checksums).
bool is_legacy_format(int64_t file);

// Reads everything in `file` in a child process; an empty string when it finished, else why not
// ("HDF5 crashed (signal 11)").
std::string read_all_in_child(int64_t file);

}  // namespace tri
