#include "framework/core/tensor.hpp"

#include <atomic>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <mutex>
#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif
#include <unordered_map>
#include <sstream>

namespace tri {

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};
// TensorMemoryLimit's current bound (set and read on the thread that builds models).
int64_t g_limit = INT64_MAX;
std::string g_limit_what;
void track(int64_t delta) {
  int64_t now = g_live.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {}
}

// A new block. From 2 MB up, on 2 MB boundaries in whole 2 MB pages, with the kernel asked for
// transparent huge pages (Linux's "madvise" mode gives them only when asked): a GEMM walking a
// 32 MB operand (the head's output at T 256) then misses the TLB 512 times less often. Steps
// ran 2-6% faster at E256, E1024, W and L4096 (docs/BENCHMARKS.md); the bits cannot change.
constexpr size_t kHugePage = size_t(2) << 20;
void* allocate(size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (bytes >= kHugePage) {
    const size_t whole = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, whole);
    if (p) madvise(p, whole, MADV_HUGEPAGE);  // advice only: without it, 4 kB pages
    return p;
  }
#endif
  return std::aligned_alloc(64, bytes);
}

// Freed blocks are kept by exact size and handed out again: a training step allocates the
// same shapes every step, and fresh pages cost a page fault each (on a VM, writing 16 MB of
// new memory takes longer than a 2048^2 GEMM). The cache is capped; beyond it blocks go back.
struct BlockCache {
  static constexpr size_t kMaxCachedBytes = size_t(2) << 30;
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t cached_bytes = 0;

  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = free_blocks.find(bytes);
      if (it != free_blocks.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes -= bytes;
        return p;
      }
    }
    return allocate(bytes);
  }
  void give(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (cached_bytes + bytes <= kMaxCachedBytes) {
        free_blocks[bytes].push_back(p);
        cached_bytes += bytes;
        return;
      }
    }
    std::free(p);
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [bytes, blocks] : free_blocks)
      for (void* p : blocks) std::free(p);
    free_blocks.clear();
    cached_bytes = 0;
  }
};

// Never destroyed: tensors in static storage may outlive any other static object.
BlockCache& cache() {
  static BlockCache* c = new BlockCache;
  return *c;
}

size_t block_bytes(int64_t n) {
  size_t bytes = size_t(std::max<int64_t>(n, 1)) * sizeof(float);
  return (bytes + 63) / 64 * 64;
}
}  // namespace

int64_t memory_live_bytes() { return g_live.load(); }
int64_t memory_peak_bytes() { return g_peak.load(); }
void memory_reset_peak() { g_peak.store(g_live.load()); }
int64_t memory_cached_bytes() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return int64_t(cache().cached_bytes);
}
void memory_release_cache() { cache().release(); }

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::vector<int64_t>(dims)) {}

Shape::Shape(const std::vector<int64_t>& dims) {
  if (dims.size() > kMaxDims)
    throw Error("tensor: " + std::to_string(dims.size()) + " dims requested, at most " +
                std::to_string(kMaxDims) + " are supported");
  nd = int(dims.size());
  for (int i = 0; i < nd; ++i) {
    if (dims[i] < 0) throw Error("tensor: negative dimension " + std::to_string(dims[i]));
    d[i] = dims[i];
  }
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < nd; ++i) n *= d[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (nd != o.nd) return false;
  for (int i = 0; i < nd; ++i)
    if (d[i] != o.d[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < nd; ++i) s << (i ? ", " : "") << d[i];
  s << ']';
  return s.str();
}

TensorMemoryLimit::TensorMemoryLimit(int64_t max_live_bytes, std::string what)
    : previous_max_(g_limit), previous_what_(std::move(g_limit_what)) {
  g_limit = max_live_bytes;
  g_limit_what = std::move(what);
}

TensorMemoryLimit::~TensorMemoryLimit() {
  g_limit = previous_max_;
  g_limit_what = std::move(previous_what_);
}

Storage::Storage(int64_t n) : size(n) {
  const size_t bytes = block_bytes(n);
  if (g_limit != INT64_MAX && (n > g_limit || g_live.load() + int64_t(bytes) > g_limit))
    throw Error(g_limit_what + ": needs more than " + std::to_string(g_limit) + " bytes of tensors");
  data = static_cast<float*>(cache().take(bytes));
  if (!data)
    throw Error("tensor: out of memory allocating " + std::to_string(bytes) + " bytes (" +
                std::to_string(memory_live_bytes()) + " bytes already in tensors)");
  track(int64_t(bytes));
}

Storage::~Storage() {
  const size_t bytes = block_bytes(size);
  track(-int64_t(bytes));
  cache().give(data, bytes);
}

Tensor Tensor::empty(const Shape& s) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(s.numel());
  impl->shape = s;
  return Tensor(impl);
}

Tensor Tensor::zeros(const Shape& s) {
  Tensor t = empty(s);
  std::memset(t.data(), 0, sizeof(float) * size_t(t.numel()));
  return t;
}

Tensor Tensor::full(const Shape& s, float v) {
  Tensor t = empty(s);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = v;
  return t;
}

Tensor Tensor::from(const Shape& s, const std::vector<float>& values) {
  if (int64_t(values.size()) != s.numel())
    throw Error("tensor: " + std::to_string(values.size()) + " values given for shape " +
                s.str() + " (" + std::to_string(s.numel()) + " elements)");
  Tensor t = empty(s);
  std::memcpy(t.data(), values.data(), sizeof(float) * values.size());
  return t;
}

float Tensor::item() const {
  if (numel() != 1)
    throw Error("item: tensor of shape " + shape().str() + " is not a single value");
  return data()[0];
}

Tensor& Tensor::requires_grad_(bool on) {
  p_->requires_grad = on;
  return *this;
}

float* Tensor::grad_data() const {
  if (!p_->grad) {
    Tensor g = zeros(shape());
    p_->grad = g.ptr();
  }
  return p_->grad->storage->data + p_->grad->offset;
}

float* Tensor::grad_data_for_write(bool* fresh) const {
  *fresh = !p_->grad;
  if (*fresh) p_->grad = empty(shape()).ptr();
  return p_->grad->storage->data + p_->grad->offset;
}

bool Tensor::all_finite() const {
  const float* p = data();
  const int64_t n = numel();
  bool ok = true;
#pragma omp simd reduction(&& : ok)
  for (int64_t i = 0; i < n; ++i) ok = ok && std::isfinite(p[i]);
  return ok;
}

void Tensor::zero_grad() {
  if (p_->grad) std::memset(grad_data(), 0, sizeof(float) * size_t(numel()));
}

Tensor Tensor::view(const Shape& s) const {
  if (s.numel() != numel())
    throw Error("view: cannot view shape " + shape().str() + " as " + s.str() +
                " (element counts differ)");
  auto impl = std::make_shared<TensorImpl>(*p_);
  impl->shape = s;
  impl->grad.reset();
  impl->requires_grad = false;
  impl->is_leaf = true;
  return Tensor(impl);
}

Tensor Tensor::narrow0(int64_t start, int64_t length) const {
  if (dim() == 0 || start < 0 || length < 0 || start + length > size(0))
    throw Error("narrow: rows [" + std::to_string(start) + ", " + std::to_string(start + length) +
                ") out of range for shape " + shape().str());
  auto impl = std::make_shared<TensorImpl>(*p_);
  int64_t row = numel() / std::max<int64_t>(size(0), 1);
  impl->offset += start * row;
  impl->shape[0] = length;
  impl->grad.reset();
  impl->requires_grad = false;
  impl->is_leaf = true;
  return Tensor(impl);
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape());
  std::memcpy(t.data(), data(), sizeof(float) * size_t(numel()));
  return t;
}

void Tensor::fill_(float v) {
  float* p = data();
  for (int64_t i = 0; i < numel(); ++i) p[i] = v;
  bump_version();
}

void Tensor::copy_(const Tensor& src) {
  if (src.shape() != shape())
    throw Error("copy_: source shape " + src.shape().str() + " differs from " + shape().str());
  std::memcpy(data(), src.data(), sizeof(float) * size_t(numel()));
  bump_version();
}

IntTensor::IntTensor(const Shape& s, std::vector<int32_t> values) : shape_(s), values_(std::move(values)) {
  if (int64_t(values_.size()) != s.numel())
    throw Error("int tensor: " + std::to_string(values_.size()) + " values given for shape " + s.str());
}

std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().str() : "undefined"; }

}  // namespace tri
