// The position encodings --pos names, and the one check of a length against a learned table.
#include "models/position_encodings.hpp"

#include "framework/config/registry.hpp"
#include "models/config.hpp"

namespace tri {

namespace {

PositionSpec none_position() { return {"none", "no position signal: order only through causal mixing"}; }

PositionSpec sinusoidal_position() {
  PositionSpec p{"sinusoidal", "fixed sinusoids added to the embeddings"};
  p.sinusoids = true;
  return p;
}

PositionSpec learned_position() {
  PositionSpec p{"learned", "a learned table of --max-seq-len rows added to the embeddings"};
  p.table = true;
  return p;
}

PositionSpec rope_position() {
  PositionSpec p{"rope", "rotary: queries and keys rotated by position"};
  p.rotary = true;
  return p;
}

PositionSpec alibi_position() {
  PositionSpec p{"alibi", "linear distance biases on the attention scores"};
  p.alibi = true;
  return p;
}

Registry<PositionSpec>& registry() {
  static Registry<PositionSpec> r("--pos", {none_position(), sinusoidal_position(), learned_position(),
                                            rope_position(), alibi_position()});
  return r;
}

}  // namespace

const PositionSpec& position_spec(const std::string& name) { return registry().find(name); }
std::vector<std::string> position_names() { return registry().names(); }
std::string positions_help(const std::string& lead) { return registry().help(lead); }

void check_position_limit(const ModelConfig& m, int64_t positions, const std::string& what) {
  const PositionSpec& p = position_spec(m.pos);
  if (!p.table || positions <= m.max_seq_len) return;
  const std::string limit = std::to_string(m.max_seq_len);
  throw Error(what + " exceeds the " + p.name + " positions (--max-seq-len " + limit + "; allowed: at most " + limit +
              " positions)");
}

}  // namespace tri
