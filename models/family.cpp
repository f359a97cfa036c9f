#include "models/family.hpp"

#include "framework/config/registry.hpp"
#include "models/position_encodings.hpp"

namespace tri {

// The built-in families, each defined in its mixer's file.
FamilySpec attention_family();         // models/attention.cpp
FamilySpec linear_attention_family();  // models/linear_attention.cpp
FamilySpec mamba_family();             // models/mamba.cpp
FamilySpec deltanet_family();          // models/deltanet.cpp
FamilySpec gated_deltanet_family();    // models/gated_deltanet.cpp
FamilySpec mamba2_family();            // models/mamba2.cpp

namespace {

Registry<FamilySpec>& registry() {
  static Registry<FamilySpec> r("--model", {attention_family(), linear_attention_family(), mamba_family(),
                                            deltanet_family(), gated_deltanet_family(), mamba2_family()});
  return r;
}

}  // namespace

void register_family(FamilySpec spec) {
  if (!spec.make) throw Error("register_family: family '" + spec.name + "' needs make");
  for (const std::string& p : spec.positions) position_spec(p);  // an Error names the registered ones
  registry().add(std::move(spec));
}

const FamilySpec& family_spec(const std::string& name) { return registry().find(name); }
std::vector<std::string> family_names() { return registry().names(); }
std::vector<const FamilySpec*> families() { return registry().all(); }
std::string families_help(const std::string& lead) { return registry().help(lead); }

std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, Rng& rng) {
  const ModelConfig c = cfg.checked();
  return c.spec().make(c, rng);
}

}  // namespace tri
