// The trilemma's verdicts through `trilemma report`, on sweep folders written here with chosen
// per-seed values, every outcome reached:
//  - all seeds agree (yes, no); seeds split with the 95% interval on one side (decided) or
//    straddling the threshold (undecided); fewer than 3 seeds (undecided);
//  - seeds that did not learn the nearest needle left out: decided over the rest when at least 2
//    of 3 or more learned, `did not learn` when fewer; a windowed variant whose reach L x (W - 1) is below the farthest needle reads
//    `no (structural)` even with high measured values; matching reads `did not learn` when no
//    needle run learned the nearest distance;
//  - the linear cost's interval from the fitted slope: a noisy fit straddles the threshold
//    (undecided), a clean one is decided;
//  - triangle.json parsed back, equal to the table; the t quantiles against known values;
//  - the best cell chosen on the validation stream, its test-stream values reported;
//  - a probe without runs (a control's MQAR, the distractors) reads `not measured`, and the
//    distractors' columns are left out when no variant has them.
// MQAR's runs here name no K (num-kv-pairs): matching reads their token accuracy. Capacities, over
// runs that do, are test_report_capacity's.
// Every expected number is computed here from the fixture's values (intervals with t quantiles
// from published tables).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/report_md.hpp"
#include "tests/run_files.hpp"
#include "report/verdicts.hpp"

namespace {

using namespace trilemma_test;
using Json = nlohmann::ordered_json;

const int kNearest = 4, kMiddle = 64, kFarthest = 250;
const int kScalingT[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192};  // the fit takes the upper 4
const double kBestLr = 0.003, kWorseLr = 0.03;
const double kWorseBy = 0.2;  // the other learning rate's values are this much lower

// t_{0.975, df} from published tables.
const std::map<int, double> kT975 = {{1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {9, 2.262}, {29, 2.045}};

struct Variant {
  std::string model;
  int window = 0, n_layers = 2;
  std::vector<double> nearest, farthest;  // needle acc@4 and acc@250 per seed (the seed is the index)
  std::vector<double> mqar;               // MQAR token accuracy per seed
  double exponent = 1;                    // ms per step ~ T^exponent ...
  std::vector<double> noise = {};         // ... times these factors over kScalingT (1 when empty)
  std::vector<double> distractors = {};   // acc@250 of the needle with distractors per seed (acc@4: 1)

  std::string label() const { return window ? model + " window=" + std::to_string(window) : model; }
};

std::string q(const fs::path& p) {
  std::string s = "'";  // built up: "'" + a temporary trips GCC 12's -Wrestrict
  s += p.string();
  return s += "'";
}

Json run_row(const Variant& v, const char* task, double lr, int seed, double token_acc, const Json& extra,
             bool distractors = false) {
  Json config = {{"d-model", 32}, {"lr", lr}, {"seed", seed}, {"n-layers", v.n_layers}};
  if (v.window) config["window"] = v.window;
  if (distractors) config["distractors"] = true;
  const std::string id = v.label() + "-" + task + (distractors ? "-distractors" : "") + "-lr" + std::to_string(lr) +
                         "-s" + std::to_string(seed);
  return {{"id", id}, {"section", task}, {"status", "finished"}, {"model", v.model}, {"task", task},
          {"config", config}, {"varying", {"distractors", "lr", "model", "seed", "task", "window"}}, {"chance", 0.01},
          {"final", {{"token_acc", token_acc}, {"seq_acc", 0.0}, {"loss", 1.0}, {"extra", extra}}}};
}

// Each variant's runs at the best learning rate and, lower by kWorseBy, at another (a cell the
// verdicts must not read); its scaling rows (what=model).
fs::path make_sweep(const std::string& name, const std::vector<Variant>& variants) {
  const fs::path dir = scratch(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string results, scaling;
  for (const Variant& v : variants) {
    for (double lr : {kBestLr, kWorseLr}) {
      const double shift = lr == kBestLr ? 0 : kWorseBy;
      for (size_t s = 0; s < v.nearest.size(); ++s) {
        const double near = std::max(0.0, v.nearest[s] - shift), far = std::max(0.0, v.farthest[s] - shift);
        const double middle = (near + far) / 2;
        const Json extra = {{"acc@" + std::to_string(kNearest), near}, {"acc@" + std::to_string(kMiddle), middle},
                            {"acc@" + std::to_string(kFarthest), far}};
        results += run_row(v, "needle", lr, int(s), (near + middle + far) / 3, extra).dump() + "\n";
      }
      for (size_t s = 0; s < v.mqar.size(); ++s)
        results += run_row(v, "mqar", lr, int(s), std::max(0.0, v.mqar[s] - shift), Json::object()).dump() + "\n";
      for (size_t s = 0; s < v.distractors.size(); ++s) {
        const double far = std::max(0.0, v.distractors[s] - shift);
        const Json extra = {{"acc@" + std::to_string(kNearest), 1.0 - shift}, {"acc@" + std::to_string(kFarthest), far}};
        results += run_row(v, "needle", lr, int(s), (1.0 - shift + far) / 2, extra, true).dump() + "\n";
      }
    }
    for (size_t i = 0; i < std::size(kScalingT); ++i) {
      const double t = kScalingT[i], noise = v.noise.empty() ? 1.0 : v.noise[i];
      Json row = {{"model", v.model}, {"what", "model"}, {"seq_len", kScalingT[i]}, {"batch", 4}, {"d_model", 64},
                  {"n_layers", v.n_layers}, {"ms", 1e-3 * std::pow(t, v.exponent) * noise},
                  {"peak_bytes", 100 * std::pow(t, v.exponent)}, {"state_bytes", 1000.0}};
      if (v.window) row["window"] = v.window;
      scaling += row.dump() + "\n";
    }
  }
  write_text(dir / "results.jsonl", results);
  write_text(dir / "scaling.jsonl", scaling);
  return dir;
}

struct Report {
  std::vector<std::vector<std::string>> table;
  Json json;
  const Json& variant(const std::string& label) const {
    for (const Json& v : json["variants"])
      if (v["label"] == label) return v;
    FAIL("no variant " << label << " in triangle.json");
    return json;
  }
};

Report report(const fs::path& dir) {
  const Run r = run("report " + q(dir), "TRILEMMA_GNUPLOT=/nonexistent");
  INFO(r.err);
  REQUIRE(r.code == 0);
  return {markdown_table(read_text(dir / "report.md"), "The trilemma"), Json::parse(read_text(dir / "triangle.json"))};
}

// The seeds' mean ± t_{0.975, n-1} s / sqrt(n).
std::pair<double, double> t_interval(const std::vector<double>& v) {
  double mean = 0, ss = 0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  for (double x : v) ss += (x - mean) * (x - mean);
  const double half = kT975.at(int(v.size()) - 1) * std::sqrt(ss / double(v.size() - 1)) / std::sqrt(double(v.size()));
  return {mean - half, mean + half};
}

// Least squares of log ms on log T over the upper half of kScalingT: the slope ± t_{0.975, m-2} se.
struct SlopeFit {
  double slope, lo, hi;
};
SlopeFit slope_fit(const Variant& v) {
  std::vector<double> x, y;
  for (size_t i = std::size(kScalingT) / 2; i < std::size(kScalingT); ++i) {
    const double t = kScalingT[i], noise = v.noise.empty() ? 1.0 : v.noise[i];
    x.push_back(std::log(t));
    y.push_back(std::log(1e-3 * std::pow(t, v.exponent) * noise));
  }
  const double m = double(x.size());
  double mx = 0, my = 0, sxx = 0, sxy = 0, sse = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i] / m, my += y[i] / m;
  for (size_t i = 0; i < x.size(); ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  const double slope = sxy / sxx;
  for (size_t i = 0; i < x.size(); ++i) sse += std::pow(y[i] - my - slope * (x[i] - mx), 2);
  const double half = kT975.at(int(m) - 2) * std::sqrt(sse / (m - 2) / sxx);
  return {slope, slope - half, slope + half};
}

// A seeded corner in triangle.json: every seed's value in seed order, the counted ones (n), the
// left-out seeds, and the t interval over the counted ones (none below two).
void check_seeds(const Json& corner, const std::vector<double>& values, const std::vector<bool>& counted) {
  REQUIRE(corner["values"].size() == values.size());
  std::vector<double> kept;
  std::vector<int64_t> left_out;
  for (size_t s = 0; s < values.size(); ++s) {
    CHECK(corner["values"][s]["seed"] == int64_t(s));
    CHECK(std::abs(corner["values"][s]["value"].get<double>() - values[s]) < 1e-12);
    if (counted[s]) kept.push_back(values[s]);
    else left_out.push_back(int64_t(s));
  }
  CHECK(corner["n"] == kept.size());
  CHECK(corner["left_out"] == Json(left_out));
  if (kept.size() < 2) {
    CHECK(corner["interval"].is_null());
    return;
  }
  const auto [lo, hi] = t_interval(kept);
  REQUIRE(corner["interval"].is_array());
  CHECK(std::abs(corner["interval"][0].get<double>() - lo) < 1e-3);
  CHECK(std::abs(corner["interval"][1].get<double>() - hi) < 1e-3);
}

std::vector<bool> learned(const Variant& v) {
  std::vector<bool> out;
  for (double a : v.nearest) out.push_back(a >= 0.9);
  return out;
}

// The table's row equals triangle.json's variant, cell by cell.
void check_table_is_json(const Report& r, const std::string& label) {
  CAPTURE(label);
  auto row = row_of(r.table, {label});
  REQUIRE(!row.empty());
  const Json& v = r.variant(label);
  CHECK(row["needle d"] == std::to_string(v["needle_distance"].get<int64_t>()));
  const std::vector<std::pair<const char*, const char*>> seeded = {{"receptive_field", "needle"},
                                                                   {"precise_matching", "MQAR"}};
  for (const auto& [corner_name, column] : seeded) {
    const Json& c = v["corners"][corner_name];
    std::vector<double> values;
    std::vector<bool> counted;
    const auto left_out = c["left_out"].get<std::vector<int64_t>>();
    for (const Json& x : c["values"]) {
      values.push_back(x["value"].get<double>());
      counted.push_back(std::find(left_out.begin(), left_out.end(), x["seed"].get<int64_t>()) == left_out.end());
    }
    CHECK(row[std::string(column) + " acc per seed"] == seed_values_text(values, counted));
    CHECK(row[std::string(column) + " n"] == std::to_string(c["n"].get<int>()));
    CHECK(row[std::string(column) + " 95% interval"] ==
          (c["interval"].is_null() ? "-" : interval_text(c["interval"][0].get<double>(), c["interval"][1].get<double>())));
  }
  const Json& cost = v["corners"]["linear_cost"];
  CHECK(row["time exponent"] == fixed(v["exponents"]["time"].get<double>(), "%.2f"));
  CHECK(row["time exponent 95% interval"] ==
        (cost["interval"].is_null() ? "-" : interval_text(cost["interval"][0].get<double>(), cost["interval"][1].get<double>(), "%.2f")));
  for (const auto& [corner_name, column] : std::vector<std::pair<const char*, const char*>>{
           {"receptive_field", "receptive field"}, {"linear_cost", "linear cost"}, {"precise_matching", "matching"}}) {
    const Json& c = v["corners"][corner_name];
    CHECK(row[column] == c["text"].get<std::string>());
    const std::string word = c["verdict"].get<std::string>();
    CHECK(c["text"].get<std::string>().rfind(word == "no (structural)" ? "no (structural" : word, 0) == 0);
  }
  std::string held;
  for (const Json& h : v["corners_held"]) held += (held.empty() ? "" : " + ") + h.get<std::string>();
  CHECK(row["corners held"] == (held.empty() ? "none" : held));
}

std::string verdict(const Report& r, const std::string& label, const char* corner) {
  return r.variant(label)["corners"][corner]["text"].get<std::string>();
}

}  // namespace

TEST_CASE("Student t quantiles against known values") {
  using tri::report::t_quantile_975;
  for (const auto& [df, t] : kT975) {
    CAPTURE(df);
    CHECK(std::abs(t_quantile_975(df) - t) < 5e-4);
  }
  CHECK(std::abs(t_quantile_975(30) - 2.042) < 5e-4);
  CHECK(std::abs(t_quantile_975(40) - 2.021) < 5e-4);   // beyond the table
  CHECK(std::abs(t_quantile_975(120) - 1.980) < 5e-4);
  CHECK(std::abs(t_quantile_975(100000) - 1.960) < 5e-4);
  for (int df = 1; df < 200; ++df) CHECK(t_quantile_975(df + 1) < t_quantile_975(df));
}

TEST_CASE("triangle verdicts: seeds that agree, split seeds decided by the interval or not, a structural no") {
  const Variant attention{"attention", 0, 2, {1, 1, 1}, {0.99, 0.97, 1.0}, {0.99, 0.98, 1.0}, 2};
  const Variant linear{"linear", 0, 2, {0.95, 0.97, 0.96}, {0.30, 0.25, 0.35}, {0.5, 0.45, 0.55}, 1};
  // Nine seeds reach the farthest needle, one does not; MQAR's three seeds straddle 0.9; the
  // time's noise straddles 1.3.
  Variant mamba{"mamba", 0, 2, std::vector<double>(10, 1.0), std::vector<double>(10, 0.99), {0.95, 0.85, 0.92}, 1.3,
                {1, 1, 1, 1, 1.0, 1.5, 0.8, 1.3}};
  mamba.farthest[4] = 0.85;
  // 2 layers of window 8 reach 2 x 7 = 14 tokens back, not 250: high values notwithstanding.
  const Variant windowed{"attention", 8, 2, {1, 1, 1}, {0.97, 0.95, 0.99}, {0.95, 0.96, 0.97}, 1};
  const Report r = report(make_sweep("verdicts", {attention, linear, mamba, windowed}));
  REQUIRE(r.table.size() == 1 + 4);

  // All seeds on one side.
  check_seeds(r.variant("attention")["corners"]["receptive_field"], attention.farthest, learned(attention));
  check_seeds(r.variant("attention")["corners"]["precise_matching"], attention.mqar, {true, true, true});
  CHECK(verdict(r, "attention", "receptive_field") == "yes");
  CHECK(verdict(r, "attention", "precise_matching") == "yes");
  check_seeds(r.variant("linear")["corners"]["receptive_field"], linear.farthest, learned(linear));
  check_seeds(r.variant("linear")["corners"]["precise_matching"], linear.mqar, {true, true, true});
  CHECK(verdict(r, "linear", "receptive_field") == "no");
  CHECK(verdict(r, "linear", "precise_matching") == "no");

  // Split: the interval over ten seeds lies above 0.9 (decided); over three it straddles.
  const auto [needle_lo, needle_hi] = t_interval(mamba.farthest);
  REQUIRE(*std::min_element(mamba.farthest.begin(), mamba.farthest.end()) < 0.9);
  REQUIRE(needle_lo >= 0.9);
  check_seeds(r.variant("mamba")["corners"]["receptive_field"], mamba.farthest, learned(mamba));
  CHECK(verdict(r, "mamba", "receptive_field") == "yes");
  const auto [mqar_lo, mqar_hi] = t_interval(mamba.mqar);
  REQUIRE(mqar_lo < 0.9);
  REQUIRE(mqar_hi >= 0.9);
  check_seeds(r.variant("mamba")["corners"]["precise_matching"], mamba.mqar, {true, true, true});
  CHECK(verdict(r, "mamba", "precise_matching") == "undecided");

  // The linear cost: a noisy fit's interval straddles 1.3; clean fits are decided either way.
  const SlopeFit noisy = slope_fit(mamba);
  REQUIRE(noisy.lo < 1.3);
  REQUIRE(noisy.hi > 1.3);
  const Json& cost = r.variant("mamba")["corners"]["linear_cost"];
  CHECK(std::abs(cost["value"].get<double>() - noisy.slope) < 1e-9);
  CHECK(std::abs(cost["interval"][0].get<double>() - noisy.lo) < 1e-3);
  CHECK(std::abs(cost["interval"][1].get<double>() - noisy.hi) < 1e-3);
  CHECK(cost["n"] == 4);
  CHECK(verdict(r, "mamba", "linear_cost") == "undecided");
  for (const Variant* clean : {&attention, &linear}) {
    const SlopeFit f = slope_fit(*clean);
    const Json& c = r.variant(clean->label())["corners"]["linear_cost"];
    CHECK(std::abs(c["interval"][0].get<double>() - f.lo) < 1e-9);
    CHECK(std::abs(c["interval"][1].get<double>() - f.hi) < 1e-9);
    CHECK(c["verdict"] == (f.lo > 1.3 ? "no" : "yes"));
  }
  CHECK(verdict(r, "attention", "linear_cost") == "no");
  CHECK(verdict(r, "linear", "linear_cost") == "yes");

  // The structural no, its measured values still listed.
  const Json& w = r.variant("attention window=8");
  CHECK(w["window"] == 8);
  CHECK(w["model"] == "attention");
  REQUIRE(*std::min_element(windowed.farthest.begin(), windowed.farthest.end()) >= 0.9);
  check_seeds(w["corners"]["receptive_field"], windowed.farthest, learned(windowed));
  const int reach = windowed.n_layers * (windowed.window - 1);
  REQUIRE(reach < kFarthest);
  CHECK(w["corners"]["receptive_field"]["verdict"] == "no (structural)");
  CHECK(verdict(r, "attention window=8", "receptive_field") ==
        "no (structural: reach 2 x (8 - 1) = " + std::to_string(reach) + " < 250)");
  CHECK(verdict(r, "attention window=8", "precise_matching") == "yes");
  CHECK(verdict(r, "attention window=8", "linear_cost") == "yes");

  CHECK(r.variant("attention")["corners_held"] == Json::array({"receptive field", "matching"}));
  CHECK(r.variant("linear")["corners_held"] == Json::array({"linear cost"}));
  CHECK(r.variant("mamba")["corners_held"] == Json::array({"receptive field"}));
  CHECK(w["corners_held"] == Json::array({"linear cost", "matching"}));
  for (const Variant* v : std::vector<const Variant*>{&attention, &linear, &mamba, &windowed}) {
    const Json& j = r.variant(v->label());
    CHECK(j["needle_distance"] == kFarthest);
    CHECK(j["nearest_needle_distance"] == kNearest);
    CHECK(j["n_layers"] == v->n_layers);
    CHECK(j["corners"]["receptive_field"]["threshold"] == 0.9);
    CHECK(j["corners"]["precise_matching"]["threshold"] == 0.9);
    CHECK(j["corners"]["linear_cost"]["threshold"] == 1.3);
    check_table_is_json(r, v->label());
  }
}

TEST_CASE("triangle verdicts: fewer than 3 seeds, seeds that did not learn, matching without the needle") {
  const Variant two_seeds{"attention", 0, 2, {1, 1}, {0.99, 0.98}, {0.99, 0.97}, 2};
  // Seed 1 never learned the nearest needle: left out, the other three decide.
  const Variant one_left_out{"linear", 0, 2, {1, 0.5, 1, 1}, {0.95, 0.1, 0.96, 0.97}, {0.3, 0.2, 0.25, 0.35}, 1};
  // Two of three did not learn: nothing to say about the reach.
  const Variant two_left_out{"mamba", 0, 2, {0.95, 0.5, 0.6}, {0.92, 0.1, 0.2}, {0.95, 0.96, 0.97}, 1};
  // One of three did not learn: the two that did decide (2 layers of window 200 reach 398 >= 250).
  const Variant two_learned{"linear", 200, 2, {1, 0.5, 1}, {0.95, 0.1, 0.97}, {0.3, 0.2, 0.25}, 1};
  // 8 layers of window 64 reach 504 >= 250 (no structural no), but no needle run learned d=4:
  // high MQAR values say nothing.
  const Variant never_learned{"attention", 64, 8, {0.3, 0.4, 0.2}, {0.02, 0.03, 0.01}, {0.95, 0.97, 0.99}, 1};
  const Report r = report(make_sweep("verdicts_few", {two_seeds, one_left_out, two_left_out, never_learned, two_learned}));
  REQUIRE(r.table.size() == 1 + 5);

  check_seeds(r.variant("attention")["corners"]["receptive_field"], two_seeds.farthest, learned(two_seeds));
  check_seeds(r.variant("attention")["corners"]["precise_matching"], two_seeds.mqar, {true, true});
  CHECK(verdict(r, "attention", "receptive_field") == "undecided (n < 3)");
  CHECK(verdict(r, "attention", "precise_matching") == "undecided (n < 3)");
  CHECK(r.variant("attention")["corners"]["receptive_field"]["verdict"] == "undecided");

  check_seeds(r.variant("linear")["corners"]["receptive_field"], one_left_out.farthest, learned(one_left_out));
  CHECK(r.variant("linear")["corners"]["receptive_field"]["left_out"] == Json::array({1}));
  CHECK(verdict(r, "linear", "receptive_field") == "yes (1 of 4 seeds below 0.9 at d=4, left out)");
  CHECK(verdict(r, "linear", "precise_matching") == "no");

  check_seeds(r.variant("mamba")["corners"]["receptive_field"], two_left_out.farthest, learned(two_left_out));
  CHECK(r.variant("mamba")["corners"]["receptive_field"]["verdict"] == "did not learn");
  CHECK(verdict(r, "mamba", "receptive_field") == "did not learn (2 of 3 seeds below 0.9 at d=4)");
  CHECK(verdict(r, "mamba", "precise_matching") == "yes");  // one seed learned the nearest needle

  const std::string label = never_learned.label();
  REQUIRE(never_learned.n_layers * (never_learned.window - 1) >= kFarthest);
  REQUIRE(*std::max_element(never_learned.nearest.begin(), never_learned.nearest.end()) < 0.9);
  REQUIRE(*std::min_element(never_learned.mqar.begin(), never_learned.mqar.end()) >= 0.9);
  CHECK(verdict(r, label, "receptive_field") == "did not learn (3 of 3 seeds below 0.9 at d=4)");
  check_seeds(r.variant(label)["corners"]["precise_matching"], never_learned.mqar, {true, true, true});
  CHECK(r.variant(label)["corners"]["precise_matching"]["verdict"] == "did not learn");
  CHECK(verdict(r, label, "precise_matching") == "did not learn (no needle run reached 0.9 at d=4)");
  CHECK(r.variant(label)["corners_held"] == Json::array({"linear cost"}));

  check_seeds(r.variant("linear window=200")["corners"]["receptive_field"], two_learned.farthest, learned(two_learned));
  CHECK(verdict(r, "linear window=200", "receptive_field") == "yes (1 of 3 seeds below 0.9 at d=4, left out)");

  for (const Variant* v : {&two_seeds, &one_left_out, &two_left_out, &never_learned, &two_learned})
    check_table_is_json(r, v->label());
}

TEST_CASE("triangle verdicts: a probe without runs is not measured, whatever else the variant shows") {
  // A windowed control trained on the needle only: its structural no stands, its matching was
  // not measured (never `undecided`, which would say the seeds disagreed).
  const Variant needle_only{"attention", 8, 2, {1, 1, 1}, {0.01, 0.02, 0.0}, {}, 1};
  const Variant full{"attention", 0, 2, {1, 1, 1}, {1, 1, 1}, {0.99, 0.98, 1.0}, 2};  // the sweep's MQAR runs
  const Report r = report(make_sweep("not_measured", {full, needle_only}));
  const std::string label = needle_only.label();
  CHECK(r.variant(label)["corners"]["receptive_field"]["verdict"] == "no (structural)");
  CHECK(r.variant(label)["corners"]["precise_matching"]["verdict"] == "not measured");
  CHECK(verdict(r, label, "precise_matching") == "not measured");
  CHECK(r.variant(label)["corners"]["precise_matching"]["n"] == 0);
  CHECK(r.variant(label)["controls"]["needle_distractors"]["verdict"] == "not measured");
  CHECK(row_of(r.table, {label}).at("matching") == "not measured");
  CHECK(r.variant(label)["corners_held"] == Json::array({"linear cost"}));
}

TEST_CASE("the best cell is chosen on the validation stream and reported on the test stream") {
  // The other learning rate's test accuracies are lower by kWorseBy, but its validation
  // accuracies are the higher ones: the verdicts and the best-lr table must read that cell.
  const Variant v{"attention", 0, 2, {1.0, 1.0, 1.0}, {0.95, 0.96, 0.97}, {0.98, 0.99, 0.97}, 2.0};
  const fs::path dir = make_sweep("choice", {v});
  std::string rows;
  for (const std::string& line : text_lines(read_text(dir / "results.jsonl"))) {
    Json r = Json::parse(line);
    r["valid"] = {{"token_acc", r["config"]["lr"] == kWorseLr ? 0.99 : 0.5}};
    rows += r.dump() + "\n";
  }
  write_text(dir / "results.jsonl", rows);
  const Report rep = report(dir);
  std::vector<double> mqar;
  for (double a : v.mqar) mqar.push_back(a - kWorseBy);
  check_seeds(rep.variant("attention")["corners"]["precise_matching"], mqar, {true, true, true});
  CHECK(rep.variant("attention")["corners"]["precise_matching"]["verdict"] == "no");  // 0.78-0.79: the test stream's
  const auto best = markdown_table(read_text(dir / "report.md"), "Best learning rate per model and size");
  CHECK(row_of(best, {"mqar", "attention"})["best lr"] == "0.03");
}

TEST_CASE("the needle with distractors: its own verdict, never mixed into the receptive field") {
  // Reach without matching: the plain needle is held at 250, the one with distractors is not
  // (a linear-attention-like variant); a variant with a high distractor score shows it held.
  Variant reach{"linear", 0, 2, {1.0, 1.0, 1.0}, {0.99, 0.98, 1.0}, {0.3, 0.3, 0.3}, 1.0};
  reach.distractors = {0.02, 0.05, 0.01};
  Variant both{"attention", 0, 2, {1.0, 1.0, 1.0}, {1.0, 1.0, 1.0}, {0.99, 1.0, 0.98}, 2.0};
  both.distractors = {0.97, 0.99, 0.98};
  const Report rep = report(make_sweep("distractors", {reach, both}));
  const Json& r = rep.variant("linear");
  check_seeds(r["corners"]["receptive_field"], reach.farthest, {true, true, true});
  CHECK(r["corners"]["receptive_field"]["verdict"] == "yes");
  check_seeds(r["controls"]["needle_distractors"], reach.distractors, {true, true, true});
  CHECK(r["controls"]["needle_distractors"]["verdict"] == "no");
  CHECK(rep.variant("attention")["controls"]["needle_distractors"]["verdict"] == "yes");
  // A variant without the needle with distractors has the control not measured.
  const Report plain = report(make_sweep("distractors_none", {Variant{"mamba", 0, 2, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1}}));
  CHECK(plain.variant("mamba")["controls"]["needle_distractors"]["verdict"] == "not measured");
  CHECK(row_of(plain.table, {"mamba"}).count("needle+distractors") == 0);  // no variant has it: no column
  const auto row = row_of(rep.table, {"linear"});
  CHECK(row.at("needle+distractors") == "no");
  CHECK(row.at("needle+distractors acc per seed") == "0.020, 0.050, 0.010");
  CHECK(row.at("receptive field") == "yes");
}
