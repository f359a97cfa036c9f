// The selective scan's argument set checked once and seen as raw pointers: shared by the fused
// kernel (selective_scan.cpp), the naive reference (selective_scan_naive.cpp) and the recurrent
// step (selective_scan_step.cpp).
// Internal to framework/kernels.
#pragma once
#include <cstdint>

#include "framework/core/tensor.hpp"

namespace tri::scan_detail {

struct ScanArgs {
  int64_t batch = 0, T = 0, E = 0, N = 0;
  const float *u = nullptr, *delta = nullptr, *A = nullptr, *Bm = nullptr, *Cm = nullptr;
  const float *D = nullptr, *z = nullptr, *bias = nullptr;  // optional
  bool var_B = true, var_C = true, softplus = false;
};

// Checks the shapes of the official argument set (T = 1 for the step) and returns raw views;
// a bad shape throws one line naming `op`, the argument and what it must be.
ScanArgs scan_args(const char* op, const Tensor& u, const Tensor& delta, const Tensor& A,
                   const Tensor& Bm, const Tensor& Cm, const Tensor& D, const Tensor& z,
                   const Tensor& bias, bool softplus);

}  // namespace tri::scan_detail
