// Typed option fields. A config struct lists its fields once, in visit(): each field's key (its
// CLI name, config-file key and checkpoint attribute), help text, allowed values and "0 means"
// rule sit in that one call, and its default is the member's initial value. Everything that
// handles options is a FieldVisitor over that list: declaring CLI options, reading and writing
// text, writing JSON, resolving the zeros, checking the ranges.
//
//   struct MlpOptions : Options {
//     int64_t width = 0;
//     void visit(FieldVisitor& v) override {
//       v.integer("width", width, {1, 4096}, "hidden width", zero_means("4 * d-model",
//                 [](const FieldLookup& l) { return 4 * l.integer("d-model").value_or(0); }));
//     }
//     ...
//   };
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tri {

// The integer fields visited before the current one, by key: what a "0 means" rule may read.
class FieldLookup {
 public:
  virtual ~FieldLookup() = default;
  virtual std::optional<int64_t> integer(const std::string& key) const = 0;
};

// "0 means <text>": 0 is allowed before resolution, and resolve_zeros() replaces it by
// rule(lookup). A rule that cannot tell (it returns 0) leaves the 0 in place.
struct ZeroRule {
  const char* text = nullptr;
  std::function<int64_t(const FieldLookup&)> rule;
  explicit operator bool() const { return text != nullptr; }
};
inline ZeroRule zero_means(const char* text, std::function<int64_t(const FieldLookup&)> rule) {
  return {text, std::move(rule)};
}

struct IntRange {
  int64_t lo, hi;
};
struct RealRange {
  double lo, hi;
};

// What a field is besides its value. `fixed`: a convention stated in saved configs (e.g.
// rope-style) rather than a choice: its one value is the default, taken when a file predating
// it does not state it, and any other value is refused.
struct FieldSpec {
  std::string key;
  std::string help;
  bool fixed = false;
  bool added_later = false;  // configs written before it existed lack it: `before` applies
  // An added field's value, as text, in the configs written before it existed (and in run ids,
  // which leave it out at that value); empty: its default. Set when the default has changed since.
  std::string before;
};
// Whether a field was in the first config format or came later (see FieldSpec::added_later).
enum class FieldAge { original, added_later };
struct BoolSpec : FieldSpec {};
struct TextSpec : FieldSpec {};  // free text: paths, names
struct IntSpec : FieldSpec {
  IntRange range{0, INT64_MAX};
  ZeroRule zero;
};
struct RealSpec : FieldSpec {
  RealRange range{0, 0};
};
struct ChoiceSpec : FieldSpec {
  std::vector<std::string> allowed;
};
struct IntListSpec : FieldSpec {
  IntRange range{0, INT64_MAX};
  // An optional list: empty (written as nothing) means none, and saved configs that predate
  // the field may lack it.
  bool optional = false;
};

class FieldVisitor {
 public:
  virtual ~FieldVisitor() = default;
  virtual void on(const IntSpec& f, int64_t& v) = 0;
  virtual void on(const RealSpec& f, double& v) = 0;
  virtual void on(const BoolSpec& f, bool& v) = 0;
  virtual void on(const ChoiceSpec& f, std::string& v) = 0;
  virtual void on(const IntListSpec& f, std::vector<int64_t>& v) = 0;
  virtual void on(const TextSpec& f, std::string& v) = 0;

  // The calls a visit() makes.
  void integer(const std::string& key, int64_t& v, IntRange r, const std::string& help, ZeroRule zero = {},
               FieldAge age = FieldAge::original);
  void real(const std::string& key, double& v, RealRange r, const std::string& help,
            FieldAge age = FieldAge::original);
  void boolean(const std::string& key, bool& v, const std::string& help, FieldAge age = FieldAge::original,
               const std::string& before = "");
  void choice(const std::string& key, std::string& v, std::vector<std::string> allowed,
              const std::string& help, FieldAge age = FieldAge::original);
  void int_list(const std::string& key, std::vector<int64_t>& v, IntRange r, const std::string& help);
  void optional_int_list(const std::string& key, std::vector<int64_t>& v, IntRange r, const std::string& help);
  void text(const std::string& key, std::string& v, const std::string& help, FieldAge age = FieldAge::original);
  // A convention stated in saved configs (a ChoiceSpec with fixed set): `only` is its one
  // allowed value, and its default.
  void fixed(const std::string& key, std::string& v, const std::string& only, const std::string& help);
};

// A struct of fields. Family and task options derive from it, so a model or task config can
// hold the options of whichever family or task it names.
class Options {
 public:
  virtual ~Options() = default;
  virtual void visit(FieldVisitor& v) = 0;
  virtual std::unique_ptr<Options> clone() const = 0;
};

// A value-semantic holder of an Options subclass (copies clone).
template <class Base>
class OptionsBox {
 public:
  OptionsBox() = default;
  explicit OptionsBox(std::unique_ptr<Base> p) : p_(std::move(p)) {}
  OptionsBox(const OptionsBox& o) : p_(o.p_ ? clone_of(*o.p_) : nullptr) {}
  OptionsBox& operator=(const OptionsBox& o) {
    if (this != &o) p_ = o.p_ ? clone_of(*o.p_) : nullptr;
    return *this;
  }
  OptionsBox(OptionsBox&&) noexcept = default;
  OptionsBox& operator=(OptionsBox&&) noexcept = default;
  Base* get() const { return p_.get(); }
  Base& operator*() const { return *p_; }
  Base* operator->() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  std::unique_ptr<Base> p_;
  static std::unique_ptr<Base> clone_of(const Base& b) {
    return std::unique_ptr<Base>(static_cast<Base*>(b.clone().release()));
  }
};

// ---- visitors every layer uses ---------------------------------------------------------------

// Every field as text under its key: integers in decimal, reals in the shortest form that
// reads back to the same double, booleans 1 / 0, lists comma-separated.
using TextMap = std::map<std::string, std::string>;
void write_text(const Options& o, TextMap& out);
// Sets each field whose key is in `text` (fields not there keep their value). Malformed text
// throws an Error naming --key, the text and what is expected. With `require_all`, a missing
// key is an error too, except for fixed fields (old files predate them).
void read_text(Options& o, const TextMap& text, bool require_all);
// Replaces each 0 that has a rule by what the rule gives; `outer` supplies integer fields of
// enclosing configs visited before (may be null).
void resolve_zeros(Options& o, const FieldLookup* outer = nullptr);
// Every value within its range or choices; throws an Error naming --key, the value and what
// is allowed.
void check_ranges(const Options& o);
// The keys of every field, in visit order.
std::vector<std::string> field_keys(const Options& o);
// A config that states every original field (`stated`: a saved config.ini, which lists them all)
// reads each added field it does not state at its value from before the field existed
// (FieldSpec::before), as a checkpoint's /config does; a partial one keeps the defaults.
// Returns whether it was complete.
bool read_unstated_as_before(Options& o, const std::function<bool(const std::string&)>& stated);

// The fields marked FieldAge::added_later: each key with its value, as text, in the configs
// written before it existed (FieldSpec::before, else the field's default in `o`).
std::map<std::string, std::string> added_later_fields(const Options& o);

// Shortest decimal text that reads back to exactly v; and parsers that accept exactly what the
// writers write (plus true/false/yes/no/on/off for booleans).
std::string exact_number(double v);
std::optional<int64_t> parse_integer(const std::string& s);
std::optional<double> parse_real(const std::string& s);
std::optional<bool> parse_bool(const std::string& s);
// Comma-separated integers in r ("64,128"); with spaces_too, runs of spaces separate as well.
// A malformed, out-of-range or empty item, or no item at all, throws an Error naming --key.
std::vector<int64_t> parse_int_list(const std::string& key, const std::string& text, IntRange r,
                                    bool spaces_too = false);
std::string int_list_text(const std::vector<int64_t>& v, char separator = ',');
// A list field's text: parse_int_list, or the empty list for blank text when f is optional.
std::vector<int64_t> parse_list_field(const IntListSpec& f, const std::string& text);
// A number as `format` prints it; by default as "%g" does: 0.001, 1e-05, 64.
std::string number_text(double v, const char* format = "%g");
// Every piece of `text` between separators, empty ones included ("a,,b" -> a, "", b).
std::vector<std::string> split(const std::string& text, char separator);
// "a, b, c" (or with another separator).
std::string joined(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace tri
