#include "models/config.hpp"

#include <algorithm>
#include <typeinfo>

#include "models/family.hpp"

namespace tri {

namespace {

// Every position encoding some family supports, in the order the families list them.
std::vector<std::string> all_positions() {
  std::vector<std::string> out;
  for (const FamilySpec* f : families())
    for (const std::string& p : f->positions)
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

}  // namespace

ModelConfig::ModelConfig() : mixer(family_spec(family).options()) {}

ModelConfig ModelConfig::of(const std::string& name) {
  ModelConfig c;
  c.family = name;
  c.mixer = OptionsBox<Options>(family_spec(name).options());
  return c;
}

const FamilySpec& ModelConfig::spec() const { return family_spec(family); }

void ModelConfig::visit(FieldVisitor& v) {
  v.choice("model", family, family_names(), families_help("sequence mixer:"));
  v.integer("d-model", d_model, {1, 1 << 16}, "model width");
  v.integer("n-layers", n_layers, {1, 1024}, "blocks");
  v.choice("pos", pos, all_positions(),
           "positions: none, sinusoidal, learned (added to the embeddings), rope, alibi (in attention); "
           "each model takes its own");
  v.choice("norm", norm, {"pre", "post"}, "pre: x + f(LN(x)); post: LN(x + f(x)) as the book's block");
  v.choice("mlp", mlp, {"none", "gelu"}, "none or gelu (d_ff = 4 d-model) after each mixer");
  v.boolean("tie-embeddings", tie_embeddings, "use the embedding as the output head");
  v.boolean("rescale-residual", rescale_residual,
            "initialise each residual branch's output projection (out_proj, fc2) divided by "
            "sqrt(branches per block x n-layers), as mamba_ssm and GPT-2 do",
            FieldAge::added_later);
  v.integer("max-seq-len", max_seq_len, {1, int64_t(1) << 24}, "learned positions' table size",
            zero_means("the task's seq-len",
                       [](const FieldLookup& l) { return l.integer("seq-len").value_or(0); }));
  if (mixer) mixer->visit(v);
}

ModelConfig ModelConfig::resolved(const FieldLookup* outer) const {
  ModelConfig c = *this;
  resolve_zeros(c, outer);
  return c;
}

void ModelConfig::validate() const {
  const FamilySpec& f = spec();  // an unknown family first: its options cannot be checked
  if (!mixer || std::type_index(typeid(*mixer)) != f.options_type)
    throw Error("model config: the options are not those of family '" + family +
                "' (set family through ModelConfig::of)");
  check_ranges(*this);
  if (vocab < 1) throw Error("model config: vocab " + std::to_string(vocab) + " must be >= 1");
  if (std::find(f.positions.begin(), f.positions.end(), pos) == f.positions.end())
    throw Error("--pos '" + pos + "' is not allowed for model " + family + " (allowed: " +
                joined(f.positions) + ")");
  if (pos == "learned" && max_seq_len < 1)
    throw Error("--max-seq-len " + std::to_string(max_seq_len) +
                ": learned positions need a table size (allowed: 1..16777216)");
  if (f.validate) f.validate(*this);
}

ModelConfig ModelConfig::checked() const {
  ModelConfig c = resolved();
  c.validate();
  return c;
}

}  // namespace tri
