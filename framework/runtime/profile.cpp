#include "framework/runtime/profile.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "framework/runtime/runtime.hpp"

namespace tri {

namespace {
bool g_on = false;
int64_t g_last_ns = 0, g_last_flops = 0;
std::map<std::string, OpTime> g_table;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

OpTime& row(const char* op) {
  OpTime& r = g_table[op];
  if (r.op.empty()) r.op = op;
  return r;
}
}  // namespace

void profile_enable(bool on) {
  g_on = on;
  profile_mark();
}
bool profiling() { return g_on; }

void profile_reset() {
  g_table.clear();
  profile_mark();
}

void profile_mark() {
  g_last_ns = now_ns();
  g_last_flops = flop_count();
}

void profile_forward(const char* op) {
  const int64_t t = now_ns();
  OpTime& r = row(op);
  const int64_t f = flop_count();
  r.forward_ms += 1e-6 * double(t - g_last_ns);
  r.flops += f - g_last_flops;
  ++r.calls;
  g_last_ns = t;
  g_last_flops = f;
}

void profile_backward(const char* op, double ms, int64_t flops) {
  OpTime& r = row(op);
  r.backward_ms += ms;
  r.flops += flops;
}

void profile_phase(const char* name, double ms) {
  OpTime& r = row(name);
  r.forward_ms += ms;
  ++r.calls;
  profile_mark();
}

std::vector<OpTime> profile_table() {
  std::vector<OpTime> rows;
  for (const auto& [name, r] : g_table) rows.push_back(r);
  std::sort(rows.begin(), rows.end(), [](const OpTime& a, const OpTime& b) {
    return a.forward_ms + a.backward_ms > b.forward_ms + b.backward_ms;
  });
  return rows;
}

std::string profile_report(int64_t steps, double peak_gflops) {
  const std::vector<OpTime> rows = profile_table();
  double total = 0;
  for (const OpTime& r : rows) total += r.forward_ms + r.backward_ms;
  const double per = steps > 0 ? 1.0 / double(steps) : 1.0;
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "profile, ms per step over %lld steps (forward: time since the previous op)\n",
                (long long)steps);
  out += line;
  std::snprintf(line, sizeof line, "%-22s %8s %11s %11s %11s %7s %9s%s\n", "op", "calls", "forward", "backward",
                "total", "share", "GFLOP/s", peak_gflops > 0 ? "    peak" : "");
  out += line;
  for (const OpTime& r : rows) {
    const double t = r.forward_ms + r.backward_ms;
    const double gflops = t > 0 ? double(r.flops) * 1e-6 / t : 0;
    char rate[32] = "";
    if (r.flops > 0 && peak_gflops > 0)
      std::snprintf(rate, sizeof rate, " %9.1f %6.0f%%", gflops, 100 * gflops / peak_gflops);
    else if (r.flops > 0)
      std::snprintf(rate, sizeof rate, " %9.1f", gflops);
    std::snprintf(line, sizeof line, "%-22s %8.1f %11.3f %11.3f %11.3f %6.1f%%%s\n", r.op.c_str(),
                  double(r.calls) * per, r.forward_ms * per, r.backward_ms * per, t * per,
                  total > 0 ? 100 * t / total : 0.0, rate);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-22s %8s %11s %11s %11.3f\n", "all", "", "", "", total * per);
  out += line;
  return out;
}

ProfilePhase::ProfilePhase(const char* name) : name_(name), start_ns_(g_on ? now_ns() : 0) {}

ProfilePhase::~ProfilePhase() {
  if (g_on) profile_phase(name_, 1e-6 * double(now_ns() - start_ns_));
}

}  // namespace tri
