// The optional GEMM backend "mkl": MKL's cblas_sgemm from the libmkl_rt a build was configured
// with (-DTRILEMMA_MKL_ROOT=<prefix>, docs/BENCHMARKS.md "GEMM backends"). The library is opened
// on first use with its own symbol scope, so its cblas_sgemm never meets OpenBLAS's of the same
// name. In a build without it, built_in() is false and nothing here loads anything.
#pragma once
#include <cstdint>
#include <string>

namespace tri::mkl {

bool built_in();
// Loads libmkl_rt (GNU OpenMP threading, the thread count of set_threads); throws tri::Error
// when it cannot. Every function below calls it first.
void load();
// "2026.2.0" once loaded; "" before, or in a build without MKL.
std::string version();
// Remembered before loading, applied on loading and after.
void set_threads(int n);
// Row-major C = alpha op(A) op(B) + beta C.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
           int64_t ldc);

}  // namespace tri::mkl
