#include "framework/core/module.hpp"

#include <cstdio>
#include <sstream>

#include "framework/core/hash.hpp"

namespace tri {

Tensor& Module::add_parameter(const std::string& name, Tensor& t, bool decay) {
  if (!t.defined()) throw Error("module: parameter '" + name + "' registered before it was created");
  for (const Param& p : params_)
    if (p.name == name) throw Error("module: parameter '" + name + "' registered twice");
  t.requires_grad_(true);
  params_.push_back({name, &t, decay});
  return t;
}

void Module::add_module(const std::string& name, Module& child) {
  for (const auto& c : children_)
    if (c.first == name) throw Error("module: child '" + name + "' registered twice");
  children_.push_back({name, &child});
}

void Module::collect(const std::string& prefix, std::vector<Parameter>& out) const {
  for (const Param& p : params_) out.push_back({prefix + p.name, *p.tensor, p.decay});
  for (const auto& c : children_) c.second->collect(prefix + c.first + ".", out);
}

std::vector<Parameter> Module::parameters() const {
  std::vector<Parameter> out;
  collect("", out);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Parameter& p : parameters()) n += p.tensor.numel();
  return n;
}

std::string Module::parameter_table() const {
  std::vector<Parameter> ps = parameters();
  size_t w = 4;
  for (const Parameter& p : ps) w = std::max(w, p.name.size());
  std::ostringstream s;
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-18s  %12s\n", int(w), "name", "shape", "count");
  s << line;
  int64_t total = 0;
  for (const Parameter& p : ps) {
    std::snprintf(line, sizeof line, "%-*s  %-18s  %12lld\n", int(w), p.name.c_str(),
                  p.tensor.shape().str().c_str(), (long long)p.tensor.numel());
    s << line;
    total += p.tensor.numel();
  }
  std::snprintf(line, sizeof line, "%-*s  %-18s  %12lld\n", int(w), "total", "", (long long)total);
  s << line;
  return s.str();
}

void Module::zero_grad() {
  for (Parameter& p : parameters()) p.tensor.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

uint64_t Module::parameters_fnv1a() const {
  uint64_t h = kFnv1aOffset;
  for (const Parameter& p : parameters()) h = fnv1a(p.tensor.data(), size_t(p.tensor.numel()) * sizeof(float), h);
  return h;
}

}  // namespace tri
