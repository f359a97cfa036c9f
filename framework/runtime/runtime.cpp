#include "framework/runtime/runtime.hpp"
#include "framework/system/distributed.hpp"
#include "framework/runtime/gemm_amx.hpp"
#include "framework/runtime/gemm_bf16.hpp"
#include "framework/runtime/gemm_mkl.hpp"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "framework/base/error.hpp"
#include "framework/simd/tile_kernels.hpp"

extern "C" {
char* openblas_get_corename(void);
char* openblas_get_config(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int);
}

#ifndef TRILEMMA_VERSION
#define TRILEMMA_VERSION "0.0.0"
#endif
#ifndef TRILEMMA_BUILD
#define TRILEMMA_BUILD "unknown"
#endif

namespace tri {

namespace {
GemmBackend g_backend = GemmBackend::dnnl;
int g_threads = 0;
bool g_banner_warned = false;
std::atomic<int64_t> g_flops{0};  // the banner already showed the slow-kernel warning

// OpenBLAS names its pre-AVX kernels after old cores; on a modern CPU they mean it fell back.
bool is_generic_core(const std::string& core) {
  static const std::set<std::string> generic = {
      "prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai", "coppermine",
      "northwood", "banias", "athlon", "opteron", "opteron_sse3", "barcelona", "bobcat",
      "generic", "unknown"};
  std::string c;
  for (char ch : core) c += char(std::tolower(static_cast<unsigned char>(ch)));
  return generic.count(c) > 0;
}

std::string isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse4.1";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "other (" + std::to_string(int(isa)) + ")";
  }
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string cpu_vector_features() {
  std::string out;
  auto add = [&](const char* name, bool has) {
    if (has) out += std::string(out.empty() ? "" : " ") + name;
  };
  __builtin_cpu_init();
  add("sse4.2", __builtin_cpu_supports("sse4.2"));
  add("avx", __builtin_cpu_supports("avx"));
  add("avx2", __builtin_cpu_supports("avx2"));
  add("fma", __builtin_cpu_supports("fma"));
  add("avx512f", __builtin_cpu_supports("avx512f"));
  add("avx512bw", __builtin_cpu_supports("avx512bw"));
  add("avx512vl", __builtin_cpu_supports("avx512vl"));
  add("avx512bf16", __builtin_cpu_supports("avx512bf16"));
#ifdef __AVX512F__
  out += " (built for avx512f)";
#elif defined(__AVX2__)
  out += " (built for avx2)";
#endif
  return out;
}
}  // namespace

int physical_cores() {
  std::set<std::pair<std::string, std::string>> cores;
  for (unsigned cpu = 0; cpu < 4096; ++cpu) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    if (!pkg || !core) break;
    std::string p, c;
    pkg >> p;
    core >> c;
    cores.insert({p, c});
  }
  if (!cores.empty()) return int(cores.size());
  unsigned n = std::thread::hardware_concurrency();
  return n ? int(n) : 1;
}

void set_threads(int n) {
  if (n <= 0) n = physical_cores();
  g_threads = n;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  mkl::set_threads(n);
}

int num_threads() {
  if (g_threads == 0) set_threads(0);
  return g_threads;
}

void set_gemm_backend(const std::string& name) {
  if (name == "auto" || name == "dnnl") {
    g_backend = GemmBackend::dnnl;
  } else if (name == "openblas") {
    g_backend = GemmBackend::openblas;
  } else if (name == "mkl") {
    mkl::load();  // fails here, with the reason, rather than at the first GEMM
    g_backend = GemmBackend::mkl;
  } else {
    throw unknown_name("--gemm", name, gemm_backend_names());
  }
}

std::vector<std::string> gemm_backend_names() {
  std::vector<std::string> names = {"auto", "dnnl", "openblas"};
  if (mkl::built_in()) names.push_back("mkl");
  return names;
}

std::string gemm_backend_names(const std::string& sep) {
  std::string joined;
  for (const std::string& b : gemm_backend_names()) joined += (joined.empty() ? "" : sep) + b;
  return joined;
}

std::string gemm_backend_name(GemmBackend be) {
  switch (be) {
    case GemmBackend::dnnl: return "dnnl";
    case GemmBackend::openblas: return "openblas";
    case GemmBackend::mkl: return "mkl";
  }
  return "unknown";
}

GemmBackend gemm_backend() { return g_backend; }

int64_t flop_count() { return g_flops.load(std::memory_order_relaxed); }
void add_flops(int64_t n) { g_flops.fetch_add(n, std::memory_order_relaxed); }

namespace {
// oneDNN 2.6's sgemm runs op(B) = B^T below its usual speed once k >= 512 (x W^T with
// in_features 512..2048: 250-285 GFLOP/s against 320-330 for B itself, measured on this
// project's reference machine, AVX-512, 2 threads), and no slower below that. So B^T is copied
// first there (about 1% of such a GEMM). The rule depends on the shape only: results stay
// deterministic.
constexpr int64_t kTransposeMinK = 512;

// dst [cols][rows] = src [rows][cols] (row stride ld)^T, by 16 x 16 blocks.
void transpose_into(const float* src, int64_t rows, int64_t cols, int64_t ld, float* dst) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
#ifdef __AVX512F__
      if (r0 + 16 <= rows && c0 + 16 <= cols) {
        tile_kernels::transpose16(src + r0 * ld + c0, ld, dst + c0 * rows + r0, rows);
        continue;
      }
#endif
      for (int64_t r = r0; r < std::min(rows, r0 + 16); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + 16); ++c) dst[c * rows + r] = src[r * ld + c];
    }
}


// oneDNN's sgemm, with the shape rule above.
void dnnl_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
               int64_t ldc) {
  thread_local std::vector<float> bt;
  if (trans_b && k >= kTransposeMinK) {
    bt.resize(size_t(k * n));
    transpose_into(b, n, k, ldb, bt.data());
    b = bt.data();
    ldb = n;
    trans_b = false;
  }
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda,
                                b, ldb, beta, c, ldc);
  if (st != dnnl_success)
    throw Error("sgemm: oneDNN failed with status " + std::to_string(int(st)) + " for m=" +
                std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
}
}  // namespace

void sgemm_on(GemmBackend be, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  add_flops(2 * m * n * k);
  if (be == GemmBackend::dnnl) {
    dnnl_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if (be == GemmBackend::mkl) {
    mkl::sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    // The first OpenBLAS call says so if its kernel is slow (a thread-safe one-time check).
    static const bool checked = [] {
      std::string w = runtime_warning();
      if (!w.empty() && !g_banner_warned) std::fprintf(stderr, "warning: %s\n", w.c_str());
      return true;
    }();
    (void)checked;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha, a, int(lda),
                b, int(ldb), beta, c, int(ldc));
  }
}

namespace {
std::atomic<Precision> g_precision{Precision::fp32};
}

Precision precision_of(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  throw UsageError("--precision '" + name + "' is unknown (allowed: fp32, bf16)");
}

std::string precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

void set_gemm_precision(Precision p) {
  if (p == Precision::bf16) {
    const std::string missing = bf16_unavailable_reason();
    if (!missing.empty())
      throw UsageError("--precision bf16 needs a CPU with native bf16, and this one lacks " + missing +
                       " (allowed: fp32)");
  }
  g_precision.store(p);
}

Precision gemm_precision() { return g_precision.load(); }

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc) {
  if (g_precision.load(std::memory_order_relaxed) == Precision::bf16 && m > 0 && n > 0) {
    if (alpha != 1.f) throw Error("bf16 GEMM: alpha " + std::to_string(alpha) + " (allowed: 1)");
    add_flops(2 * m * n * k);
    if (k == 0) {  // nothing to sum: C = beta C, as sgemm leaves it
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
      return;
    }
    gemm_bf16(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  sgemm_on(g_backend, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemm_add(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, const float* bias, const float* residual, float* c) {
  const bool fused = (bias || residual) && m > 0 && n > 0 && k > 0 &&
                     g_precision.load(std::memory_order_relaxed) == Precision::bf16 && amx_usable();
  if (fused) {
    add_flops(2 * m * n * k);
    gemm_amx(false, trans_b, m, n, k, a, lda, b, ldb, 0.f, c, n, GemmAdd{bias, residual});
    return;
  }
  float beta = 0.f;
  if (bias) {
#pragma omp parallel for schedule(static) if (m * n > 65536)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) c[r * n + j] = bias[j];
    beta = 1.f;
  }
  sgemm(false, trans_b, m, n, k, 1.f, a, lda, b, ldb, beta, c, n);
  if (residual) {  // residual + y, as add(residual, y) computes it
    const int64_t count = m * n;
#pragma omp parallel for simd schedule(static) if (count > 65536)
    for (int64_t i = 0; i < count; ++i) c[i] = residual[i] + c[i];
  }
}

RuntimeInfo runtime_info() {
  RuntimeInfo r;
  r.version = TRILEMMA_VERSION;
  r.build = TRILEMMA_BUILD;
  r.gemm_backend = gemm_backend_name(g_backend);
  r.openblas_version = openblas_get_config();
  r.openblas_core = openblas_get_corename();
  r.openblas_core_generic = is_generic_core(r.openblas_core);
  r.openblas_threads = openblas_get_num_threads();
  const dnnl_version_t* v = dnnl_version();
  r.dnnl_version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                   std::to_string(v->patch);
  r.dnnl_isa = isa_name(dnnl_get_effective_cpu_isa());
  r.mkl_built_in = mkl::built_in();
  r.mkl_version = mkl::version();
  r.threads = num_threads();
  r.physical_cores = physical_cores();
  unsigned hc = std::thread::hardware_concurrency();
  r.logical_cpus = hc ? int(hc) : 1;
  r.cpu_model = cpu_model_name();
  r.cpu_features = cpu_vector_features();
  const std::string missing = bf16_unavailable_reason();
  r.bf16 = missing.empty() ? "native (" + bf16_features() + "; kernel: " + bf16_kernel() + ")"
                           : "not available (lacks " + missing + ")";
  r.mpi = dist::mpi_library();
  r.ranks = dist::size();
  return r;
}

std::string runtime_warning() {
  RuntimeInfo r = runtime_info();
  if (!r.openblas_core_generic || r.gemm_backend != "openblas") return "";
  return "GEMM runs on OpenBLAS's generic '" + r.openblas_core +
         "' kernel on this CPU (about 5x slower); use --gemm dnnl, or set OPENBLAS_CORETYPE "
         "(e.g. Haswell or SkylakeX)";
}

std::string runtime_banner() {
  RuntimeInfo r = runtime_info();
  std::ostringstream s;
  s << "trilemma " << r.version << " (" << r.build << " build)\n"
    << "gemm backend: " << r.gemm_backend << "\n"
    << "openblas: " << r.openblas_version << " kernel=" << r.openblas_core
    << (r.openblas_core_generic ? " (GENERIC, slow)" : "") << " threads=" << r.openblas_threads
    << "\n"
    << "onednn: " << r.dnnl_version << " isa=" << r.dnnl_isa << "\n"
    << (r.mkl_built_in ? "mkl: " + (r.mkl_version.empty() ? "built in, not loaded (--gemm mkl)" : r.mkl_version) + "\n" : "")
    << "threads: " << r.threads << " (physical cores " << r.physical_cores << ", logical cpus "
    << r.logical_cpus << ")\n"
    << "cpu: " << r.cpu_model << "\n"
    << "cpu features: " << r.cpu_features << "\n"
    << "bf16 (--precision bf16): " << r.bf16 << "\n"
    << "mpi: " << (r.mpi.empty() ? "not built in (one process per run; install libopenmpi-dev and rebuild)" : r.mpi)
    << (r.ranks > 1 ? ", " + std::to_string(r.ranks) + " ranks" : "") << "\n";
  std::string w = runtime_warning();
  if (!w.empty()) {
    s << "WARNING: " << w << "\n";
    g_banner_warned = true;
  }
  return s.str();
}

std::string runtime_summary() {
  RuntimeInfo r = runtime_info();
  std::string s = "trilemma " + r.version + (r.build == "Release" ? "" : " (" + r.build + " build)") + ": GEMM " +
                  (r.gemm_backend == "dnnl"  ? "oneDNN " + r.dnnl_version + " (" + r.dnnl_isa + ")"
                   : r.gemm_backend == "mkl" ? "MKL " + r.mkl_version
                                             : "OpenBLAS (" + r.openblas_core + " kernel)") +
                  ", " + std::to_string(r.threads) + " thread" + (r.threads == 1 ? "" : "s") + " of " +
                  std::to_string(r.physical_cores) + " physical cores, " + r.cpu_model +
                  (r.ranks > 1 ? ", " + std::to_string(r.ranks) + " MPI ranks" : "");
  const std::string w = runtime_warning();
  if (!w.empty()) {
    s += "\nWARNING: " + w;
    g_banner_warned = true;
  }
  return s;
}

}  // namespace tri
