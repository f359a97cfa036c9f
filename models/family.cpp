#include "models/family.hpp"

#include <deque>

namespace tri {

// The built-in families, each defined in its mixer's file.
FamilySpec attention_family();         // models/attention.cpp
FamilySpec linear_attention_family();  // models/linear_attention.cpp
FamilySpec mamba_family();             // models/mamba.cpp

namespace {

std::deque<FamilySpec>& registry() {  // a deque: entries never move, so references stay valid
  static std::deque<FamilySpec> r = {attention_family(), linear_attention_family(), mamba_family()};
  return r;
}

}  // namespace

void register_family(FamilySpec spec) {
  for (const FamilySpec& f : registry())
    if (f.name == spec.name) throw Error("register_family: family '" + spec.name + "' exists already");
  if (!spec.options || !spec.make) throw Error("register_family: family '" + spec.name + "' needs options and make");
  registry().push_back(std::move(spec));
}

const FamilySpec& family_spec(const std::string& name) {
  for (const FamilySpec& f : registry())
    if (f.name == name) return f;
  std::string names;
  for (const std::string& n : family_names()) names += (names.empty() ? "" : ", ") + n;
  throw Error("--model '" + name + "' unknown (allowed: " + names + ")");
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const FamilySpec& f : registry()) names.push_back(f.name);
  return names;
}

std::vector<const FamilySpec*> families() {
  std::vector<const FamilySpec*> out;
  for (const FamilySpec& f : registry()) out.push_back(&f);
  return out;
}

std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, Rng& rng) {
  const ModelConfig c = cfg.checked();
  return c.spec().make(c, rng);
}

}  // namespace tri
