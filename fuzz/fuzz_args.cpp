// The command-line value parsers on untrusted text: integer lists (--lengths, --sizes,
// --eval-lengths, grid list items), generate's --prompt, sweep's --shard and --set, and the
// scalar parsers every config field goes through. The first byte picks the parser, the rest is
// the text. Besides "no crash, only our errors", each parser's result is checked: within its
// range, and the writers' text of a parsed value parses back to the same value.
#include <cmath>
#include <cstring>

#include "fuzz/fuzz_input.hpp"
#include "cli/arg_parsers.hpp"
#include "models/position_encodings.hpp"

namespace {

[[noreturn]] void finding(const std::string& what, const std::string& text) {
  std::fprintf(stderr, "fuzz_args: %s for input '%s'\n", what.c_str(), text.c_str());
  std::abort();
}

void int_lists(const std::string& text, bool spaces_too) {
  const tri::IntRange range = spaces_too ? tri::IntRange{1, 16384} : tri::IntRange{0, INT64_MAX};
  const std::vector<int64_t> v = tri::parse_int_list("lengths", text, range, spaces_too);
  if (v.empty()) finding("an empty list accepted", text);
  for (int64_t x : v)
    if (x < range.lo || x > range.hi) finding("an item out of range accepted", text);
  if (tri::parse_int_list("lengths", tri::int_list_text(v), range) != v) finding("list text does not read back", text);
}

void prompt(const std::string& text) {
  for (const char* pos : {"learned", "none"}) {
    tri::ModelConfig m = tri::ModelConfig::of("attention");
    m.vocab = 16;
    m.pos = pos;
    m.max_seq_len = 32;
    const std::vector<int32_t> p = tri::cli::parse_prompt(m, text, 4);
    for (int32_t t : p)
      if (t < 0 || t >= m.vocab) finding("a token outside the vocabulary accepted", text);
    if (m.position().table && int64_t(p.size()) + 3 > m.max_seq_len)
      finding("a prompt beyond the positions' table accepted", text);
  }
}

void shard(const std::string& text) {
  const tri::sweep::Shard s = tri::cli::parse_shard(text);
  if (s.count < 1 || s.index < 1 || s.index > s.count) finding("an impossible shard accepted", text);
}

void sets(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    items.push_back(text.substr(start, nl - start));
  items.push_back(text.substr(start));
  for (const auto& [key, value] : tri::cli::parse_sets(items))
    if (key.empty() || value.empty()) finding("an empty key or value accepted", text);
}

void scalars(const std::string& text) {
  if (const auto i = tri::parse_integer(text))
    if (tri::parse_integer(std::to_string(*i)) != i) finding("an integer does not read back", text);
  if (const auto d = tri::parse_real(text)) {
    const auto back = tri::parse_real(tri::exact_number(*d));
    if (!back || (std::memcmp(&*back, &*d, sizeof(double)) != 0 && !(std::isnan(*d) && std::isnan(*back))))
      finding("a real does not read back", text);
  }
  tri::parse_bool(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  tri::fuzz::expect_clean([&] {
    switch (data[0] % 6) {
      case 0: return int_lists(text, false);
      case 1: return int_lists(text, true);
      case 2: return prompt(text);
      case 3: return shard(text);
      case 4: return sets(text);
      default: return scalars(text);
    }
  });
  return 0;
}
