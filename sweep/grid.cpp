#include "sweep/grid.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "framework/core/hash.hpp"
#include "train/run_config.hpp"

namespace tri::sweep {

using namespace tri::train;

namespace {

// One `key = a, b` or `(k1, k2) = (a1, a2), (b1, b2)` line: its keys and its alternatives,
// each holding one value per key.
struct Entry {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> alternatives;
  int line = 0;
};

struct Section {
  std::string name;
  std::vector<Entry> entries;
};

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

// Splits on commas outside parentheses.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) out.emplace_back();
    else out.back() += c;
  }
  for (std::string& item : out) item = trim(item);
  return out;
}

bool parenthesised(const std::string& s) { return s.size() >= 2 && s.front() == '(' && s.back() == ')'; }

class GridReader {
 public:
  explicit GridReader(std::string path) : path_(std::move(path)) {}

  std::vector<Section> read() {
    std::ifstream in(path_);
    if (!in) throw Error("grid " + path_ + ": cannot be read (missing or unreadable file)");
    std::vector<Section> sections(1);  // [0]: the shared part
    std::string raw;
    while (std::getline(in, raw)) {
      ++line_;
      const std::string text = trim(raw.substr(0, raw.find('#')));
      if (text.empty()) continue;
      if (text.front() == '[') {
        sections.push_back({section_name(text), {}});
        continue;
      }
      add(sections.back(), entry(text));
    }
    if (in.bad()) throw Error("grid " + path_ + ": read error");
    return sections;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("grid " + path_ + " line " + std::to_string(line_) + ": " + what);
  }

 private:
  std::string path_;
  int line_ = 0;
  std::set<std::string> section_names_;

  std::string section_name(const std::string& text) {
    if (text.back() != ']') fail("'" + text + "' is not a section header (allowed: [name])");
    const std::string name = trim(text.substr(1, text.size() - 2));
    if (name.empty() || name.find_first_of(" \t,=[]()") != std::string::npos)
      fail("section name '" + name + "' (allowed: a non-empty word)");
    if (!section_names_.insert(name).second) fail("section [" + name + "] appears twice");
    return name;
  }

  Entry entry(const std::string& text) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos) fail("'" + text + "' is not `key = value` or a [section]");
    Entry e;
    e.line = line_;
    const std::string lhs = trim(text.substr(0, eq)), rhs = trim(text.substr(eq + 1));
    const bool zipped = parenthesised(lhs);
    e.keys = zipped ? split_top(lhs.substr(1, lhs.size() - 2)) : std::vector<std::string>{lhs};
    for (const std::string& k : e.keys)
      if (k.empty() || k.find_first_of(" \t()") != std::string::npos)
        fail("'" + k + "' is not an option name");
    if (rhs.empty()) fail(lhs + " has no value (an empty list; allowed: one or more values)");
    for (const std::string& alt : split_top(rhs)) {
      if (alt.empty()) fail(lhs + " = " + rhs + ": an empty item in the list");
      if (!zipped) {
        e.alternatives.push_back({alt});
        continue;
      }
      if (!parenthesised(alt)) fail(lhs + ": '" + alt + "' is not a tuple (allowed: (v1, v2, ...))");
      std::vector<std::string> values = split_top(alt.substr(1, alt.size() - 2));
      if (values.size() != e.keys.size())
        fail(lhs + ": '" + alt + "' holds " + std::to_string(values.size()) + " values for " +
             std::to_string(e.keys.size()) + " keys");
      for (const std::string& v : values)
        if (v.empty()) fail(lhs + ": an empty value in '" + alt + "'");
      e.alternatives.push_back(values);
    }
    return e;
  }

  void add(Section& s, Entry e) {
    for (const std::string& k : e.keys) {
      if (is_execution_key(k))
        fail("--" + k + " is set by the sweep (each run's folder, name, threads and progress)");
      for (const Entry& other : s.entries)
        for (const std::string& ok : other.keys)
          if (ok == k) fail(k + " is set twice (lines " + std::to_string(other.line) + " and " + std::to_string(line_) + ")");
    }
    s.entries.push_back(std::move(e));
  }
};

// The shared entries a section does not replace, then the section's own.
std::vector<Entry> merged(const Section& shared, const Section& own, const std::string& path) {
  std::vector<Entry> out;
  for (const Entry& e : shared.entries) {
    size_t replaced = 0;
    for (const std::string& k : e.keys)
      for (const Entry& o : own.entries)
        for (const std::string& ok : o.keys) replaced += ok == k;
    if (replaced == 0) out.push_back(e);
    else if (replaced != e.keys.size())
      throw Error("grid " + path + ": section [" + own.name + "] sets part of the keys that line " +
                  std::to_string(e.line) + " varies together (set them together)");
  }
  out.insert(out.end(), own.entries.begin(), own.entries.end());
  return out;
}

// --set key=value: that key takes the value (or the list of values) in every run.
void apply_overrides(std::vector<Entry>& entries, const TextMap& overrides, const std::string& path) {
  for (const auto& [key, text] : overrides) {
    const std::vector<std::string> values = split_top(text);
    for (const std::string& v : values)
      if (v.empty()) throw Error("--set " + key + "=" + text + ": an empty item in the list");
    bool found = false;
    for (Entry& e : entries)
      for (size_t i = 0; i < e.keys.size(); ++i) {
        if (e.keys[i] != key) continue;
        found = true;
        if (e.keys.size() == 1) {
          e.alternatives.clear();
          for (const std::string& v : values) e.alternatives.push_back({v});
        } else if (values.size() == 1) {
          for (auto& alt : e.alternatives) alt[i] = values[0];
        } else {
          throw Error("--set " + key + "=" + text + ": " + key + " varies together with other keys in " + path +
                      " line " + std::to_string(e.line) + " (allowed: one value)");
        }
      }
    if (!found) {
      Entry e{{key}, {}, 0};
      for (const std::string& v : values) e.alternatives.push_back({v});
      entries.push_back(e);
    }
  }
}

// The list-valued fields of a config, by key.
class ListFields : public FieldVisitor {
 public:
  std::map<std::string, IntListSpec> specs;
  void on(const IntSpec&, int64_t&) override {}
  void on(const RealSpec&, double&) override {}
  void on(const BoolSpec&, bool&) override {}
  void on(const ChoiceSpec&, std::string&) override {}
  void on(const IntListSpec& f, std::vector<int64_t>&) override { specs.emplace(f.key, f); }
  void on(const TextSpec&, std::string&) override {}
};

RunConfig resolved_run(const TextMap& given) {
  const RunConfig defaults;
  auto value_of = [&](const char* key, const std::string& fallback) {
    auto it = given.find(key);
    return it == given.end() ? fallback : it->second;
  };
  RunConfig c = RunConfig::of(value_of("model", defaults.model.family), value_of("task", defaults.task.task));
  // A hybrid's mixers first: its families' options are then the run's own.
  if (const std::string mixers = value_of("mixers", "-"); mixers != "-") read_text(c, {{"mixers", mixers}}, false);
  const std::vector<std::string> own = field_keys(c);
  const std::set<std::string> own_keys(own.begin(), own.end());
  ListFields lists;
  c.visit(lists);
  TextMap text;
  for (const auto& [key, value] : given) {
    if (value == "-") continue;  // left at its default (a tuple entry for a family without it)
    if (!own_keys.count(key)) {
      const std::vector<std::string> owners = owners_of(key);
      if (owners.empty()) throw Error("unknown option '" + key + "' (allowed: see `trilemma train --help`)");
      throw Error("--" + key + " is an option of " + joined(owners) + ", not of model " + c.model.name() +
                  " on task " + c.task.task);
    }
    // A list-valued option's items are separated by spaces in a grid (commas separate runs).
    auto list = lists.specs.find(key);
    text[key] = list == lists.specs.end() ? value
                                          : int_list_text(parse_int_list(key, value, list->second.range, true));
  }
  read_text(c, text, false);
  c.resolve();
  c.validate();
  return c;
}


std::string describe(const TextMap& given) {
  std::string s;
  for (const auto& [k, v] : given) s += (s.empty() ? "" : ", ") + k + "=" + v;
  return s;
}

}  // namespace

bool is_execution_key(const std::string& key) {
  static const std::set<std::string> keys = {"out", "run-name", "threads", "gemm", "progress"};
  return keys.count(key) > 0;
}

std::string run_id(const RunConfig& config) {
  TextMap text;
  write_text(config, text);
  // A field added to the config later is left out while it holds the value runs had before it
  // existed, so the runs of an existing grid keep their ids (and folders) when the config gains
  // a field, and when that field's default changes later.
  RunConfig default_config = RunConfig::of(config.model.family, config.task.task);
  default_config.model.mixers = config.model.mixers;  // the defaults of every family it stacks
  for (const auto& [k, before] : added_later_fields(default_config))
    if (text.at(k) == before) text.erase(k);
  std::string canonical;
  for (const auto& [k, v] : text)
    if (!is_execution_key(k)) canonical += k + "=" + v + "\n";
  char hex[20];
  std::snprintf(hex, sizeof hex, "%012llx", (unsigned long long)(fnv1a(canonical.data(), canonical.size()) >> 16));
  return config.model.name() + "-" + config.task.task + "-" + hex;
}

Grid read_grid(const std::string& path, const TextMap& overrides) {
  for (const auto& [key, value] : overrides)
    if (is_execution_key(key)) throw Error("--set " + key + ": set by the sweep (allowed: the options of a run)");
  GridReader reader(path);
  std::vector<Section> sections = reader.read();
  // Without a setting, a grid would expand to one run of every default: a wrong or empty file.
  if (std::all_of(sections.begin(), sections.end(), [](const Section& s) { return s.entries.empty(); }))
    throw UsageError("grid " + path + ": sets no option (allowed: lines `key = value`, optionally under [section] headers)");
  std::vector<Section> expanded(sections.begin() + (sections.size() > 1 ? 1 : 0), sections.end());
  if (sections.size() == 1) expanded[0].name = "";

  Grid grid;
  std::set<std::string> seen;
  std::vector<std::vector<Entry>> section_entries;
  size_t total = 0;  // the runs before duplicates are merged, checked before any is built
  for (const Section& s : expanded) {
    std::vector<Entry> entries = sections.size() > 1 ? merged(sections[0], s, path) : s.entries;
    apply_overrides(entries, overrides, path);
    size_t runs = 1;
    for (const Entry& e : entries) runs = std::min(runs * e.alternatives.size(), kMaxRuns + 1);
    total = std::min(total + runs, kMaxRuns + 1);
    section_entries.push_back(std::move(entries));
  }
  if (total > kMaxRuns)
    throw Error("grid " + path + ": expands to more than " + std::to_string(kMaxRuns) +
                " runs (allowed: at most " + std::to_string(kMaxRuns) + "; split it into several grids)");
  for (size_t si = 0; si < expanded.size(); ++si) {
    const Section& s = expanded[si];
    grid.sections.push_back(s.name);
    const std::vector<Entry>& entries = section_entries[si];
    const std::string where = "grid " + path + (s.name.empty() ? "" : ", section [" + s.name + "]");
    std::vector<size_t> index(entries.size(), 0);  // odometer over the entries, last fastest
    for (bool more = true; more;) {
      TextMap given;
      for (size_t i = 0; i < entries.size(); ++i)
        for (size_t k = 0; k < entries[i].keys.size(); ++k) given[entries[i].keys[k]] = entries[i].alternatives[index[i]][k];
      RunConfig c;
      try {
        c = resolved_run(given);
      } catch (const Error& e) {
        throw Error(where + ", run (" + describe(given) + "): " + e.what());
      }
      SweepRun run{run_id(c), s.name, c};
      if (seen.insert(run.id).second) grid.runs.push_back(std::move(run));
      else ++grid.duplicates;
      more = false;
      for (size_t i = entries.size(); i-- > 0;) {
        if (++index[i] < entries[i].alternatives.size()) {
          more = true;
          break;
        }
        index[i] = 0;
      }
    }
  }
  if (grid.runs.empty()) throw Error("grid " + path + ": no runs");
  // A key varies when its value differs between the runs that have it (another family's
  // options come with its name, which varies then).
  std::map<std::string, std::set<std::string>> texts;
  for (const SweepRun& r : grid.runs) {
    TextMap text;
    write_text(r.config, text);
    for (const auto& [k, v] : text)
      if (!is_execution_key(k)) texts[k].insert(v);
  }
  for (const auto& [k, vs] : texts)
    if (vs.size() > 1) grid.varying.push_back(k);
  return grid;
}

}  // namespace tri::sweep
