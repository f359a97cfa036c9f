// A thin RAII layer over the HDF5 C API: the few calls checkpoints, dumps and reference
// files need. Paths are "/group/sub/name"; missing groups are created on write.
// Every failure is an Error naming the file and the path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"

namespace tri {

// Mode::create builds the file in memory; flush() writes it to disk in one go (an error names
// the file and the OS error). Datasets are chunked with Fletcher-32 checksums and the metadata
// is checksummed too, so reading a flipped bit fails. Mode::read first checks that nothing HDF5
// would crash on unchecked can be reached (h5_checks.hpp).
class H5File {
 public:
  enum class Mode { read, create };  // create truncates
  H5File(const std::string& filename, Mode mode);
  ~H5File();
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  bool exists(const std::string& path) const;
  // Names directly below a group, sorted.
  std::vector<std::string> list(const std::string& group) const;

  // Datasets.
  void write(const std::string& path, const Tensor& t);
  void write_ints(const std::string& path, const Shape& shape, const std::vector<int32_t>& v);
  void write_u64(const std::string& path, const std::vector<uint64_t>& v);
  Shape shape_of(const std::string& path) const;
  Tensor read(const std::string& path) const;  // float32 dataset
  std::vector<int32_t> read_ints(const std::string& path, Shape* shape = nullptr) const;
  std::vector<uint64_t> read_u64(const std::string& path) const;

  // Attributes on a group or dataset ("/" for the root).
  void set_attr(const std::string& obj, const std::string& name, const std::string& v);
  void set_attr(const std::string& obj, const std::string& name, int64_t v);
  void set_attr(const std::string& obj, const std::string& name, double v);
  bool has_attr(const std::string& obj, const std::string& name) const;
  std::string attr_string(const std::string& obj, const std::string& name) const;
  int64_t attr_int(const std::string& obj, const std::string& name) const;
  double attr_double(const std::string& obj, const std::string& name) const;
  std::vector<std::string> attr_names(const std::string& obj) const;

  void flush();  // create: writes the file (the whole image); read: nothing
  const std::string& filename() const { return filename_; }

 private:
  int64_t file_ = -1;  // hid_t
  std::string filename_;
  Mode mode_;
  int64_t make_parents(const std::string& path);
  void check_stored(const std::string& path, int64_t count) const;  // allocation guard
  [[noreturn]] void fail(const std::string& what, const std::string& path) const;
};

}  // namespace tri
