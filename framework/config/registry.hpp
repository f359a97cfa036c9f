// A registry of named entries (model families, tasks, position encodings, optimizers, schedules,
// benchmarks): the built-ins, listed once, and those a program or a test adds at run time.
// Entries never move, so references to them stay valid. Every name a user types is looked up in
// one, and every miss is worded by unknown_name (framework/base/error.hpp).
#pragma once
#include <deque>
#include <string>
#include <typeindex>
#include <vector>

#include "framework/base/error.hpp"

namespace tri {

// Spec has `std::string name` and `std::string summary`. Specs with options (families, tasks)
// also have a factory `options()` of the entry's options and `std::type_index options_type`,
// which the registry fills from that factory once, so that checking a config's options against
// its entry costs no construction.
template <class Spec>
class Registry {
 public:
  // `option` names the entries in messages ("--model").
  Registry(std::string option, std::vector<Spec> builtins) : option_(std::move(option)) {
    for (Spec& s : builtins) add(std::move(s));
  }

  void add(Spec spec) {
    if (has(spec.name)) throw Error("register: " + option_ + " '" + spec.name + "' exists already");
    if constexpr (requires { spec.options_type; }) {
      if (!spec.options) throw Error("register: " + option_ + " '" + spec.name + "' has no options");
      const auto defaults = spec.options();
      spec.options_type = typeid(*defaults);
    }
    entries_.push_back(std::move(spec));
  }
  bool has(const std::string& name) const {
    for (const Spec& s : entries_)
      if (s.name == name) return true;
    return false;
  }
  // The entry of `name`; an Error naming the registered ones when there is none.
  const Spec& find(const std::string& name) const {
    for (const Spec& s : entries_)
      if (s.name == name) return s;
    throw unknown_name(option_, name, names());
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Spec& s : entries_) out.push_back(s.name);
    return out;
  }
  std::vector<const Spec*> all() const {
    std::vector<const Spec*> out;
    for (const Spec& s : entries_) out.push_back(&s);
    return out;
  }
  // "<lead> a (summary of a), b (summary of b)", for --help.
  std::string help(const std::string& lead) const {
    std::string h = lead;
    for (const Spec& s : entries_) h.append(&s == &entries_.front() ? " " : ", ").append(s.name).append(" (").append(s.summary).append(")");
    return h;
  }

 private:
  std::string option_;
  std::deque<Spec> entries_;
};

}  // namespace tri
