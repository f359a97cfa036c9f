#include "framework/io/h5.hpp"
#include "framework/io/h5_checks.hpp"

#include <hdf5.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tri {

namespace {
// HDF5 prints its error stack to stderr by default; trilemma turns every failure into its own
// one-line Error instead, so the printing is switched off for the process, once.
void silence_hdf5_once() {
  static const bool silenced = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)silenced;
}

// The innermost description on HDF5's error stack (e.g. "data error detected by Fletcher32
// checksum"), or "" when it is empty. Read right after the failing call.
std::string error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD,
           [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
             if (e->desc && *e->desc) *static_cast<std::string*>(out) = e->desc;
             return 0;
           },
           &detail);
  return detail;
}

// Writes size bytes to path (created or truncated). A failure is one Error naming the file and
// the OS error (no space left, file too large, permission denied, ...).
void write_bytes(const std::string& path, const unsigned char* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : ENOSPC;
      ::close(fd);
      throw Error("cannot write " + path + ": " + std::strerror(e));
    }
    done += size_t(n);
  }
  if (::close(fd) != 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
}

// HDF5 1.10's H5Fget_file_image clears the superblock's "open for write" flag in the image but
// leaves the checksum computed with it set, so the image would not open. The superblock
// (version 2 or 3: 12 bytes, 4 addresses, then the checksum) gets its checksum recomputed with
// HDF5's own function (exported by the library, not declared in its public headers).
extern "C" uint32_t H5_checksum_metadata(const void* data, size_t len, uint32_t initval);
void fix_superblock_checksum(std::vector<unsigned char>& image) {
  if (image[8] < 2) return;  // versions 0 and 1 carry no checksum
  const size_t body = 12 + 4 * size_t(image[9]);  // image[9]: bytes per address
  if (image.size() < body + 4) throw Error("hdf5: superblock larger than the file image");
  const uint32_t sum = H5_checksum_metadata(image.data(), body, 0);
  for (int i = 0; i < 4; ++i) image[body + size_t(i)] = (unsigned char)(sum >> (8 * i));
}

// A group's links and attributes kept in its object header, which the 1.10 format checksums,
// however many there are; never in "dense" storage, whose fractal-heap blocks carry no checksum
// and whose corruption crashes HDF5 1.10.8 (found by fuzzing; reading refuses it, h5_checks).
bool compact_storage(hid_t group_create_plist) {
  return H5Pset_link_phase_change(group_create_plist, 65535, 0) >= 0 &&
         H5Pset_attr_phase_change(group_create_plist, 65535, 0) >= 0;
}

struct Handle {  // closes any HDF5 id with the matching function
  hid_t id;
  herr_t (*close)(hid_t);
  ~Handle() {
    if (id >= 0) close(id);
  }
};
}  // namespace

void H5File::fail(const std::string& what, const std::string& path) const {
  throw Error("hdf5: " + what + " '" + path + "' in " + filename_);
}

H5File::H5File(const std::string& filename, Mode mode) : filename_(filename), mode_(mode) {
  silence_hdf5_once();
  if (mode == Mode::read) {
    if (const std::string problem = unsafe_to_open(filename); !problem.empty())
      throw Error("hdf5: " + filename + " is unsupported or corrupt: " + problem);
    file_ = H5Fopen(filename.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file_ < 0) {
      std::error_code ec;
      const std::string detail = error_detail();
      throw Error("hdf5: cannot open " + filename +
                  (!std::filesystem::exists(filename, ec) ? " (no such file)"
                   : detail.empty()                      ? " (unreadable or not HDF5)"
                                                         : " (not HDF5, or corrupt: " + detail + ")"));
    }
    if (const std::string problem = unsafe_to_read(file_); !problem.empty()) {
      H5Fclose(file_);
      throw Error("hdf5: " + filename + " is unsupported or corrupt: " + problem);
    }
  } else {
    // Built in memory (the core driver) and written to disk by flush() in one go: a full disk
    // or a size limit is then one failure at one moment, reported with the OS error, never a
    // half-written file HDF5 goes on working with. The 1.10 format (HDF5 1.10+, h5py): the
    // superblock and object headers carry checksums, so a flipped bit in the metadata (the
    // attributes included) fails on open; single-chunk datasets need no B-tree.
    Handle fapl{H5Pcreate(H5P_FILE_ACCESS), H5Pclose};
    if (fapl.id < 0 || H5Pset_fapl_core(fapl.id, 1 << 16, 0) < 0 ||
        H5Pset_libver_bounds(fapl.id, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0)
      throw Error("hdf5: cannot set up an in-memory file for " + filename);
    Handle fcpl{H5Pcreate(H5P_FILE_CREATE), H5Pclose};  // the root group's creation properties
    if (fcpl.id < 0 || !compact_storage(fcpl.id))
      throw Error("hdf5: cannot set up an in-memory file for " + filename);
    file_ = H5Fcreate(filename.c_str(), H5F_ACC_TRUNC, fcpl.id, fapl.id);
    if (file_ < 0) throw Error("hdf5: cannot create " + filename + " in memory: " + error_detail());
  }
}

H5File::~H5File() {
  if (file_ >= 0) H5Fclose(file_);  // an unflushed file in memory is discarded
}

void H5File::flush() {
  if (mode_ == Mode::read) return;
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) fail("flush failed for", "/");
  const ssize_t size = H5Fget_file_image(file_, nullptr, 0);
  std::vector<unsigned char> image(static_cast<size_t>(std::max<ssize_t>(size, 0)));
  if (size < 48 || H5Fget_file_image(file_, image.data(), image.size()) != size)
    fail("cannot take the in-memory image of", "/");
  fix_superblock_checksum(image);
  write_bytes(filename_, image.data(), image.size());  // the one moment the file reaches the disk
}

bool H5File::exists(const std::string& path) const {
  if (path == "/") return true;
  // Check each prefix: H5Lexists fails on a path whose parent is missing.
  size_t pos = 1;
  while (true) {
    size_t next = path.find('/', pos);
    std::string prefix = path.substr(0, next);
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (next == std::string::npos) return true;
    pos = next + 1;
  }
}

std::vector<std::string> H5File::list(const std::string& group) const {
  Handle g{H5Gopen2(file_, group.c_str(), H5P_DEFAULT), H5Gclose};
  if (g.id < 0) fail("no group", group);
  std::vector<std::string> names;
  H5Literate(g.id, H5_INDEX_NAME, H5_ITER_INC, nullptr,
             [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
               static_cast<std::vector<std::string>*>(op)->push_back(name);
               return 0;
             },
             &names);
  std::sort(names.begin(), names.end());
  return names;
}

int64_t H5File::make_parents(const std::string& path) {
  size_t pos = 1;
  while (true) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) break;
    std::string prefix = path.substr(0, next);
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) {
      Handle gcpl{H5Pcreate(H5P_GROUP_CREATE), H5Pclose};
      if (gcpl.id < 0 || !compact_storage(gcpl.id)) fail("cannot create group", prefix);
      hid_t g = H5Gcreate2(file_, prefix.c_str(), H5P_DEFAULT, gcpl.id, H5P_DEFAULT);
      if (g < 0) fail("cannot create group", prefix);
      H5Gclose(g);
    }
    pos = next + 1;
  }
  return 0;
}

namespace {
// Datasets with elements are chunked and carry HDF5's Fletcher-32 checksum, verified on every
// read (h5py and h5dump read them transparently). A chunk holds at most 64 MiB, split along the
// first axis. Scalars and empty datasets (no chunks possible) are stored plain.
hid_t checksummed_layout(hid_t type, const std::vector<hsize_t>& dims) {
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hsize_t elements = 1;
  for (hsize_t d : dims) elements *= d;
  if (dims.empty() || elements == 0) return dcpl;
  std::vector<hsize_t> chunk = dims;
  const hsize_t row = elements / dims[0] * H5Tget_size(type);
  chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (hsize_t(64) << 20) / std::max<hsize_t>(row, 1)));
  H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
  H5Pset_fletcher32(dcpl);
  return dcpl;
}

void write_raw(hid_t file, const std::string& path, hid_t type, const std::vector<hsize_t>& dims,
               const void* data, bool& ok) {
  Handle space{dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
               H5Sclose};
  Handle dcpl{checksummed_layout(type, dims), H5Pclose};
  Handle ds{H5Dcreate2(file, path.c_str(), type, space.id, H5P_DEFAULT, dcpl.id, H5P_DEFAULT),
            H5Dclose};
  ok = ds.id >= 0 && H5Dwrite(ds.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
}

std::vector<hsize_t> dims_of(const Shape& s) {
  std::vector<hsize_t> d;
  for (int i = 0; i < s.nd; ++i) d.push_back(hsize_t(s.d[i]));
  return d;
}
}  // namespace

void H5File::write(const std::string& path, const Tensor& t) {
  make_parents(path);
  bool ok;
  write_raw(file_, path, H5T_NATIVE_FLOAT, dims_of(t.shape()), t.data(), ok);
  if (!ok) fail("cannot write dataset", path);
}

void H5File::write_ints(const std::string& path, const Shape& shape, const std::vector<int32_t>& v) {
  if (int64_t(v.size()) != shape.numel()) fail("value count does not match shape for", path);
  make_parents(path);
  bool ok;
  write_raw(file_, path, H5T_NATIVE_INT32, dims_of(shape), v.data(), ok);
  if (!ok) fail("cannot write dataset", path);
}

void H5File::write_u64(const std::string& path, const std::vector<uint64_t>& v) {
  make_parents(path);
  bool ok;
  write_raw(file_, path, H5T_NATIVE_UINT64, {hsize_t(v.size())}, v.data(), ok);
  if (!ok) fail("cannot write dataset", path);
}

Shape H5File::shape_of(const std::string& path) const {
  Handle ds{H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) fail("missing dataset", path);
  Handle space{H5Dget_space(ds.id), H5Sclose};
  int nd = H5Sget_simple_extent_ndims(space.id);
  if (nd < 0 || nd > kMaxDims) fail("unsupported rank for", path);
  hsize_t dims[kMaxDims];
  H5Sget_simple_extent_dims(space.id, dims, nullptr);
  std::vector<int64_t> d(dims, dims + nd);
  return Shape(d);
}

namespace {
// Reads a whole dataset after checking its class (float or integer) and element count.
void read_raw(hid_t file, const std::string& path, H5T_class_t want, hid_t mem_type, void* out,
              int64_t count, std::string& err) {
  Handle ds{H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) { err = "missing dataset"; return; }
  Handle type{H5Dget_type(ds.id), H5Tclose};
  if (H5Tget_class(type.id) != want) { err = "wrong dtype for dataset"; return; }
  Handle space{H5Dget_space(ds.id), H5Sclose};
  if (H5Sget_simple_extent_npoints(space.id) != count) { err = "wrong size for dataset"; return; }
  if (H5Dread(ds.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
    const std::string detail = error_detail();
    err = detail.find("checksum") != std::string::npos
              ? "checksum mismatch (the file is corrupt) in dataset"
              : "cannot read dataset" + (detail.empty() ? std::string() : " (" + detail + ")");
  }
}
}  // namespace

void H5File::check_stored(const std::string& path, int64_t count) const {
  // A dataset's dims are only a claim: a crafted file may declare far more elements than it
  // stores (unwritten chunks read as fill values). Nothing is allocated for more than the
  // file holds.
  Handle ds{H5Dopen2(file_, path.c_str(), H5P_DEFAULT), H5Dclose};
  if (ds.id < 0) fail("missing dataset", path);
  Handle type{H5Dget_type(ds.id), H5Tclose};
  const size_t element_bytes = type.id >= 0 ? std::max<size_t>(H5Tget_size(type.id), 1) : 1;
  const hsize_t stored = H5Dget_storage_size(ds.id);
  if (count < 0 || hsize_t(count) > stored / element_bytes)
    fail("dataset declares " + std::to_string(count) + " elements but stores " + std::to_string(stored) +
             " bytes: corrupt",
         path);
}

Tensor H5File::read(const std::string& path) const {
  Shape s = shape_of(path);
  check_stored(path, s.numel());
  Tensor t = Tensor::empty(s);
  std::string err;
  read_raw(file_, path, H5T_FLOAT, H5T_NATIVE_FLOAT, t.data(), s.numel(), err);
  if (!err.empty()) fail(err, path);
  return t;
}

std::vector<int32_t> H5File::read_ints(const std::string& path, Shape* shape) const {
  Shape s = shape_of(path);
  check_stored(path, s.numel());
  if (shape) *shape = s;
  std::vector<int32_t> v(size_t(s.numel()));
  std::string err;
  read_raw(file_, path, H5T_INTEGER, H5T_NATIVE_INT32, v.data(), s.numel(), err);
  if (!err.empty()) fail(err, path);
  return v;
}

std::vector<uint64_t> H5File::read_u64(const std::string& path) const {
  Shape s = shape_of(path);
  check_stored(path, s.numel());
  std::vector<uint64_t> v(size_t(s.numel()));
  std::string err;
  read_raw(file_, path, H5T_INTEGER, H5T_NATIVE_UINT64, v.data(), s.numel(), err);
  if (!err.empty()) fail(err, path);
  return v;
}

namespace {
hid_t open_obj(hid_t file, const std::string& obj) { return H5Oopen(file, obj.c_str(), H5P_DEFAULT); }

void put_attr(hid_t file, const std::string& obj, const std::string& name, hid_t type,
              const void* v, bool& ok) {
  Handle o{open_obj(file, obj), H5Oclose};
  if (o.id < 0) { ok = false; return; }
  if (H5Aexists(o.id, name.c_str()) > 0) H5Adelete(o.id, name.c_str());
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle a{H5Acreate2(o.id, name.c_str(), type, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  ok = a.id >= 0 && H5Awrite(a.id, type, v) >= 0;
}
}  // namespace

void H5File::set_attr(const std::string& obj, const std::string& name, const std::string& v) {
  if (obj != "/" && !exists(obj)) {
    make_parents(obj + "/x");
  }
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, std::max<size_t>(v.size(), 1));
  H5Tset_strpad(type.id, H5T_STR_NULLPAD);
  bool ok;
  put_attr(file_, obj, name, type.id, v.data(), ok);
  if (!ok) fail("cannot write attribute " + name + " on", obj);
}

void H5File::set_attr(const std::string& obj, const std::string& name, int64_t v) {
  if (obj != "/" && !exists(obj)) make_parents(obj + "/x");
  bool ok;
  put_attr(file_, obj, name, H5T_NATIVE_INT64, &v, ok);
  if (!ok) fail("cannot write attribute " + name + " on", obj);
}

void H5File::set_attr(const std::string& obj, const std::string& name, double v) {
  if (obj != "/" && !exists(obj)) make_parents(obj + "/x");
  bool ok;
  put_attr(file_, obj, name, H5T_NATIVE_DOUBLE, &v, ok);
  if (!ok) fail("cannot write attribute " + name + " on", obj);
}

bool H5File::has_attr(const std::string& obj, const std::string& name) const {
  if (!exists(obj)) return false;
  Handle o{open_obj(file_, obj), H5Oclose};
  return o.id >= 0 && H5Aexists(o.id, name.c_str()) > 0;
}

std::vector<std::string> H5File::attr_names(const std::string& obj) const {
  Handle o{open_obj(file_, obj), H5Oclose};
  if (o.id < 0) fail("no object", obj);
  std::vector<std::string> names;
  H5Aiterate2(o.id, H5_INDEX_NAME, H5_ITER_INC, nullptr,
              [](hid_t, const char* name, const H5A_info_t*, void* op) -> herr_t {
                static_cast<std::vector<std::string>*>(op)->push_back(name);
                return 0;
              },
              &names);
  return names;
}

namespace {
// Opens attribute name on obj and checks its class; returns an invalid handle on mismatch.
hid_t open_attr(hid_t file, const std::string& obj, const std::string& name, H5T_class_t want,
                std::string& err) {
  Handle o{open_obj(file, obj), H5Oclose};
  if (o.id < 0) { err = "no object"; return -1; }
  hid_t a = H5Aopen(o.id, name.c_str(), H5P_DEFAULT);
  if (a < 0) { err = "missing attribute " + name + " on"; return -1; }
  Handle type{H5Aget_type(a), H5Tclose};
  if (H5Tget_class(type.id) != want) {
    H5Aclose(a);
    err = "wrong type for attribute " + name + " on";
    return -1;
  }
  return a;
}
}  // namespace

std::string H5File::attr_string(const std::string& obj, const std::string& name) const {
  std::string err;
  Handle a{open_attr(file_, obj, name, H5T_STRING, err), H5Aclose};
  if (a.id < 0) fail(err, obj);
  Handle type{H5Aget_type(a.id), H5Tclose};
  if (H5Tis_variable_str(type.id) > 0) {  // h5py writes variable-length strings
    char* s = nullptr;
    Handle mem{H5Tcopy(H5T_C_S1), H5Tclose};
    H5Tset_size(mem.id, H5T_VARIABLE);
    H5Tset_cset(mem.id, H5Tget_cset(type.id));  // h5py's are UTF-8: no ASCII conversion exists
    if (H5Aread(a.id, mem.id, &s) < 0 || !s) fail("cannot read attribute " + name + " on", obj);
    std::string out(s);
    H5free_memory(s);
    return out;
  }
  size_t n = H5Tget_size(type.id);
  std::string out(n, '\0');
  if (H5Aread(a.id, type.id, out.data()) < 0) fail("cannot read attribute " + name + " on", obj);
  out.erase(std::find(out.begin(), out.end(), '\0'), out.end());
  return out;
}

int64_t H5File::attr_int(const std::string& obj, const std::string& name) const {
  std::string err;
  Handle a{open_attr(file_, obj, name, H5T_INTEGER, err), H5Aclose};
  if (a.id < 0) fail(err, obj);
  int64_t v = 0;
  if (H5Aread(a.id, H5T_NATIVE_INT64, &v) < 0) fail("cannot read attribute " + name + " on", obj);
  return v;
}

double H5File::attr_double(const std::string& obj, const std::string& name) const {
  std::string err;
  Handle a{open_attr(file_, obj, name, H5T_FLOAT, err), H5Aclose};
  if (a.id < 0) fail(err, obj);
  double v = 0;
  if (H5Aread(a.id, H5T_NATIVE_DOUBLE, &v) < 0) fail("cannot read attribute " + name + " on", obj);
  return v;
}

}  // namespace tri
