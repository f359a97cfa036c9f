#include "models/config.hpp"

#include <algorithm>
#include <map>
#include <typeindex>
#include <typeinfo>

#include "models/family.hpp"
#include "models/position_encodings.hpp"

namespace tri {

namespace {

// Family names in a mixers list: separated by commas, spaces or '+'.
std::vector<std::string> split_mixers(const std::string& text) {
  std::vector<std::string> out;
  std::string name;
  for (char ch : text + ",") {
    if (ch == ',' || ch == ' ' || ch == '+') {
      if (!name.empty()) out.push_back(name);
      name.clear();
    } else {
      name += ch;
    }
  }
  return out;
}

// Forwards each key the first time it is visited; a key visited again (an option two families
// share) is not a field of its own: it takes the value of its first visit, which readers have
// set by then, so the families agree and writers see the key once.
class SharedKeys : public FieldVisitor {
 public:
  explicit SharedKeys(FieldVisitor& v) : v_(v) {}
  void on(const IntSpec& f, int64_t& v) override { pass(f, v); }
  void on(const RealSpec& f, double& v) override { pass(f, v); }
  void on(const BoolSpec& f, bool& v) override { pass(f, v); }
  void on(const ChoiceSpec& f, std::string& v) override { pass(f, v); }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override { pass(f, v); }
  void on(const TextSpec& f, std::string& v) override { pass(f, v); }

 private:
  FieldVisitor& v_;
  std::map<std::string, std::pair<const std::type_info*, void*>> first_;
  template <class Spec, class T>
  void pass(const Spec& f, T& v) {
    auto it = first_.find(f.key);
    if (it == first_.end()) {
      v_.on(f, v);
      first_.emplace(f.key, std::pair{&typeid(T), static_cast<void*>(&v)});
    } else if (*it->second.first != typeid(T)) {
      throw Error("model config: option --" + f.key + " means different things in two families of --mixers");
    } else {
      v = *static_cast<T*>(it->second.second);
    }
  }
};

}  // namespace

ModelConfig::ModelConfig() : mixer(family_spec(family).options()) {}

ModelConfig ModelConfig::of(const std::string& name) {
  ModelConfig c;
  c.family = name;
  c.mixer = OptionsBox<Options>(family_spec(name).options());
  return c;
}

const FamilySpec& ModelConfig::spec() const { return family_spec(family); }
const PositionSpec& ModelConfig::position() const { return position_spec(pos); }

std::vector<std::string> ModelConfig::layer_families() const {
  return mixers.empty() ? std::vector<std::string>{family} : split_mixers(mixers);
}

std::string ModelConfig::name() const { return hybrid() ? joined(layer_families(), "+") : family; }

std::string ModelConfig::variant() const {
  static const std::vector<std::string> kVariantKeys = {"feature-map", "feature-dim", "short-conv", "conv-size",
                                                       "l2-norm", "state-gate", "output-gate", "delta-form",
                                                       "state-size"};
  TextMap values, defaults;
  std::vector<const Options*> boxes = {mixer.get()};
  for (const OptionsBox<Options>& b : other_mixers) boxes.push_back(b.get());
  for (const Options* box : boxes) {
    if (!box) continue;
    write_text(*box, values);
    for (const FamilySpec* f : families())
      if (std::type_index(typeid(*box)) == f->options_type) write_text(*f->options(), defaults);
  }
  std::string out = name();
  for (const std::string& key : kVariantKeys) {
    auto v = values.find(key), d = defaults.find(key);
    if (v != values.end() && d != defaults.end() && v->second != d->second) out += " " + key + "=" + v->second;
  }
  return out;
}

void ModelConfig::follow_families() {
  const std::vector<std::string> names = split_mixers(mixers);
  if (!names.empty()) family = names.front();
  mixers = joined(names, ",");
  const std::vector<std::string> known = family_names();
  auto is_known = [&](const std::string& f) { return std::find(known.begin(), known.end(), f) != known.end(); };
  // An unknown name keeps what is there: validate() names it.
  auto follow = [&](OptionsBox<Options>& box, const std::string& name) {
    if (!is_known(name)) return;
    const FamilySpec& f = family_spec(name);
    if (!box || std::type_index(typeid(*box)) != f.options_type) box = OptionsBox<Options>(f.options());
  };
  // Without mixers the family's box is ModelConfig::of's business: validate() names a mismatch.
  if (!names.empty()) follow(mixer, family);
  std::vector<std::string> others;
  for (const std::string& n : names)
    if (n != family && is_known(n) && std::find(others.begin(), others.end(), n) == others.end()) others.push_back(n);
  other_mixers.resize(others.size());
  for (size_t i = 0; i < others.size(); ++i) follow(other_mixers[i], others[i]);
}

ModelConfig ModelConfig::layer(int64_t i) const {
  if (mixers.empty()) return *this;
  const std::vector<std::string> names = layer_families();
  ModelConfig c = *this;
  c.family = names[size_t(i) % names.size()];
  c.mixers.clear();
  c.other_mixers.clear();
  if (c.family != family) {
    const std::type_index kind = family_spec(c.family).options_type;
    for (const OptionsBox<Options>& box : other_mixers)
      if (std::type_index(typeid(*box)) == kind) c.mixer = box;
  }
  return c;
}

void ModelConfig::visit(FieldVisitor& v) {
  v.choice("model", family, family_names(), families_help("sequence mixer:"));
  v.text("mixers", mixers,
         "a hybrid stack: the layers' mixers in turn, e.g. mamba,attention (layer i takes entry i mod n, "
         "with that mixer's options; --model is its first); empty = --model in every layer",
         FieldAge::added_later);
  follow_families();
  v.integer("d-model", d_model, {1, 1 << 16}, "model width");
  v.integer("n-layers", n_layers, {1, 1024}, "blocks");
  v.choice("pos", pos, position_names(), positions_help("positions, each model taking those it lists:"));
  v.choice("norm", norm, {"pre", "post"}, "pre: x + f(LN(x)); post: LN(x + f(x)) as the book's block");
  v.choice("mlp", mlp, {"none", "gelu"}, "none or gelu (d_ff = 4 d-model) after each mixer");
  v.boolean("tie-embeddings", tie_embeddings, "use the embedding as the output head");
  v.boolean("rescale-residual", rescale_residual,
            "initialise each residual branch's output projection (out_proj, fc2) divided by "
            "sqrt(branches per block x n-layers), as mamba_ssm and GPT-2 do",
            FieldAge::added_later, "0");
  v.integer("max-seq-len", max_seq_len, {1, int64_t(1) << 24}, "learned positions' table size",
            zero_means("the task's seq-len",
                       [](const FieldLookup& l) { return l.integer("seq-len").value_or(0); }));
  SharedKeys shared(v);
  if (mixer) mixer->visit(shared);
  for (OptionsBox<Options>& box : other_mixers) box->visit(shared);
}

ModelConfig ModelConfig::resolved(const FieldLookup* outer) const {
  ModelConfig c = *this;
  resolve_zeros(c, outer);
  return c;
}

void ModelConfig::validate() const {
  if (hybrid()) return validate_hybrid();
  const FamilySpec& f = spec();  // an unknown family first: its options cannot be checked
  if (!mixer || std::type_index(typeid(*mixer)) != f.options_type)
    throw Error("model config: the options are not those of family '" + family +
                "' (set family through ModelConfig::of)");
  check_ranges(*this);
  if (vocab < 1) throw Error("model config: vocab " + std::to_string(vocab) + " must be >= 1");
  if (std::find(f.positions.begin(), f.positions.end(), pos) == f.positions.end())
    throw Error("--pos '" + pos + "' is not allowed for model " + family + " (allowed: " +
                joined(f.positions) + ")");
  if (position().table && max_seq_len < 1)
    throw Error("--max-seq-len " + std::to_string(max_seq_len) + ": " + pos +
                " positions need a table size (allowed: 1..16777216)");
  if (f.validate) f.validate(*this);
}

void ModelConfig::validate_hybrid() const {
  const std::vector<std::string> names = layer_families();
  for (const std::string& n : names) {
    try {
      family_spec(n);
    } catch (const Error& e) {
      throw Error("--mixers " + mixers + ": " + e.what());
    }
  }
  if (int64_t(names.size()) > n_layers)
    throw Error("--mixers " + mixers + " names " + std::to_string(names.size()) + " layers but --n-layers is " +
                std::to_string(n_layers) + " (allowed: n-layers >= the entries of mixers)");
  if (names.front() != family)
    throw Error("--model " + family + " differs from the first entry of --mixers " + mixers +
                " (allowed: the first entry, or --model left out)");
  for (int64_t i = 0; i < int64_t(names.size()); ++i) {
    try {
      layer(i).validate();
    } catch (const Error& e) {
      throw Error("--mixers " + mixers + ", layer " + std::to_string(i) + " (" + names[size_t(i)] + "): " + e.what());
    }
  }
}

ModelConfig ModelConfig::checked() const {
  ModelConfig c = resolved();
  c.validate();
  return c;
}

}  // namespace tri
