// gemm_amx (gemm_amx.hpp). Tiles: 0-3 hold a 32 x 32 block of C in float32 (four 16 x 16), 4-5
// the block's two A tiles (16 rows x 32 k in bf16), 6-7 its two B tiles (16 k-pairs x 16
// columns, each k-pair adjacent: the "VNNI" order TDPBF16PS reads). Per 32 k: four loads, four
// TDPBF16PS. B is packed once per call; A by groups of 32-row panels just before their use, or,
// transposed, all at once up front (read along its rows).
#include "framework/runtime/gemm_amx.hpp"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include <omp.h>

#include "framework/base/error.hpp"
#include "framework/runtime/runtime.hpp"

#define TRI_AMX __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")))

namespace tri {

namespace {

constexpr int64_t kRows = 16;        // rows of every tile, columns of a C tile
constexpr int64_t kDepth = 32;       // k per tile: an A row's 32 bf16, a B tile's 16 pairs
constexpr int64_t kTile = kRows * kDepth;  // bf16 per A or B tile (1 KiB)
constexpr int64_t kPanel = 2 * kRows;      // rows of A (and columns of B) per block

// Linux gives a process the 8 KiB tile state only when asked (arch_prctl ARCH_REQ_XCOMP_PERM).
constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Tile rows are 64 bytes: packed tiles start on a cache line, or every row load is split in two
// (measured: 5-7x slower loads).
class Packed {
 public:
  uint16_t* reserve(int64_t count) {
    if (count > capacity_) {
      capacity_ = count;
      data_.reset(static_cast<uint16_t*>(std::aligned_alloc(64, size_t((count * 2 + 63) / 64 * 64))));
      if (!data_) throw std::bad_alloc();
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(uint16_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint16_t, Free> data_;
  int64_t capacity_ = 0;
};

TRI_AMX void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = kRows;
    cfg.bytes_per_row[t] = 64;  // 16 float32 or 32 bf16
  }
  _tile_loadconfig(&cfg);
}

inline __mmask16 first(int64_t count) {
  return count >= 16 ? __mmask16(0xffff) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// The bf16 bits of 16 floats (bf16_bits, vectorised) in the low halves of 32-bit lanes.
TRI_AMX inline __m512i round_lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x), high = _mm512_srli_epi32(u, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_and_si512(high, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
}

// 32 consecutive floats (zero past `count`) as 32 bf16, in order.
TRI_AMX inline __m512i round_32(const float* src, int64_t count) {
  const __m256i lo = _mm512_cvtepi32_epi16(round_lanes(_mm512_maskz_loadu_ps(first(count), src)));
  const __m256i hi = _mm512_cvtepi32_epi16(round_lanes(_mm512_maskz_loadu_ps(first(count - 16), src + 16)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// This thread's part of a loop split as `schedule(static)` would: contiguous, in order.
struct Share {
  int64_t index = 0, count = 1;
  std::pair<int64_t, int64_t> of(int64_t total) const {
    const int64_t chunk = (total + count - 1) / count, begin = std::min(total, index * chunk);
    return {begin, std::min(total, begin + chunk)};
  }
};

// r[i] holds row i of a 16 x 16 matrix of 32-bit values (bf16 pairs); afterwards column i.
// Unpacks pair rows within 128-bit lanes, then two rounds of lane shuffles gather each column's
// four lanes: 64 shuffles, where scattering a column costs one store per value.
TRI_AMX inline void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // r[4 q + j], 128-bit lane l: rows 4 q .. 4 q + 3 of column 4 l + j.
  for (int q = 0; q < 4; ++q) {
    r[4 * q] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
    r[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
    r[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
    r[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
  }
  for (int i = 0; i < 4; ++i) {  // 0x88: lanes 0 and 2 of each source, 0xdd: lanes 1 and 3
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

// 16 values of rows k0 and k0 + 1 of a matrix stored k-major (zero past k, and past `count`
// columns), as 16 bf16 pairs (k0 in the low half).
TRI_AMX inline __m512i round_pairs(const float* at_k0, int64_t ld, int64_t k0, int64_t k, int64_t count) {
  const __mmask16 cols = first(count);
  const __m512 even = k0 < k ? _mm512_maskz_loadu_ps(cols, at_k0) : _mm512_setzero_ps();
  const __m512 odd = k0 + 1 < k ? _mm512_maskz_loadu_ps(cols, at_k0 + ld) : _mm512_setzero_ps();
  return _mm512_or_si512(round_lanes(even), _mm512_slli_epi32(round_lanes(odd), 16));
}

// A panel: rows [0, rows) of A (zero rows after), as 2 x k_tiles A tiles (16 rows x 32 k).
TRI_AMX void pack_a(const float* a, int64_t lda, int64_t rows, int64_t k, int64_t k_tiles, uint16_t* out) {
  for (int64_t r = 0; r < kPanel; ++r) {
    uint16_t* row = out + (r / kRows) * k_tiles * kTile + (r % kRows) * kDepth;
    for (int64_t t = 0; t < k_tiles; ++t)
      _mm512_storeu_si512(row + t * kTile,
                          r < rows ? round_32(a + r * lda + t * kDepth, k - t * kDepth) : _mm512_setzero_si512());
  }
}

// op(A) = A^T with A stored [k, m]: every panel at once, laid out as pack_a lays them one after
// another; A is read a 32-row band at a time. A tile's 16 k-pairs are read as rows (16 columns
// each), then transposed.
TRI_AMX void pack_a_transposed(const float* a, int64_t lda, int64_t m, int64_t k, int64_t panels, int64_t k_tiles,
                               uint16_t* out, Share share) {
  const auto [first_tile, end_tile] = share.of(k_tiles);
  for (int64_t t = first_tile; t < end_tile; ++t)
    for (int64_t h = 0; h < 2 * panels; ++h) {
      __m512i pairs[kRows];  // pairs[p]: k-pair p of the tile's 16 rows
      for (int64_t p = 0; p < kRows; ++p) {
        const int64_t k0 = t * kDepth + 2 * p;
        pairs[p] = round_pairs(a + k0 * lda + h * kRows, lda, k0, k, m - h * kRows);
      }
      transpose_16x16(pairs);
      for (int64_t r = 0; r < kRows; ++r) _mm512_storeu_si512(out + (h * k_tiles + t) * kTile + r * kDepth, pairs[r]);
    }
}

// op(B) [k, n] as n_tiles x k_tiles B tiles; tile (j, t) row p holds k = 32 t + 2 p and 2 p + 1
// for the columns 16 j .. 16 j + 15, interleaved. trans_b: B is stored [n, k].
TRI_AMX void pack_b(bool trans_b, const float* b, int64_t ldb, int64_t n, int64_t k, int64_t n_tiles, int64_t k_tiles,
                    uint16_t* out) {
  if (!trans_b) {
    for (int64_t t = 0; t < k_tiles; ++t)
      for (int64_t p = 0; p < kRows; ++p) {
        const int64_t k0 = t * kDepth + 2 * p;
        for (int64_t j = 0; j < n_tiles; ++j)
          _mm512_storeu_si512(out + (j * k_tiles + t) * kTile + p * kDepth,
                              round_pairs(b + k0 * ldb + j * kRows, ldb, k0, k, n - j * kRows));
      }
    return;
  }
  // Stored [n, k]: a row of B is one column of op(B), its 16 k-pairs one column of the tile.
  for (int64_t j = 0; j < n_tiles; ++j)
    for (int64_t t = 0; t < k_tiles; ++t) {
      __m512i pairs[kRows];
      for (int64_t c = 0; c < kRows; ++c) {
        const int64_t col = j * kRows + c;
        pairs[c] = col < n ? round_32(b + col * ldb + t * kDepth, k - t * kDepth) : _mm512_setzero_si512();
      }
      transpose_16x16(pairs);
      for (int64_t p = 0; p < kRows; ++p) _mm512_storeu_si512(out + (j * k_tiles + t) * kTile + p * kDepth, pairs[p]);
    }
}

// C block (32 x 32 at c) = residual + (bias + (A panel x B tiles j, j + 1 + beta C)); rows, cols:
// the part inside C; bias from the block's first column, residual at the block's first element
// (either may be null). With bias or residual the sums are added as sgemm_add's fallback adds
// them (a filled C summed at beta 1, then residual + C): the same bits, C written once.
TRI_AMX void block(const uint16_t* a_panel, const uint16_t* b_pair, int64_t k_tiles, float beta, float* c,
                   int64_t ldc, int64_t rows, int64_t cols, const float* bias, const float* residual) {
  const uint16_t* a1 = a_panel + k_tiles * kTile;
  const uint16_t* b1 = b_pair + k_tiles * kTile;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t t = 0; t < k_tiles; ++t) {
    _tile_loadd(4, a_panel + t * kTile, 64);
    _tile_loadd(5, a1 + t * kTile, 64);
    _tile_loadd(6, b_pair + t * kTile, 64);
    _tile_loadd(7, b1 + t * kTile, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (beta == 0.f && !bias && !residual && rows == kPanel && cols == kPanel) {
    const int64_t stride = ldc * int64_t(sizeof(float));
    _tile_stored(0, c, stride);
    _tile_stored(1, c + kRows, stride);
    _tile_stored(2, c + kRows * ldc, stride);
    _tile_stored(3, c + kRows * ldc + kRows, stride);
    return;
  }
  alignas(64) float sums[4][kRows * kRows];
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
  _tile_stored(2, sums[2], 64);
  _tile_stored(3, sums[3], 64);
  const __m512 scale = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t h = 0; h < 2; ++h) {
      const __mmask16 in = first(cols - h * kRows);
      float* out = c + i * ldc + h * kRows;
      __m512 v = _mm512_load_ps(sums[(i / kRows) * 2 + h] + (i % kRows) * kRows);
      if (beta != 0.f) v = _mm512_fmadd_ps(scale, _mm512_maskz_loadu_ps(in, out), v);
      if (bias) v = _mm512_add_ps(_mm512_maskz_loadu_ps(in, bias + h * kRows), v);
      if (residual) v = _mm512_add_ps(_mm512_maskz_loadu_ps(in, residual + i * ldc + h * kRows), v);
      _mm512_mask_storeu_ps(out, in, v);
    }
}

// One call: its operands, B packed, and how its panels are grouped.
struct Call {
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const uint16_t* a_packed;  // every panel, when A was packed up front (trans_a); else null
  const uint16_t* b_packed;
  float beta;
  float* c;
  int64_t ldc;
  GemmAdd add;
  int64_t k_tiles, n_tiles, panels, group, groups;
};

// This thread's share of the groups of panels.
TRI_AMX void run_groups(const Call& g, Share share) {
  configure_tiles();
  const int64_t panel_size = 2 * g.k_tiles * kTile;
  thread_local Packed group_packed;
  uint16_t* group_a = g.a_packed ? nullptr : group_packed.reserve(g.group * panel_size);
  const auto [first_group, end_group] = share.of(g.groups);
  for (int64_t grp = first_group; grp < end_group; ++grp) {
    const int64_t first_panel = grp * g.group, count = std::min(g.group, g.panels - first_panel);
    const uint16_t* ap = g.a_packed ? g.a_packed + first_panel * panel_size : group_a;
    for (int64_t q = 0; q < count && !g.a_packed; ++q) {
      const int64_t row = (first_panel + q) * kPanel;
      pack_a(g.a + row * g.lda, g.lda, std::min(kPanel, g.m - row), g.k, g.k_tiles, group_a + q * panel_size);
    }
    for (int64_t j = 0; j < g.n_tiles; j += 2)
      for (int64_t q = 0; q < count; ++q) {
        const int64_t row = (first_panel + q) * kPanel;
        const int64_t at = row * g.ldc + j * kRows;
        block(ap + q * panel_size, g.b_packed + j * g.k_tiles * kTile, g.k_tiles, g.beta, g.c + at, g.ldc,
              std::min(kPanel, g.m - row), std::min(kPanel, g.n - j * kRows),
              g.add.bias ? g.add.bias + j * kRows : nullptr, g.add.residual ? g.add.residual + at : nullptr);
      }
  }
  _tile_release();
}

}  // namespace

bool amx_usable() {
  static const bool usable = [] {
    const char* off = std::getenv("TRILEMMA_CPU_NO_AMX");
    if (off && std::string(off) == "1") return false;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx_bf16 = (d >> 22) & 1u, amx_tile = (d >> 24) & 1u;
    return amx_bf16 && amx_tile && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

void gemm_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc, GemmAdd add) {
  if (!amx_usable()) throw Error("gemm_amx: this CPU or process has no AMX tiles (see amx_usable)");
  Call g{m, n, k, a, lda, nullptr, nullptr, beta, c, ldc, add, 0, 0, 0, 0, 0};
  g.k_tiles = (k + kDepth - 1) / kDepth;
  g.n_tiles = (n + kPanel - 1) / kPanel * 2;  // even: blocks take two
  g.panels = (m + kPanel - 1) / kPanel;
  thread_local Packed b_packed;
  uint16_t* bp = b_packed.reserve(g.n_tiles * g.k_tiles * kTile);
  pack_b(trans_b, b, ldb, n, k, g.n_tiles, g.k_tiles, bp);
  g.b_packed = bp;
  // Panels go in groups that share each B pair while it is in L1: a group's packed A (up to
  // 512 KiB) stays in L2, and B comes from further away once per group, not once per panel.
  const bool parallel = 2 * m * n * k >= (int64_t(1) << 22);
  const int64_t threads = parallel ? omp_get_max_threads() : 1, panel_size = 2 * g.k_tiles * kTile;
  g.group = std::clamp<int64_t>(std::min((int64_t(1) << 18) / panel_size, (g.panels + threads - 1) / threads), 1, 8);
  g.groups = (g.panels + g.group - 1) / g.group;
  thread_local Packed a_packed;  // this thread's: the region's threads see it through `all`
  uint16_t* all = trans_a ? a_packed.reserve(g.panels * panel_size) : nullptr;
  g.a_packed = all;
  // Shares by thread number, not `omp for`: called inside someone else's parallel region (one
  // GEMM per head), an orphaned `omp for` would split this call across that region's threads.
  parallel_if(parallel, [&] {
    const Share share = parallel ? Share{omp_get_thread_num(), omp_get_num_threads()} : Share{};
    if (all) {
      pack_a_transposed(a, lda, m, k, g.panels, g.k_tiles, all, share);
      if (parallel) {
#pragma omp barrier
      }
    }
    run_groups(g, share);
  });
}

}  // namespace tri
