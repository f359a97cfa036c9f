// The machine the framework runs on: GEMM backend, BLAS kernel, threads.
// One call, set_threads(n), governs OpenMP (and so oneDNN, which runs on it) and OpenBLAS's
// own pool together, so they never oversubscribe the cores.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tri {

// Elements below which a loop runs on one thread: OpenMP's fork and join cost more than the
// threads save on less work than this. Every parallel loop writes disjoint outputs, so on a
// `parallel for` the threshold moves time, never bits; on a `parallel for simd` its `if` also
// picks scalar or vector code (OpenMP 5.0 applies it to simd), whose last bits can differ.
constexpr int64_t kParallelMin = int64_t(1) << 14;
// The `parallel for simd` loops that had 2^15 keep it: at kParallelMin their bits would change
// (scalar and vector gelu' differ in the last bit).
constexpr int64_t kParallelSimdMin = int64_t(1) << 15;

// f() in a parallel region when `parallel` (an orphaned `omp for` in f then splits its loop),
// else on this thread without opening one: libgomp's region, even with `if` false, ends in a
// futex call, which costs more than a decoding step's work at B 1.
template <class F>
void parallel_if(bool parallel, F f) {
  if (parallel) {
#pragma omp parallel
    f();
  } else {
    f();
  }
}

// mkl: only in a build configured with -DTRILEMMA_MKL_ROOT (framework/runtime/gemm_mkl.hpp).
enum class GemmBackend { dnnl, openblas, mkl };

struct RuntimeInfo {
  std::string version;            // trilemma's
  std::string build;              // the build type: Release, Debug, "Debug sanitized", ...
  std::string gemm_backend;       // "dnnl", "openblas" or "mkl"
  std::string openblas_version;   // openblas_get_config()
  std::string openblas_core;      // openblas_get_corename(), e.g. "Haswell"
  bool openblas_core_generic;     // a pre-AVX kernel (Prescott, Core2, ...): ~5x slower GEMM
  int openblas_threads;
  std::string dnnl_version;       // "2.6.3"
  std::string dnnl_isa;           // the ISA oneDNN dispatches to
  bool mkl_built_in;              // this build has the backend "mkl"
  std::string mkl_version;        // "2026.2.0" once MKL is loaded, else ""
  int threads;                    // OpenMP threads
  int physical_cores;
  int logical_cpus;
  std::string cpu_model;
  std::string cpu_features;       // the vector ISA flags this build and CPU have
  std::string bf16;               // "native (avx512_bf16 amx_bf16)" or "not available (lacks ...)"
  std::string mpi;                // the MPI library, "" when this build has none
  int ranks;                      // MPI ranks of this job (1 outside mpirun)
};

// Row-major C = alpha * op(A) op(B) + beta * C on the selected backend.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc);
// A linear layer's C [m, n] = residual + (bias + A op(B)), bias a row added to every row and
// residual laid out as C (either may be null): C filled with the bias and summed into at beta 1,
// then residual + C, on the selected backend and precision. With bf16 on AMX tiles both are
// added while each block of C is stored: the same bits, C written once.
void sgemm_add(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, const float* bias, const float* residual, float* c);
// The same call on a named backend (benchmarks and tests compare them).
void sgemm_on(GemmBackend be, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc);

// The precision of every sgemm call: fp32, or bf16 (its inputs rounded to bfloat16, products
// summed in float32: gemm_bf16.hpp). Setting bf16 on a CPU without native bf16 throws a
// UsageError (exit 2) naming the missing features. sgemm_on (benchmarks, tests) stays fp32.
enum class Precision { fp32, bf16 };
void set_gemm_precision(Precision p);
Precision gemm_precision();
Precision precision_of(const std::string& name);  // "fp32" or "bf16"; a UsageError otherwise
std::string precision_name(Precision p);

// Floating-point operations done by sgemm calls (2 m n k each) and by kernels that report
// theirs (add_flops: the attention kernel), since the process started; for GFLOP/s.
int64_t flop_count();
void add_flops(int64_t n);

// Chooses the backend: "auto" (oneDNN: the faster on every size measured on this CPU, and
// immune to OpenBLAS's kernel detection), "dnnl", "openblas", or "mkl" in a build that has it
// (which loads MKL here). Choosing OpenBLAS while it
// runs a generic kernel prints a warning to stderr: it never runs slow silently.
void set_gemm_backend(const std::string& name);
GemmBackend gemm_backend();
// The names set_gemm_backend takes in this build, and a backend's name; the names joined by
// `sep` (for help texts).
std::vector<std::string> gemm_backend_names();
std::string gemm_backend_names(const std::string& sep);
std::string gemm_backend_name(GemmBackend be);

// Sets the thread count for OpenMP, oneDNN and OpenBLAS together; n <= 0 means the number
// of physical cores.
void set_threads(int n);
int num_threads();
int physical_cores();

RuntimeInfo runtime_info();
// Multi-line "key: value" description (trilemma info).
std::string runtime_banner();
// One line (two with a warning) for the output of a measurement: version, GEMM backend and
// ISA or kernel, threads, CPU.
std::string runtime_summary();
// A warning when GEMM runs on a slow kernel (OpenBLAS's generic one), else empty.
std::string runtime_warning();

}  // namespace tri
