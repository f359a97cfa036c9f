// Parsers of command-line values that are not config fields (those are parsed by their
// FieldSpec, framework/options.hpp): each takes the text as typed and returns it typed, or
// throws a UsageError naming the option, the text and what is allowed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/options.hpp"
#include "models/config.hpp"

namespace tri::cli {

// sweep --shard i/n: this process runs the grid's runs i-1, i-1+n, i-1+2n, ...
struct Shard {
  int64_t index = 1, count = 1;
  bool takes(size_t position) const { return int64_t(position % size_t(count)) == index - 1; }
};
Shard parse_shard(const std::string& text);

// sweep --set key=value (repeatable): the grid's overrides.
TextMap parse_sets(const std::vector<std::string>& sets);

// generate --prompt "3 1 4": token ids, each in 0..vocab-1, with room in the learned positions'
// table for --max-new more tokens.
std::vector<int32_t> parse_prompt(const ModelConfig& model, const std::string& text, int64_t max_new);

// The positions a decoding consumes must exist in the learned positions' table (no limit for
// other position encodings); `what` names the request in the error.
void check_positions(const ModelConfig& model, int64_t consumed, const std::string& what);

}  // namespace tri::cli
