#include "framework/core/autograd.hpp"

#include <chrono>
#include <string>

#include "framework/runtime/profile.hpp"
#include "framework/runtime/runtime.hpp"

namespace tri {

namespace {
thread_local bool t_grad_enabled = true;
thread_local std::vector<Node> t_tape;
thread_local bool t_anomaly = false;
thread_local std::string t_first_anomaly;
thread_local std::vector<Tensor> t_grads_written;  // in anomaly mode, during one closure

void note_grad_written(const Tensor& t) {
  if (t_anomaly && t_first_anomaly.empty()) t_grads_written.push_back(t);
}
}  // namespace

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const char* op, const Tensor& out, std::vector<Tensor> saved,
            std::function<void(const float*)> backward) {
  if (profiling()) profile_forward(op);
  if (t_anomaly && t_first_anomaly.empty() && !out.all_finite())
    t_first_anomaly = std::string("the forward of '") + op + "'";
  out.impl()->requires_grad = true;
  out.impl()->is_leaf = false;
  Node n{op, out, {}, std::move(saved), {}, std::move(backward)};
  n.saved_version.reserve(n.saved.size());
  for (const Tensor& t : n.saved) n.saved_version.push_back(t.version());
  t_tape.push_back(std::move(n));
}

void record_parts(const char* op, const std::vector<Tensor>& parts, std::vector<Tensor> saved,
                  std::function<void(const float*)> backward) {
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    parts[i].impl()->requires_grad = true;
    parts[i].impl()->is_leaf = false;
  }
  record(op, parts.back(), std::move(saved), std::move(backward));
  t_tape.back().more_out.assign(parts.begin(), parts.end() - 1);
}

void backward(const Tensor& loss) {
  if (!loss.defined()) throw Error("backward: the loss tensor is undefined");
  if (loss.numel() != 1)
    throw Error("backward: the loss must be a single value, got shape " + loss.shape().str() +
                " (reduce it with sum() or mean() first)");
  if (!loss.requires_grad())
    throw Error(
        "backward: the loss does not depend on any tensor that requires grad (were the "
        "parameters registered with requires_grad, and was the forward run outside NoGradGuard?)");
  Tensor l = loss;
  l.grad_data()[0] += 1.0f;
  NoGradGuard no_grad;  // backward closures must not record
  std::vector<Node> tape;
  tape.swap(t_tape);
  for (auto it = tape.rbegin(); it != tape.rend(); ++it) {
    Node& n = *it;
    bool flowed = bool(n.out.impl()->grad);
    for (const Tensor& o : n.more_out) flowed = flowed || bool(o.impl()->grad);
    if (!flowed) continue;  // nothing flowed into this op's outputs
    const float* g = n.out.impl()->grad ? n.out.grad_data() : nullptr;
    for (size_t i = 0; i < n.saved.size(); ++i) {
      if (n.saved[i].version() != n.saved_version[i])
        throw Error(std::string("backward: a tensor saved by '") + n.op +
                    "' was modified in place after it was used (version " +
                    std::to_string(n.saved_version[i]) + " -> " +
                    std::to_string(n.saved[i].version()) +
                    "); clone it before modifying, or modify it before the op");
    }
    if (profiling()) {
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t f0 = flop_count();
      n.backward(g);
      profile_backward(n.op, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
                       flop_count() - f0);
    } else {
      n.backward(g);
    }
    if (t_anomaly) {
      for (const Tensor& t : t_grads_written)
        if (t_first_anomaly.empty() && t.grad().defined() && !t.grad().all_finite())
          t_first_anomaly = std::string("the backward of '") + n.op + "'";
      t_grads_written.clear();
    }
    // Intermediate gradients are not needed once consumed: free them early.
    n.out.impl()->grad.reset();
    for (const Tensor& o : n.more_out) o.impl()->grad.reset();
    n.saved.clear();
    n.backward = nullptr;
  }
}

float* grad_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  note_grad_written(t);
  return t.grad_data();
}

float* grad_for_write(const Tensor& t, bool* fresh) {
  *fresh = false;
  if (!t.defined() || !t.requires_grad()) return nullptr;
  note_grad_written(t);
  return t.grad_data_for_write(fresh);
}

void view_backward(const Tensor& x, const Tensor& out) {
  if (!x.defined() || !x.requires_grad()) return;
  const std::shared_ptr<TensorImpl>& g = out.impl()->grad;
  if (!x.is_leaf() && !x.impl()->grad && g && g->shape.numel() == x.numel()) {
    note_grad_written(x);
    x.impl()->grad = Tensor(g).view(x.shape()).ptr();
    return;
  }
  bool fresh;
  float* gx = grad_for_write(x, &fresh);
  const float* go = out.grad_data();
  set_or_add_grad(gx, fresh, x.numel(), [go](int64_t i) { return go[i]; });
}

void set_detect_anomaly(bool on) {
  t_anomaly = on;
  t_first_anomaly.clear();
}
bool detect_anomaly() { return t_anomaly; }
std::string take_anomaly() {
  std::string s;
  s.swap(t_first_anomaly);
  return s;
}

void clear_tape() { t_tape.clear(); }
size_t tape_size() { return t_tape.size(); }

}  // namespace tri
