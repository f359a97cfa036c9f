// Broadcasting: which input element each output element reads (internal to framework/).
// Shared by the binary element-wise ops and by the reductions, which are its inverse.
#pragma once
#include <algorithm>
#include <string>

#include "framework/core/tensor.hpp"

namespace tri {

// Where each output element reads a and b from: per-dim strides, 0 along broadcast dims.
struct Broadcast {
  Shape out;
  int64_t sa[kMaxDims], sb[kMaxDims];
  bool same;  // a, b and out all have one shape
};

inline Broadcast broadcast(const char* op, const Shape& a, const Shape& b) {
  Broadcast r{};
  r.out.nd = std::max(a.nd, b.nd);
  for (int i = 0; i < r.out.nd; ++i) {
    int ia = i - (r.out.nd - a.nd), ib = i - (r.out.nd - b.nd);
    int64_t da = ia >= 0 ? a.d[ia] : 1, db = ib >= 0 ? b.d[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw Error(std::string(op) + ": shapes " + a.str() + " and " + b.str() +
                  " cannot be broadcast (dim " + std::to_string(i) + ": " + std::to_string(da) +
                  " vs " + std::to_string(db) + ")");
    r.out.d[i] = std::max(da, db);
  }
  int64_t ka = 1, kb = 1;
  for (int i = r.out.nd - 1; i >= 0; --i) {
    int ia = i - (r.out.nd - a.nd), ib = i - (r.out.nd - b.nd);
    int64_t da = ia >= 0 ? a.d[ia] : 1, db = ib >= 0 ? b.d[ib] : 1;
    r.sa[i] = da == 1 ? 0 : ka;
    r.sb[i] = db == 1 ? 0 : kb;
    ka *= da;
    kb *= db;
  }
  r.same = a == b;
  return r;
}

// Calls fn(i, ia, ib) for every output index i with the matching input offsets.
template <class F>
void for_each_broadcast(const Broadcast& bc, F fn) {
  const int nd = bc.out.nd;
  const int64_t n = bc.out.numel();
  if (nd == 0) {
    if (n) fn(0, 0, 0);
    return;
  }
  const int64_t inner = bc.out.d[nd - 1];
  int64_t idx[kMaxDims] = {0, 0, 0, 0, 0};
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j) fn(i + j, ia + j * bc.sa[nd - 1], ib + j * bc.sb[nd - 1]);
    for (int d = nd - 2; d >= 0; --d) {  // odometer over the outer dims
      ++idx[d];
      ia += bc.sa[d];
      ib += bc.sb[d];
      if (idx[d] < bc.out.d[d]) break;
      ia -= bc.sa[d] * idx[d];
      ib -= bc.sb[d] * idx[d];
      idx[d] = 0;
    }
  }
}

}  // namespace tri
