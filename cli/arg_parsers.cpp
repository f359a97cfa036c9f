#include "cli/arg_parsers.hpp"

#include "cli/cli.hpp"
#include "models/position_encodings.hpp"

namespace tri::cli {

using namespace tri::train;

sweep::Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  const auto i = parse_integer(text.substr(0, slash)),
             n = slash == std::string::npos ? std::nullopt : parse_integer(text.substr(slash + 1));
  if (!i || !n || *n < 1 || *i < 1 || *i > *n)
    throw UsageError("--shard '" + text + "' (allowed: i/n with 1 <= i <= n, e.g. 2/4)");
  return {*i, *n};
}

TextMap parse_sets(const std::vector<std::string>& sets) {
  TextMap out;
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
      throw UsageError("--set '" + s + "' (allowed: key=value, e.g. --set steps=100)");
    out[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return out;
}

std::vector<int32_t> parse_prompt(const ModelConfig& model, const std::string& text, int64_t max_new) {
  std::vector<int32_t> prompt;
  for (int64_t t : as_usage_error([&] { return parse_int_list("prompt", text, {0, model.vocab - 1}, true); }))
    prompt.push_back(int32_t(t));
  const int64_t positions = int64_t(prompt.size()) + max_new - 1;
  as_usage_error([&] {
    check_position_limit(model, positions, "--prompt of " + std::to_string(prompt.size()) + " tokens with --max-new " +
                                               std::to_string(max_new) + " (" + std::to_string(positions) + " positions)");
  });
  return prompt;
}

}  // namespace tri::cli
