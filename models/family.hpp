// The registry of model families: one entry per sequence mixer. Everything outside the
// mixer's own file learns about a family from its entry, so adding a mixer is one new file
// (the mixer, its options and its entry) plus one line in family.cpp's list of built-ins;
// tests may register more at run time (register_family).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "framework/core/rng.hpp"
#include "models/config.hpp"
#include "models/layers.hpp"
#include "models/mixer.hpp"

namespace tri {

struct FamilySpec {
  std::string name;     // the --model value and the checkpoint's `model`
  std::string summary;  // one line for --help
  // The family's own options, at their defaults (fields and ranges in their visit()).
  std::function<std::unique_ptr<Options>()> options;
  std::type_index options_type = typeid(void);  // filled by the registry from options()
  // Builds one mixer from a checked config (ModelConfig::checked).
  std::function<std::unique_ptr<Mixer>(const ModelConfig&, Rng&)> make;
  // The norm of its blocks and of the final norm_f, and the parameter name of the norm before
  // the mixer ("norm1"; mamba_ssm calls it "norm").
  Norm::Kind norm = Norm::Kind::layer;
  std::string first_norm = "norm1";
  std::vector<std::string> positions;  // the position encodings it supports (position_names())
  // Checks across fields beyond each field's range (may be empty); throws a one-line Error.
  std::function<void(const ModelConfig&)> validate;
  std::string decode_state;  // what its decoding step carries, for reports
  std::string parity_model;  // its PyTorch twin, a class in tests/torch/models.py ("": none)
};

// Adds a family; an Error when the name is taken.
void register_family(FamilySpec spec);
// The entry of `name`; an Error naming the registered families when there is none.
const FamilySpec& family_spec(const std::string& name);
std::vector<std::string> family_names();
std::vector<const FamilySpec*> families();
// "<lead> attention (its summary), linear (...), ...", for --help.
std::string families_help(const std::string& lead);

// The mixer cfg.family names, built from cfg.checked().
std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, Rng& rng);

}  // namespace tri
