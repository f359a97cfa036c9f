// trilemma info [--json]: the runtime in full (train and bench print a one-line summary of it)
// on stdout, or the same fields as one JSON object for scripts.
#include <cstdio>
#include <string>

#include "framework/runtime/runtime.hpp"
#include "cli/cli.hpp"
#include "train/run_config.hpp"

namespace tri::cli {

using namespace tri::train;

void info_options(CommandOptions& o) {
  o.named.add_options()("json", po::bool_switch(), "print one JSON object instead of text");
}

namespace {
Json info_json() {
  const RuntimeInfo r = runtime_info();
  const std::string warning = runtime_warning();
  Json info = {{"version", r.version},
               {"build", r.build},
               {"gemm_backend", r.gemm_backend},
               {"openblas_config", r.openblas_version},
               {"openblas_core", r.openblas_core},
               {"openblas_core_generic", r.openblas_core_generic},
               {"openblas_threads", r.openblas_threads},
               {"onednn_version", r.dnnl_version},
               {"onednn_isa", r.dnnl_isa},
               {"threads", r.threads},
               {"physical_cores", r.physical_cores},
               {"logical_cpus", r.logical_cpus},
               {"cpu_model", r.cpu_model},
               {"cpu_features", r.cpu_features},
               {"bf16", r.bf16},
               {"mpi", r.mpi.empty() ? Json() : Json(r.mpi)},
               {"mpi_ranks", r.ranks},
               {"warning", warning.empty() ? Json() : Json(warning)}};
  if (r.mkl_built_in) info["mkl_version"] = r.mkl_version.empty() ? Json() : Json(r.mkl_version);
  return info;
}
}  // namespace

int run_info(const po::variables_map& vm) {
  std::string out = vm["json"].as<bool>() ? info_json().dump() + "\n" : runtime_banner();
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace tri::cli
