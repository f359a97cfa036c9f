#include "framework/runtime/gemm_mkl.hpp"

#include "framework/base/error.hpp"

#ifdef TRILEMMA_MKL_LIBRARY
#include <dlfcn.h>
#include <mkl_cblas.h>
#include <mkl_service.h>

#include <atomic>
#include <mutex>
#endif

namespace tri::mkl {

#ifndef TRILEMMA_MKL_LIBRARY

bool built_in() { return false; }
void load() {
  throw Error("--gemm mkl: this build has no MKL (configure with -DTRILEMMA_MKL_ROOT=<prefix>; "
              "docs/BENCHMARKS.md, GEMM backends)");
}
std::string version() { return ""; }
void set_threads(int) {}
void sgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
           int64_t, float, float*, int64_t) {
  load();
}

#else

namespace {
// The entry points, typed by MKL's own declarations.
struct Library {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&MKL_Set_Num_Threads) set_num_threads = nullptr;
  std::string version;
};
Library g_lib;
std::once_flag g_loaded;
std::atomic<int> g_threads{0};  // 0: not set yet

template <class F>
F symbol(void* handle, const char* name) {
  void* p = dlsym(handle, name);
  if (!p) throw Error(std::string("MKL: ") + TRILEMMA_MKL_LIBRARY + " has no " + name);
  return reinterpret_cast<F>(p);
}

void open_library() {
  // RTLD_DEEPBIND: MKL's calls into itself bind to MKL, never to OpenBLAS's BLAS symbols that
  // are already global in this process.
  void* handle = dlopen(TRILEMMA_MKL_LIBRARY, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!handle) throw Error(std::string("MKL: cannot load ") + TRILEMMA_MKL_LIBRARY + ": " + dlerror());
  // The layers first, before any computing call: GNU OpenMP, the runtime the rest of trilemma
  // (and oneDNN) runs on, so MKL's threads are the same pool, never a second one.
  symbol<decltype(&MKL_Set_Threading_Layer)>(handle, "MKL_Set_Threading_Layer")(MKL_THREADING_GNU);
  symbol<decltype(&MKL_Set_Interface_Layer)>(handle, "MKL_Set_Interface_Layer")(MKL_INTERFACE_LP64);
  Library lib;
  lib.sgemm = symbol<decltype(&cblas_sgemm)>(handle, "cblas_sgemm");
  lib.set_num_threads = symbol<decltype(&MKL_Set_Num_Threads)>(handle, "MKL_Set_Num_Threads");
  MKLVersion v{};
  symbol<decltype(&MKL_Get_Version)>(handle, "MKL_Get_Version")(&v);
  // Named as MKL's releases are: year.update.patch (MinorVersion stays 0).
  lib.version = std::to_string(v.MajorVersion) + "." + std::to_string(v.UpdateVersion) + "." +
                std::to_string(v.PatchVersion);
  g_lib = lib;
  if (const int n = g_threads.load()) g_lib.set_num_threads(n);
}
}  // namespace

bool built_in() { return true; }

void load() { std::call_once(g_loaded, open_library); }

std::string version() { return g_lib.sgemm ? g_lib.version : ""; }

void set_threads(int n) {
  g_threads.store(n);
  if (g_lib.sgemm) g_lib.set_num_threads(n);
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc) {
  load();
  g_lib.sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              MKL_INT(m), MKL_INT(n), MKL_INT(k), alpha, a, MKL_INT(lda), b, MKL_INT(ldb), beta, c,
              MKL_INT(ldc));
}

#endif

}  // namespace tri::mkl
