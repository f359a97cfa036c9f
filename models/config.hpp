// Model configuration: the fields every family shares, and the options of the family that
// `family` names (registered in models/family.hpp, held in `mixer`). Fields are listed once, in
// visit(), with their key (the CLI name, checkpoint /config attribute), help, range and "0
// means" rule; the defaults are the initialisers below. validate() throws a one-line Error
// naming --key, the value and what is allowed.
#pragma once
#include <cstdint>
#include <string>

#include "framework/config/options.hpp"
#include "framework/core/tensor.hpp"

namespace tri {

struct FamilySpec;
struct PositionSpec;

struct ModelConfig : Options {
  std::string family = "attention";  // a registered family: attention | linear | mamba | ...
  int64_t vocab = 16;                // from the task (not an option of its own)
  int64_t d_model = 64;
  int64_t n_layers = 2;
  std::string pos = "none";          // a registered encoding the family lists: none | rope | ...
  std::string norm = "pre";          // pre: X + f(LN(X)); post: LN(X + f(X)) as the book's block
  std::string mlp = "gelu";          // none | gelu (d_ff = 4 d_model)
  // The calibrated recipe's defaults (docs/CALIBRATION.md): tied embeddings and rescaled residual
  // projections; configs written before rescale-residual existed mean 0 (FieldSpec::before).
  bool tie_embeddings = true;
  // Each residual branch's output projection (a mixer's out_proj, the MLP's fc2) initialised
  // divided by sqrt(branches per block x n_layers): mamba_ssm's rescale_prenorm_residual, GPT-2's
  // scheme, which keeps the residual stream's variance from growing with depth.
  bool rescale_residual = true;
  int64_t max_seq_len = 0;           // learned positions' table size; 0: the task's seq-len
  // A hybrid stack: the layers' families in turn, "mamba,attention" (layer i takes entry i mod n,
  // with its family's options); empty: every layer is `family`. Its first entry is the family
  // (the final norm's, the run's name). Written with commas; spaces and '+' also separate.
  std::string mixers;
  OptionsBox<Options> mixer;         // the family's own options (FamilySpec::options)
  // The options of the other families `mixers` names, in order of first appearance. An option
  // key two families share (n-heads, bias) has one value, which both take.
  std::vector<OptionsBox<Options>> other_mixers;

  ModelConfig();  // attention with every default
  // `family` with every default (its options included); an Error names the known families.
  static ModelConfig of(const std::string& family);

  const FamilySpec& spec() const;
  const PositionSpec& position() const;  // the entry of `pos` (models/position_encodings.hpp)
  // The family of each entry of `mixers` ({family} when it is empty).
  std::vector<std::string> layer_families() const;
  bool hybrid() const { return !mixers.empty(); }
  // The family, or a hybrid's families joined by '+' ("mamba+attention"): for names and screens.
  std::string name() const;
  // The architecture as reports tell variants apart: name(), then each option that makes a
  // variant of a family (feature-map, feature-dim, short-conv; DeltaNet's conv-size, l2-norm,
  // state-gate, output-gate, delta-form; Mamba 2's state-size) where it is not its default, e.g.
  // "linear feature-map=taylor feature-dim=16 short-conv=3". Not the window: reports read it
  // apart, with its reach.
  std::string variant() const;
  // Layer i's config: its family with that family's options, the shared fields as here.
  ModelConfig layer(int64_t i) const;
  // The family's options as T (T may be a base of them); an Error when they are not.
  template <class T>
  T& options() {
    return cast<T>(mixer.get());
  }
  template <class T>
  const T& options() const {
    return cast<T>(mixer.get());
  }

  void visit(FieldVisitor& v) override;  // the shared fields, then the family's
  std::unique_ptr<Options> clone() const override { return std::make_unique<ModelConfig>(*this); }

  // This config with its zeros resolved (max-seq-len needs `outer` to know seq-len).
  ModelConfig resolved(const FieldLookup* outer = nullptr) const;
  // Ranges and choices, then the checks across fields (the family's own among them).
  void validate() const;
  // resolved() and validate(): what mixers and models are built from.
  ModelConfig checked() const;

 private:
  // With `mixers` set, makes the option boxes follow it (family := its first entry): a box of
  // another family's kind is replaced by the defaults of the right one. Run inside visit(), so a
  // reader that sets mixers gets the options of the families it named.
  void follow_families();
  void validate_hybrid() const;  // each layer's config, and the list against n-layers
  template <class T>
  T& cast(Options* o) const {
    T* t = dynamic_cast<T*>(o);
    if (!t)
      throw Error("model config: the options of family '" + family +
                  "' are not of the kind asked for (another family's mixer, or a family set without "
                  "ModelConfig::of)");
    return *t;
  }
};

}  // namespace tri
