// trilemma info [--json]: the runtime banner (what every command prints at start) on stdout,
// or the same fields as one JSON object for scripts.
#include <cstdio>
#include <string>

#include "framework/runtime.hpp"
#include "train/cli.hpp"

namespace tri::cli {

void info_options(CommandOptions& o) {
  o.named.add_options()("json", po::bool_switch(), "print one JSON object instead of text");
}

namespace {
std::string info_json() {
  RuntimeInfo r = runtime_info();
  std::string warning = runtime_warning();
  auto str = [](const char* key, const std::string& v) { return json_quote(key) + ": " + json_quote(v); };
  auto num = [](const char* key, int v) { return json_quote(key) + ": " + std::to_string(v); };
  std::string s = "{";
  s += str("version", r.version) + ", ";
  s += str("gemm_backend", r.gemm_backend) + ", ";
  s += str("openblas_config", r.openblas_version) + ", ";
  s += str("openblas_core", r.openblas_core) + ", ";
  s += json_quote("openblas_core_generic") + ": " + (r.openblas_core_generic ? "true" : "false") + ", ";
  s += num("openblas_threads", r.openblas_threads) + ", ";
  s += str("onednn_version", r.dnnl_version) + ", ";
  s += str("onednn_isa", r.dnnl_isa) + ", ";
  s += num("threads", r.threads) + ", ";
  s += num("physical_cores", r.physical_cores) + ", ";
  s += num("logical_cpus", r.logical_cpus) + ", ";
  s += str("cpu_model", r.cpu_model) + ", ";
  s += str("cpu_features", r.cpu_features) + ", ";
  s += json_quote("warning") + ": " + (warning.empty() ? "null" : json_quote(warning));
  return s + "}\n";
}
}  // namespace

int run_info(const po::variables_map& vm) {
  std::string out = vm["json"].as<bool>() ? info_json() : runtime_banner();
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace tri::cli
