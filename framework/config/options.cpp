#include "framework/config/options.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "framework/base/error.hpp"

namespace tri {

// ---- the calls a visit() makes -------------------------------------------------------------

void FieldVisitor::integer(const std::string& key, int64_t& v, IntRange r, const std::string& help,
                           ZeroRule zero, FieldAge age) {
  IntSpec s;
  s.key = key, s.help = help, s.range = r, s.zero = std::move(zero), s.added_later = age == FieldAge::added_later;
  on(s, v);
}

void FieldVisitor::real(const std::string& key, double& v, RealRange r, const std::string& help, FieldAge age) {
  RealSpec s;
  s.key = key, s.help = help, s.range = r, s.added_later = age == FieldAge::added_later;
  on(s, v);
}

void FieldVisitor::boolean(const std::string& key, bool& v, const std::string& help, FieldAge age,
                           const std::string& before) {
  BoolSpec s;
  s.key = key, s.help = help, s.added_later = age == FieldAge::added_later, s.before = before;
  on(s, v);
}

void FieldVisitor::choice(const std::string& key, std::string& v, std::vector<std::string> allowed,
                          const std::string& help, FieldAge age) {
  ChoiceSpec s;
  s.key = key, s.help = help, s.allowed = std::move(allowed), s.added_later = age == FieldAge::added_later;
  on(s, v);
}

void FieldVisitor::int_list(const std::string& key, std::vector<int64_t>& v, IntRange r,
                            const std::string& help) {
  IntListSpec s;
  s.key = key, s.help = help, s.range = r;
  on(s, v);
}

void FieldVisitor::text(const std::string& key, std::string& v, const std::string& help, FieldAge age) {
  TextSpec s;
  s.key = key, s.help = help, s.added_later = age == FieldAge::added_later;
  on(s, v);
}

void FieldVisitor::optional_int_list(const std::string& key, std::vector<int64_t>& v, IntRange r,
                                     const std::string& help) {
  IntListSpec s;
  s.key = key, s.help = help, s.range = r, s.optional = true;
  on(s, v);
}

void FieldVisitor::fixed(const std::string& key, std::string& v, const std::string& only,
                         const std::string& help) {
  ChoiceSpec s;
  s.key = key, s.help = help, s.fixed = true, s.allowed = {only};
  on(s, v);
}

// ---- text ------------------------------------------------------------------------------------

std::string exact_number(double v) {
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::optional<int64_t> parse_integer(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE) return std::nullopt;
  return v;
}

std::optional<double> parse_real(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(const std::string& s) {
  for (const char* t : {"1", "true", "yes", "on"})
    if (s == t) return true;
  for (const char* f : {"0", "false", "no", "off"})
    if (s == f) return false;
  return std::nullopt;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> pieces;
  size_t pos = 0;
  for (size_t end; (end = text.find(separator, pos)) != std::string::npos; pos = end + 1)
    pieces.push_back(text.substr(pos, end - pos));
  pieces.push_back(text.substr(pos));
  return pieces;
}

namespace {

std::string range_text(IntRange r) { return std::to_string(r.lo) + ".." + std::to_string(r.hi); }


}  // namespace

std::string joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string s;
  for (const std::string& i : items) s.append(s.empty() ? "" : separator).append(i);
  return s;
}

std::vector<int64_t> parse_int_list(const std::string& key, const std::string& text, IntRange r,
                                    bool spaces_too) {
  const std::string allowed = "(allowed: integers " + range_text(r) +
                              (spaces_too ? " separated by spaces or commas)" : ", comma-separated)");
  auto bad = [&](const std::string& item) {
    return Error("--" + key + ": '" + item + "' in '" + text + "' is not allowed " + allowed);
  };
  const std::vector<std::string> fields = split(text, ',');
  std::vector<int64_t> out;
  for (const std::string& field : fields) {
    std::vector<std::string> items;  // runs of spaces are one separator
    for (const std::string& w : spaces_too ? split(field, ' ') : std::vector<std::string>{field})
      if (!w.empty()) items.push_back(w);
    if (items.empty() && fields.size() > 1) throw bad(field);  // "64,,128"
    for (const std::string& item : items) {
      const std::optional<int64_t> v = parse_integer(item);
      if (!v || *v < r.lo || *v > r.hi) throw bad(item);
      out.push_back(*v);
    }
  }
  if (out.empty()) throw Error("--" + key + " '" + text + "' holds no value " + allowed);
  return out;
}

std::vector<int64_t> parse_list_field(const IntListSpec& f, const std::string& text) {
  if (f.optional && text.find_first_not_of(" \t") == std::string::npos) return {};
  return parse_int_list(f.key, text, f.range);
}

std::string int_list_text(const std::vector<int64_t>& v, char separator) {
  std::string s;
  for (int64_t x : v) {
    if (!s.empty()) s += separator;
    s += std::to_string(x);
  }
  return s;
}

namespace {

class TextWriter : public FieldVisitor {
 public:
  explicit TextWriter(TextMap& out) : out_(out) {}
  void on(const IntSpec& f, int64_t& v) override { out_[f.key] = std::to_string(v); }
  void on(const RealSpec& f, double& v) override { out_[f.key] = exact_number(v); }
  void on(const BoolSpec& f, bool& v) override { out_[f.key] = std::string(1, v ? '1' : '0'); }
  void on(const ChoiceSpec& f, std::string& v) override { out_[f.key] = v; }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override { out_[f.key] = int_list_text(v); }
  void on(const TextSpec& f, std::string& v) override { out_[f.key] = v; }

 private:
  TextMap& out_;
};

class TextReader : public FieldVisitor {
 public:
  TextReader(const TextMap& text, bool require_all) : text_(text), require_all_(require_all) {}
  void on(const IntSpec& f, int64_t& v) override {
    if (const std::string* s = find(f)) v = expect(parse_integer(*s), f, *s, "an integer");
  }
  void on(const RealSpec& f, double& v) override {
    if (const std::string* s = find(f)) v = expect(parse_real(*s), f, *s, "a number");
  }
  void on(const BoolSpec& f, bool& v) override {
    if (const std::string* s = find(f))
      v = expect(parse_bool(*s), f, *s, "a boolean (allowed: 1, 0, true, false, yes, no, on, off)");
  }
  void on(const ChoiceSpec& f, std::string& v) override {
    if (const std::string* s = find(f)) v = *s;  // check_ranges names the allowed ones
  }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override {
    if (const std::string* s = find(f, f.optional)) v = parse_list_field(f, *s);
  }
  void on(const TextSpec& f, std::string& v) override {
    if (const std::string* s = find(f)) v = *s;
  }

 private:
  const TextMap& text_;
  bool require_all_;
  const std::string* find(const FieldSpec& f, bool may_be_missing = false) const {
    auto it = text_.find(f.key);
    if (it != text_.end()) return &it->second;
    if (require_all_ && f.added_later && !f.before.empty()) return &f.before;  // a file from before the field
    if (require_all_ && !f.fixed && !f.added_later && !may_be_missing) throw Error("config: missing --" + f.key);
    return nullptr;
  }
  template <class T>
  static T expect(const std::optional<T>& v, const FieldSpec& f, const std::string& s, const char* what) {
    if (!v) throw Error("--" + f.key + " '" + s + "' is not " + what);
    return *v;
  }
};

class ZeroResolver : public FieldVisitor, public FieldLookup {
 public:
  explicit ZeroResolver(const FieldLookup* outer) : outer_(outer) {}
  void on(const IntSpec& f, int64_t& v) override {
    if (v == 0 && f.zero) v = f.zero.rule(*this);
    seen_[f.key] = v;
  }
  void on(const RealSpec&, double&) override {}
  void on(const BoolSpec&, bool&) override {}
  void on(const ChoiceSpec&, std::string&) override {}
  void on(const IntListSpec&, std::vector<int64_t>&) override {}
  void on(const TextSpec&, std::string&) override {}
  std::optional<int64_t> integer(const std::string& key) const override {
    auto it = seen_.find(key);
    if (it != seen_.end()) return it->second;
    return outer_ ? outer_->integer(key) : std::nullopt;
  }

 private:
  const FieldLookup* outer_;
  std::map<std::string, int64_t> seen_;
};

class RangeChecker : public FieldVisitor {
 public:
  void on(const IntSpec& f, int64_t& v) override {
    if (v == 0 && f.zero) return;
    if (v >= f.range.lo && v <= f.range.hi) return;
    std::string allowed = range_text(f.range);
    if (f.zero) allowed.append(", or 0 for ").append(f.zero.text);
    throw Error("--" + f.key + " " + std::to_string(v) + " is out of range (allowed: " + allowed + ")");
  }
  void on(const RealSpec& f, double& v) override {
    if (!(v >= f.range.lo && v <= f.range.hi))
      throw Error("--" + f.key + " " + exact_number(v) + " is out of range (allowed: " +
                  number_text(f.range.lo) + ".." + number_text(f.range.hi) + ")");
  }
  void on(const BoolSpec&, bool&) override {}
  void on(const ChoiceSpec& f, std::string& v) override {
    for (const std::string& a : f.allowed)
      if (v == a) return;
    if (!f.fixed) throw unknown_name("--" + f.key, v, f.allowed);
    throw Error("--" + f.key + " '" + v + "' is not supported (allowed: " + joined(f.allowed, ", ") + ")");
  }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override {
    if (v.empty() && !f.optional)
      throw Error("--" + f.key + " is empty (allowed: integers " + range_text(f.range) + ")");
    for (int64_t x : v)
      if (x < f.range.lo || x > f.range.hi)
        throw Error("--" + f.key + ": " + std::to_string(x) + " is out of range (allowed: " +
                    range_text(f.range) + ")");
  }
  void on(const TextSpec&, std::string&) override {}
};

// Whether every original, non-fixed field is stated, and the `before` text of each added field
// that is not.
class StatedFields : public FieldVisitor {
 public:
  explicit StatedFields(const std::function<bool(const std::string&)>& stated) : stated_(stated) {}
  bool complete = true;
  TextMap before;
  void on(const IntSpec& f, int64_t&) override { check(f); }
  void on(const RealSpec& f, double&) override { check(f); }
  void on(const BoolSpec& f, bool&) override { check(f); }
  void on(const ChoiceSpec& f, std::string&) override { check(f); }
  void on(const IntListSpec& f, std::vector<int64_t>&) override { check(f, f.optional); }
  void on(const TextSpec& f, std::string&) override { check(f); }

 private:
  const std::function<bool(const std::string&)>& stated_;
  void check(const FieldSpec& f, bool may_be_missing = false) {
    if (stated_(f.key)) return;
    if (!f.added_later && !f.fixed && !may_be_missing) complete = false;
    if (f.added_later && !f.before.empty()) before[f.key] = f.before;
  }
};

// Each added field's key and the text of its value before it existed (its `before`, else its
// value in the struct visited: call it on a config at its defaults).
class AddedFields : public FieldVisitor {
 public:
  std::map<std::string, std::string> fields;
  void on(const IntSpec& f, int64_t& v) override { add(f, std::to_string(v)); }
  void on(const RealSpec& f, double& v) override { add(f, exact_number(v)); }
  void on(const BoolSpec& f, bool& v) override { add(f, v ? "1" : "0"); }
  void on(const ChoiceSpec& f, std::string& v) override { add(f, v); }
  void on(const IntListSpec& f, std::vector<int64_t>& v) override { add(f, int_list_text(v)); }
  void on(const TextSpec& f, std::string& v) override { add(f, v); }

 private:
  void add(const FieldSpec& f, const std::string& value) {
    if (f.added_later) fields[f.key] = f.before.empty() ? value : f.before;
  }
};

class KeyLister : public FieldVisitor {
 public:
  KeyLister() = default;
  std::vector<std::string> keys;
  void on(const IntSpec& f, int64_t&) override { add(f); }
  void on(const RealSpec& f, double&) override { add(f); }
  void on(const BoolSpec& f, bool&) override { add(f); }
  void on(const ChoiceSpec& f, std::string&) override { add(f); }
  void on(const IntListSpec& f, std::vector<int64_t>&) override { add(f); }
  void on(const TextSpec& f, std::string&) override { add(f); }

 private:
  void add(const FieldSpec& f) { keys.push_back(f.key); }
};

}  // namespace

// visit() is not const because readers fill the fields; these visitors only read them.
void write_text(const Options& o, TextMap& out) {
  TextWriter w(out);
  const_cast<Options&>(o).visit(w);
}

void read_text(Options& o, const TextMap& text, bool require_all) {
  TextReader r(text, require_all);
  o.visit(r);
}

void resolve_zeros(Options& o, const FieldLookup* outer) {
  ZeroResolver r(outer);
  o.visit(r);
}

void check_ranges(const Options& o) {
  RangeChecker c;
  const_cast<Options&>(o).visit(c);
}

std::vector<std::string> field_keys(const Options& o) {
  KeyLister k;
  const_cast<Options&>(o).visit(k);
  return k.keys;
}

bool read_unstated_as_before(Options& o, const std::function<bool(const std::string&)>& stated) {
  StatedFields fields(stated);
  o.visit(fields);
  if (fields.complete) read_text(o, fields.before, false);
  return fields.complete;
}

std::map<std::string, std::string> added_later_fields(const Options& o) {
  AddedFields a;
  const_cast<Options&>(o).visit(a);
  return a.fields;
}

std::string number_text(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace tri
