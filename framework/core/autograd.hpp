// Tape-based reverse-mode autograd.
// The tape is a vector of recorded ops in execution order (DyNet's computation graph).
// Each node holds its output, the tensors its backward reads (with their versions at record
// time) and the backward closure. backward() walks the tape in reverse; backward closures only
// add into gradients. Ops whose inputs need no gradient are never recorded.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

struct Node {
  const char* op;                     // the op's name, for error messages
  Tensor out;                         // its output (the gradient flows in here)
  std::vector<Tensor> more_out;       // an op with several outputs: the others (record_parts)
  std::vector<Tensor> saved;          // tensors backward reads
  std::vector<uint64_t> saved_version;
  std::function<void(const float*)> backward;  // given d out, adds into the inputs' grads
};

// True when gradients are being recorded (no NoGradGuard is active on this thread).
bool grad_enabled();

// Scoped guard: ops run under it are not recorded.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// True when grad mode is on and any input requires a gradient.
bool needs_grad(std::initializer_list<Tensor> inputs);

// Records an op producing `out`. Marks `out` as requiring grad. `saved` are the tensors the
// backward closure reads: backward fails, naming `op`, if any was modified in place since.
// The closure receives d loss / d out (contiguous, out's shape) and only adds into grads.
void record(const char* op, const Tensor& out, std::vector<Tensor> saved,
            std::function<void(const float*)> backward);

// Records an op with several outputs, `parts` (out = parts.back()). The closure runs once, after
// every part's consumers, when any part has a gradient; it reads each part's with part.grad()
// (undefined where none flowed), and receives out's gradient or nullptr.
void record_parts(const char* op, const std::vector<Tensor>& parts, std::vector<Tensor> saved,
                  std::function<void(const float*)> backward);

// d loss / d t, allocated zeroed on first use; nullptr when t needs no gradient. Backward
// closures call this for each input and skip the work when it returns nullptr.
float* grad_of(const Tensor& t);

// The same for a closure that sets every element of d loss / d t: when the buffer is new
// (*fresh), it is uninitialised and the closure writes `0.f + value` (the bits an add into
// zeros gives, -0 included) instead of adding; this skips zeroing and re-reading it.
float* grad_for_write(const Tensor& t, bool* fresh);

// Backward of a view op (out holds x's elements in x's order): d x += d out. An intermediate
// x with no gradient yet takes out's gradient buffer, viewed in x's shape, instead of a copy:
// nothing reads d out after this op's backward (backward() drops it next). Leaves always get
// their own buffer.
void view_backward(const Tensor& x, const Tensor& out);

// Element-wise d(i) into a gradient from grad_for_write: written when fresh, added otherwise.
template <class D>
void set_or_add_grad(float* grad, bool fresh, int64_t n, D d) {
  // d firstprivate: each thread's own copy, whose pointers the loop can keep in registers (shared,
  // they were reloaded per element and the loop became gathers, 4x slower).
  if (fresh) {
#pragma omp parallel for simd schedule(static) firstprivate(d) if (n > kParallelSimdMin)
    for (int64_t i = 0; i < n; ++i) grad[i] = 0.f + d(i);  // 0 +: -0 becomes +0, as in +=
  } else {
#pragma omp parallel for simd schedule(static) firstprivate(d) if (n > kParallelSimdMin)
    for (int64_t i = 0; i < n; ++i) grad[i] += d(i);
  }
}

// Runs the tape backwards from a scalar loss (seeded with d loss = 1), then clears the tape.
// Gradients of leaves accumulate across calls until zero_grad().
void backward(const Tensor& loss);

// Anomaly mode (PyTorch's detect_anomaly): every recorded op's output, and every gradient a
// backward closure writes, is checked for NaN/Inf; the first one found is remembered as
// "the forward of 'op'" or "the backward of 'op'". Costs a pass over each tensor.
void set_detect_anomaly(bool on);
bool detect_anomaly();
// The first non-finite value's origin since the last call, or "" (then cleared).
std::string take_anomaly();

// Drops all recorded ops without running them (e.g. after an evaluation forward).
void clear_tape();
size_t tape_size();

}  // namespace tri
