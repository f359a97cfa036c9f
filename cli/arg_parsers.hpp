// Parsers of command-line values that are not config fields (those are parsed by their
// FieldSpec, framework/config/options.hpp): each takes the text as typed and returns it typed, or
// throws a UsageError naming the option, the text and what is allowed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/config/options.hpp"
#include "models/config.hpp"
#include "sweep/runner.hpp"

namespace tri::cli {

// sweep --shard i/n (sweep/runner.hpp).
sweep::Shard parse_shard(const std::string& text);

// sweep --set key=value (repeatable): the grid's overrides.
TextMap parse_sets(const std::vector<std::string>& sets);

// generate --prompt "3 1 4": token ids, each in 0..vocab-1, with room in the learned positions'
// table for --max-new more tokens.
std::vector<int32_t> parse_prompt(const ModelConfig& model, const std::string& text, int64_t max_new);

}  // namespace tri::cli
