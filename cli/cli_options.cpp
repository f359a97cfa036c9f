#include "cli/cli_options.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include <boost/make_shared.hpp>

#include "models/family.hpp"

namespace tri::cli {

using namespace tri::train;

namespace {

// Adds each field once (by key) to a Boost description, typed, with its default when asked.
class Declarer : public FieldVisitor {
 public:
  Declarer(po::options_description& d, bool with_defaults) : d_(d), defaults_(with_defaults) {}
  void on(const IntSpec& f, int64_t& v) override {
    auto* s = po::value<int64_t>()->value_name("N");
    add(f, defaults_ ? s->default_value(v) : s, f.zero ? "; 0 = " + std::string(f.zero.text) : "");
  }
  void on(const RealSpec& f, double& v) override {
    auto* s = po::value<double>()->value_name("X");
    add(f, defaults_ ? s->default_value(v, exact_number(v)) : s);
  }
  void on(const BoolSpec& f, bool& v) override {
    auto* s = po::value<bool>()->value_name("BOOL");
    add(f, defaults_ ? s->default_value(v, v ? "1" : "0") : s);
  }
  void on(const ChoiceSpec& f, std::string& v) override {
    auto* s = po::value<std::string>()->value_name("NAME");
    add(f, defaults_ ? s->default_value(v) : s);
  }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override {
    auto* s = po::value<std::string>()->value_name("LIST");
    add(f, defaults_ ? s->default_value(int_list_text(v)) : s);
  }
  void on(const TextSpec& f, std::string& v) override {
    auto* s = po::value<std::string>()->value_name("TEXT");
    add(f, defaults_ ? s->default_value(v) : s);
  }

 private:
  po::options_description& d_;
  bool defaults_;
  void add(const FieldSpec& f, const po::value_semantic* s, const std::string& suffix = "") {
    if (d_.find_nothrow(f.key, false)) {  // declared by an earlier family or task
      delete s;
      return;
    }
    const std::vector<std::string> owners = owners_of(f.key);
    std::string help;
    if (!owners.empty()) help.append("[").append(joined(owners)).append("] ");
    help.append(f.help).append(suffix);
    d_.add(boost::make_shared<po::option_description>(f.key.c_str(), s, help.c_str()));
  }
};

// Sets the fields whose option was given.
class GivenReader : public FieldVisitor {
 public:
  GivenReader(const po::variables_map& vm, const std::set<std::string>* only) : vm_(vm), only_(only) {}
  void on(const IntSpec& f, int64_t& v) override { read(f, v); }
  void on(const RealSpec& f, double& v) override { read(f, v); }
  void on(const BoolSpec& f, bool& v) override { read(f, v); }
  void on(const ChoiceSpec& f, std::string& v) override { read(f, v); }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override {
    if (wanted(f)) v = parse_list_field(f, vm_[f.key].as<std::string>());
  }
  void on(const TextSpec& f, std::string& v) override { read(f, v); }

 private:
  const po::variables_map& vm_;
  const std::set<std::string>* only_;
  bool wanted(const FieldSpec& f) const { return given(vm_, f.key) && (!only_ || only_->count(f.key)); }
  template <class T>
  void read(const FieldSpec& f, T& v) {
    if (wanted(f)) v = vm_[f.key].as<T>();
  }
};

void read_with(const po::variables_map& vm, Options& o, const std::set<std::string>* only) {
  GivenReader r(vm, only);
  try {
    o.visit(r);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

std::string any_text(const boost::any& v) {
  if (auto* p = boost::any_cast<int64_t>(&v)) return std::to_string(*p);
  if (auto* p = boost::any_cast<double>(&v)) return exact_number(*p);
  if (auto* p = boost::any_cast<bool>(&v)) return *p ? "1" : "0";
  if (auto* p = boost::any_cast<std::string>(&v)) return *p;
  return "";
}

po::options_description declared(const char* caption, const std::vector<Options*>& parts,
                                 bool with_defaults = true) {
  po::options_description d(caption, 100);
  for (Options* o : parts) {
    Declarer declare(d, with_defaults);
    o->visit(declare);
  }
  return d;
}

}  // namespace

// The shared fields take their defaults from the default config (ModelConfig(), TaskConfig()),
// whatever family or task is registered first.
po::options_description model_options() {
  std::vector<ModelConfig> models = {ModelConfig()};
  for (const std::string& f : family_names()) models.push_back(ModelConfig::of(f));
  std::vector<Options*> parts;
  for (ModelConfig& m : models) parts.push_back(&m);
  return declared("model options", parts);
}

po::options_description task_options(bool with_defaults) {
  std::vector<TaskConfig> configs = {TaskConfig()};
  for (const std::string& t : task_names()) configs.push_back(TaskConfig::of(t));
  std::vector<Options*> parts;
  for (TaskConfig& c : configs) parts.push_back(&c);
  return declared(with_defaults ? "task options" : "task options (default: the checkpoint's task; given ones override it)",
                  parts, with_defaults);
}

po::options_description training_options() {
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  RunSettings run;
  return declared("training options", {&optimizer, &schedule, &run});
}

po::options_description runtime_options() {
  RuntimeConfig runtime;
  return declared("common options", {&runtime});
}

bool given(const po::variables_map& vm, const std::string& key) {
  return vm.count(key) && !vm[key].defaulted();
}

void read_given(const po::variables_map& vm, Options& o) { read_with(vm, o, nullptr); }

void read_given(const po::variables_map& vm, Options& o, const std::set<std::string>& only) {
  read_with(vm, o, &only);
}

std::string given_text(const po::variables_map& vm, const std::string& key) {
  return given(vm, key) ? any_text(vm[key].value()) : "";
}

void refuse_foreign(const po::variables_map& vm, const Options& o, const po::options_description& groups,
                    const std::string& what) {
  const std::vector<std::string> own = field_keys(o);
  for (const auto& opt : groups.options()) {
    const std::string& key = opt->long_name();
    if (!given(vm, key) || std::find(own.begin(), own.end(), key) != own.end()) continue;
    boost::any default_value;
    if (opt->semantic()->apply_default(default_value) && any_text(default_value) == given_text(vm, key)) continue;
    const std::vector<std::string> owners = owners_of(key);
    throw UsageError("--" + key + " " + given_text(vm, key) + " is an option of " +
                     (owners.empty() ? std::string("another command") : joined(owners)) +
                     ", not of " + what);
  }
}
}  // namespace tri::cli
