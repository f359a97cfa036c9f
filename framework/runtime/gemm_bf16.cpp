// gemm_bf16 (gemm_bf16.hpp): on AMX, gemm_amx; elsewhere (AVX512_BF16 without AMX) the inputs
// rounded into bf16 buffers, then oneDNN's matmul with a float32 destination, the matmul of each
// shape made once per thread and kept.
#include "framework/runtime/gemm_bf16.hpp"

#include <cpuid.h>

#include <cstdlib>
#include <map>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "framework/base/error.hpp"
#include "framework/runtime/gemm_amx.hpp"

namespace tri {

namespace {

struct CpuBf16 {
  bool avx512_bf16 = false, amx_bf16 = false;
};

CpuBf16 cpu_bf16() {
  CpuBf16 c;
  unsigned a, b, cx, d;
  if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) c.avx512_bf16 = (a >> 5) & 1u;
  if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) c.amx_bf16 = (d >> 22) & 1u;
  return c;
}

bool forced_off() {
  const char* v = std::getenv("TRILEMMA_CPU_NO_BF16");
  return v && std::string(v) == "1";
}

// A, or B, as a packed bf16 matrix of rows x cols (row stride ld in the source).
void round_into(const float* src, int64_t rows, int64_t cols, int64_t ld, std::vector<uint16_t>& dst) {
  dst.resize(size_t(rows * cols));
#pragma omp parallel for schedule(static) if (rows * cols > (int64_t(1) << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = src + r * ld;
    uint16_t* o = dst.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) o[j] = bf16_bits(s[j]);
  }
}

using dnnl::memory;

struct Matmul {
  memory::desc a, b, c;
  dnnl::matmul prim;
};

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, float>;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Matmul make_matmul(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t ldc, float beta) {
  // The packed inputs: op(A) [m, k] stored as A ([m, k], or [k, m] when transposed).
  const memory::dims sa = ta ? memory::dims{1, m} : memory::dims{k, 1};
  const memory::dims sb = tb ? memory::dims{1, k} : memory::dims{n, 1};
  Matmul mm{memory::desc({m, k}, memory::data_type::bf16, sa), memory::desc({k, n}, memory::data_type::bf16, sb),
            memory::desc({m, n}, memory::data_type::f32, memory::dims{ldc, 1}), {}};
  dnnl::primitive_attr attr;
  if (beta != 0.f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
#if DNNL_VERSION_MAJOR >= 3
  mm.prim = dnnl::matmul(dnnl::matmul::primitive_desc(engine(), mm.a, mm.b, mm.c, attr));
#else
  mm.prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(mm.a, mm.b, mm.c), attr, engine()));
#endif
  return mm;
}

}  // namespace

std::string bf16_features() {
  const CpuBf16 c = cpu_bf16();
  std::string out;
  if (c.avx512_bf16) out += "avx512_bf16";
  if (c.amx_bf16) out += std::string(out.empty() ? "" : " ") + "amx_bf16";
  return out;
}

std::string bf16_kernel() { return amx_usable() ? "AMX tiles" : "oneDNN's matmul"; }

std::string bf16_unavailable_reason() {
  const CpuBf16 c = cpu_bf16();
  if (forced_off()) return "avx512_bf16 and amx_bf16 (switched off by TRILEMMA_CPU_NO_BF16=1)";
  if (!c.avx512_bf16 && !c.amx_bf16) return "avx512_bf16 and amx_bf16";
  // The CPU has them, but oneDNN may be held below them (ONEDNN_MAX_CPU_ISA): it would have no
  // bf16 matmul, and none is emulated.
  const unsigned isa = unsigned(dnnl_get_effective_cpu_isa()), bf16 = unsigned(dnnl_cpu_isa_avx512_core_bf16);
  if ((isa & bf16) != bf16) return "oneDNN's bf16 kernels (oneDNN is held to a lower ISA, ONEDNN_MAX_CPU_ISA)";
  return "";
}

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float beta, float* c, int64_t ldc) {
  if (amx_usable())  // the TDPBF16PS oneDNN's AMX matmul runs, with the rounding fused into packing
    gemm_amx(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
  else
    gemm_bf16_onednn(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16_onednn(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
  thread_local std::vector<uint16_t> a16, b16;
  thread_local std::map<Key, Matmul> made;
  round_into(a, ta ? k : m, ta ? m : k, lda, a16);
  round_into(b, tb ? n : k, tb ? k : n, ldb, b16);
  const Key key{ta, tb, m, n, k, ldc, beta};
  auto it = made.find(key);
  if (it == made.end()) {
    try {
      it = made.emplace(key, make_matmul(ta, tb, m, n, k, ldc, beta)).first;
    } catch (const dnnl::error& e) {
      throw Error("bf16 GEMM: oneDNN has no matmul for m=" + std::to_string(m) + " n=" + std::to_string(n) +
                  " k=" + std::to_string(k) + ": " + e.what());
    }
  }
  const Matmul& mm = it->second;
  dnnl::stream s(engine());
  mm.prim.execute(s, {{DNNL_ARG_SRC, memory(mm.a, engine(), a16.data())},
                      {DNNL_ARG_WEIGHTS, memory(mm.b, engine(), b16.data())},
                      {DNNL_ARG_DST, memory(mm.c, engine(), c)}});
  s.wait();
}

}  // namespace tri
