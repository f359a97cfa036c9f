#include "framework/io/h5_checks.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <vector>

#include "framework/base/error.hpp"
#include "framework/system/process.hpp"

// Present when a sanitizer runtime is linked in (weak: null otherwise).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace tri {

namespace {

constexpr hsize_t kMaxBytes = hsize_t(1) << 30;  // a dataset the reader would refuse anyway

// Whether a read in the child failed: HDF5 1.10.8 frees an attribute table it failed to fill
// (H5A__attr_release_table) through uninitialised pointers, a crash or a silent heap corruption
// by chance, so a file on which such a read fails is refused rather than read here.
bool read_failed = false;

herr_t read_attribute(hid_t obj, const char* name, const H5A_info_t*, void*) {
  const hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) {
    read_failed = true;
    return 0;
  }
  const hid_t type = H5Aget_type(a), space = H5Aget_space(a);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (type >= 0 && n > 0 && H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0) {
    std::vector<char*> strings(size_t(n), nullptr);
    const hid_t mem = H5Tcopy(H5T_C_S1);
    H5Tset_size(mem, H5T_VARIABLE);
    H5Tset_cset(mem, H5Tget_cset(type));
    if (H5Aread(a, mem, strings.data()) >= 0)
      for (char* s : strings) H5free_memory(s);
    H5Tclose(mem);
  } else if (type >= 0 && n > 0 && H5Tget_class(type) != H5T_VLEN) {
    const hid_t mem = H5Tget_class(type) == H5T_STRING ? H5Tcopy(type) : H5Tget_native_type(type, H5T_DIR_DEFAULT);
    const hsize_t bytes = hsize_t(n) * (mem >= 0 ? H5Tget_size(mem) : 0);
    if (mem >= 0 && bytes > 0 && bytes <= kMaxBytes) {
      std::vector<char> buffer(bytes);
      H5Aread(a, mem, buffer.data());
    }
    if (mem >= 0) H5Tclose(mem);
  }
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  H5Aclose(a);
  return 0;
}

void read_dataset(hid_t ds) {
  const hid_t type = H5Dget_type(ds), space = H5Dget_space(ds);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  const H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  if (n > 0 && (cls == H5T_INTEGER || cls == H5T_FLOAT)) {
    const hid_t mem = H5Tget_native_type(type, H5T_DIR_DEFAULT);
    const hsize_t bytes = hsize_t(n) * (mem >= 0 ? H5Tget_size(mem) : 0);
    // As the reader: never more elements than the file stores (H5File::check_stored).
    if (mem >= 0 && bytes > 0 && bytes <= kMaxBytes &&
        hsize_t(n) <= H5Dget_storage_size(ds) / std::max<size_t>(H5Tget_size(type), 1)) {
      std::vector<char> buffer(bytes);
      H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
    }
    if (mem >= 0) H5Tclose(mem);
  }
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
}

herr_t read_object(hid_t file, const char* name, const H5O_info_t* info, void*) {
  const hid_t o = H5Oopen(file, name, H5P_DEFAULT);
  if (o < 0) {
    read_failed = true;
    return 0;
  }
  if (H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, nullptr, read_attribute, nullptr) < 0) read_failed = true;
  if (info->type == H5O_TYPE_DATASET) read_dataset(o);
  H5Oclose(o);
  return 0;
}


// The version of the superblock HDF5 would open: the first signature at byte 0, 512, 1024, 2048,
// ... (HDF5's search after a user block); -1 when there is none, and H5Fopen then refuses the file.
int superblock_version(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  static constexpr char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  for (std::streamoff at = 0; in; at = at == 0 ? 512 : at * 2) {
    char head[9] = {};
    in.clear();
    in.seekg(at);
    if (!in.read(head, sizeof head)) return -1;
    if (std::equal(kSignature, kSignature + 8, head)) return static_cast<unsigned char>(head[8]);
  }
  return -1;
}

// Opens and reads the file at `path` whole in a child process: its crash, its hang or an
// allocation it cannot make (a size read from unchecksummed metadata) never reaches this one.
std::string read_all_in_child(const std::string& path) {
  // A corrupt file may also make HDF5 loop: 30 s is far beyond reading any checkpoint.
  process::Exit e;
  try {
    e = process::run_forked(
        [&] {
          // The child's crash is the parent's answer, not a report: silence it, and keep a
          // sanitizer runtime's death callback (libFuzzer saves the input as a crash there) out.
          const int devnull = open("/dev/null", O_WRONLY);
          if (devnull >= 0) dup2(devnull, STDERR_FILENO);
          if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
          const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
          if (file < 0) return 0;  // not HDF5 at all: the parent's open says so
          if (H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, read_object, nullptr, H5O_INFO_BASIC) < 0) read_failed = true;
          return read_failed ? 1 : 0;
        },
        30);
  } catch (const Error&) {
    return "";  // cannot check: read it as HDF5 does
  }
  if (e.timed_out) return "reading it did not finish in 30 s";
  if (e.signal() != 0) return "reading it crashed HDF5 (signal " + std::to_string(e.signal()) + ")";
  if (!e.ok()) return "HDF5 failed to read an object or attribute in it";
  return "";
}

// The object at `path` and, for a group, everything below it: the first one whose header HDF5
// cannot read or whose links or attributes are in dense storage. A group is listed only after
// its own storage is checked; `seen` (header addresses) stops a crafted cycle of links.
std::string find_dense_storage(hid_t file, const std::string& path, std::set<haddr_t>& seen) {
  const hid_t o = H5Oopen(file, path.c_str(), H5P_DEFAULT);
  if (o < 0) return "";  // a read that needs it reports it missing
  H5O_info_t info;
  H5G_info_t links;
  std::vector<std::string> children;
  std::string problem;
  if (H5Oget_info2(o, &info, H5O_INFO_BASIC | H5O_INFO_META_SIZE) < 0 ||
      (info.type == H5O_TYPE_GROUP && H5Gget_info(o, &links) < 0))
    problem = "HDF5 cannot read the header of '" + path + "'";
  else if (info.meta_size.attr.heap_size > 0 || info.meta_size.attr.index_size > 0)
    problem = "the attributes of '" + path + "' are in HDF5's dense storage, which has no checksum";
  else if (info.type == H5O_TYPE_GROUP && links.storage_type == H5G_STORAGE_TYPE_DENSE)
    problem = "the links of '" + path + "' are in HDF5's dense storage, which has no checksum";
  else if (info.type == H5O_TYPE_GROUP && seen.insert(info.addr).second)
    H5Literate(o, H5_INDEX_NAME, H5_ITER_INC, nullptr,
               [](hid_t, const char* name, const H5L_info_t* l, void* out) -> herr_t {
                 if (l->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(out)->push_back(name);
                 return 0;
               },
               &children);
  H5Oclose(o);
  for (const std::string& child : children) {
    if (!problem.empty()) break;
    problem = find_dense_storage(file, (path == "/" ? "/" : path + "/") + child, seen);
  }
  return problem;
}

}  // namespace

std::string unsafe_to_open(const std::string& path) {
  const int version = superblock_version(path);
  if (version < 0 || version >= 2) return "";
  const std::string problem = read_all_in_child(path);
  return problem.empty() ? "" : problem + "; it is in HDF5's legacy format, which carries no checksums";
}

std::string unsafe_to_read(int64_t file) {
  H5F_info2_t info;
  if (H5Fget_info2(file, &info) < 0) return "HDF5 cannot read its superblock";
  // The legacy format was read whole before the open (unsafe_to_open).
  if (info.super.version < 2) return "";
  std::set<haddr_t> seen;
  return find_dense_storage(file, "/", seen);
}

}  // namespace tri
