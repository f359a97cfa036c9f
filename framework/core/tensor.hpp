// Dense float32 tensors: row-major, contiguous, up to 5 dims.
// A Tensor is a cheap handle (shared_ptr) to storage + offset + shape. Views share storage
// (reshape, a slice along the first axis); every other shape change is an explicit copy.
// Storage carries a version counter that in-place writes bump, so autograd can detect a
// tensor saved for backward that was modified afterwards.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/base/error.hpp"

namespace tri {

constexpr int kMaxDims = 5;

struct Shape {
  int nd = 0;
  int64_t d[kMaxDims] = {0, 0, 0, 0, 0};
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);
  int64_t numel() const;
  int64_t operator[](int i) const { return d[i < 0 ? i + nd : i]; }
  int64_t& operator[](int i) { return d[i < 0 ? i + nd : i]; }
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::vector<int64_t> vec() const { return {d, d + nd}; }
  std::string str() const;  // "[2, 3]"
};

// Raw float buffer, 64-byte aligned. Tracks live/peak bytes for memory reports.
struct Storage {
  float* data = nullptr;
  int64_t size = 0;
  uint64_t version = 0;
  explicit Storage(int64_t n);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// Bytes currently held by tensor storage, and the high-water mark since the last reset.
// Freed storage is cached for reuse by size (capped at 2 GiB); it counts as cached, not live.
int64_t memory_live_bytes();
int64_t memory_peak_bytes();
void memory_reset_peak();
int64_t memory_cached_bytes();
void memory_release_cache();  // returns cached blocks to the system

// While alive, a tensor allocation that would bring the live bytes above `max_live_bytes` is an
// Error "<what>: ..." instead. For building from an untrusted file: what the file declares must
// not make us allocate more than what it can hold (scopes nest; the innermost applies).
class TensorMemoryLimit {
 public:
  TensorMemoryLimit(int64_t max_live_bytes, std::string what);
  ~TensorMemoryLimit();
  TensorMemoryLimit(const TensorMemoryLimit&) = delete;
  TensorMemoryLimit& operator=(const TensorMemoryLimit&) = delete;

 private:
  int64_t previous_max_;
  std::string previous_what_;
};

struct Node;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  Shape shape;
  bool requires_grad = false;
  bool is_leaf = true;                 // false for outputs of recorded ops
  std::shared_ptr<TensorImpl> grad;    // allocated on first accumulation
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> p) : p_(std::move(p)) {}

  // Factories. Tensors start uninitialised (empty), zeroed (zeros) or filled.
  static Tensor empty(const Shape& s);
  static Tensor zeros(const Shape& s);
  static Tensor full(const Shape& s, float v);
  static Tensor from(const Shape& s, const std::vector<float>& values);
  static Tensor scalar(float v) { return full(Shape{}, v); }

  bool defined() const { return p_ != nullptr; }
  const Shape& shape() const { return p_->shape; }
  int dim() const { return p_->shape.nd; }
  int64_t size(int i) const { return p_->shape[i]; }
  int64_t numel() const { return p_->shape.numel(); }
  float* data() const { return p_->storage->data + p_->offset; }
  float item() const;
  std::vector<float> tolist() const { return {data(), data() + numel()}; }

  bool requires_grad() const { return p_->requires_grad; }
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const { return p_->is_leaf; }
  Tensor grad() const { return Tensor(p_->grad); }  // undefined until backward reached it
  float* grad_data() const;                           // allocates a zeroed grad if needed
  // The grad buffer for a backward that sets every element: allocated uninitialised when
  // missing, with *fresh saying so (then write, don't add).
  float* grad_data_for_write(bool* fresh) const;
  void zero_grad();                                 // zeroes the grad buffer, keeps it

  // Views (share storage): reshape keeps numel; select/narrow work on the first axis.
  Tensor view(const Shape& s) const;
  Tensor narrow0(int64_t start, int64_t length) const;
  Tensor clone() const;     // deep copy, no autograd history
  bool all_finite() const;  // no NaN and no Inf among its elements

  // In-place writes bump the version counter.
  void fill_(float v);
  void copy_(const Tensor& src);
  void bump_version() { ++p_->storage->version; }
  uint64_t version() const { return p_->storage->version; }

  TensorImpl* impl() const { return p_.get(); }
  const std::shared_ptr<TensorImpl>& ptr() const { return p_; }
  bool same(const Tensor& o) const { return p_ == o.p_; }

 private:
  std::shared_ptr<TensorImpl> p_;
};

// A tensor's shape for a message: "[2, 3]", or "undefined".
std::string shape_of(const Tensor& t);

// Integer tensors for token ids and targets (no autograd): a shape and its values, row-major.
class IntTensor {
 public:
  IntTensor() = default;
  IntTensor(const Shape& s, std::vector<int32_t> values);  // values.size() == s.numel()
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  const int32_t* data() const { return values_.data(); }
  int32_t* data() { return values_.data(); }
  const std::vector<int32_t>& values() const { return values_; }

 private:
  Shape shape_;
  std::vector<int32_t> values_;
};

}  // namespace tri
