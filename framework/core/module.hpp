// Module: a named tree of parameters (flashlight style: modules are thin compositions).
// Parameter names follow PyTorch's state_dict ("backbone.layers.0.mixer.q_proj.weight").
#pragma once
#include <string>
#include <vector>

#include "framework/core/tensor.hpp"

namespace tri {

struct Parameter {
  std::string name;  // full dotted name
  Tensor tensor;
  bool decay;        // false: excluded from weight decay (norms, biases, A_log, D, ...)
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // All parameters of this module and its children, in registration order.
  std::vector<Parameter> parameters() const;
  int64_t num_parameters() const;
  // A table: name, shape, count; one row each and a total.
  std::string parameter_table() const;
  // FNV-1a over every parameter's bytes in registration order: equal iff bit-identical (up to
  // hash collisions), for comparing runs.
  uint64_t parameters_fnv1a() const;
  void zero_grad();

  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }

 protected:
  // Registers a tensor as a parameter (it is marked requires_grad) and returns it.
  Tensor& add_parameter(const std::string& name, Tensor& t, bool decay = true);
  // Registers a child; its parameters appear under "name.".
  void add_module(const std::string& name, Module& child);

 private:
  struct Param { std::string name; Tensor* tensor; bool decay; };
  std::vector<Param> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
  void collect(const std::string& prefix, std::vector<Parameter>& out) const;
};

}  // namespace tri
