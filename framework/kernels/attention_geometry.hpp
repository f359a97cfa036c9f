// Which (query, key) pairs the fused attention kernel (attention.cpp) computes, and the tile
// ranges that follow: query i sits at key position pos = shift + i and sees the keys j with
//   key_begin(pos) <= j <= pos   (causal; key_begin is 0, or pos - window + 1 with a window)
// or every key (not causal). The kernel walks only the tiles that hold some visible pair, so a
// window of W keys costs O(T W) per head instead of O(T^2).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace tri::attention_geometry {

// Query rows and key columns per tile: a 64 x 64 score tile is 16 KiB and stays in L1.
constexpr int64_t kTile = 64;

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Sizes and options of one call. Rows of a head are `stride` = H * Dh floats apart.
struct Geometry {
  int64_t B, Tq, Tk, H, Dh;
  int64_t Dp;     // Dh rounded up to 16
  int64_t Tkp;    // Tk rounded up to kTile
  int64_t shift;  // Tk - Tq: query i sits at key position shift + i
  float scale;
  bool causal;
  int64_t window;             // 0, or the keys each query sees (causal only)
  std::vector<float> slopes;  // empty, or one per head

  static constexpr float kLog2e = 1.44269504088896341f;

  int64_t stride() const { return H * Dh; }
  // Row length of the transposed packs (K^T, V^T [Dp][ldt]): Tkp and 16 more, so that their rows
  // are not a multiple of 4 kB apart (at T 1024 they were: every row of a tile's product fell
  // in one set of L1).
  int64_t ldt() const { return Tkp + 16; }
  // The first key the query at position pos sees.
  int64_t key_begin(int64_t pos) const { return window ? std::max<int64_t>(0, pos - window + 1) : 0; }
  // Keys the queries [0, i_end) can see: [0, key_end(i_end)).
  int64_t key_end(int64_t i_end) const { return causal ? std::min(Tk, shift + i_end) : Tk; }
  // Queries that see some key of [0, j_end): [0, query_end(j_end)) (a window's upper edge).
  int64_t query_end(int64_t j_end) const {
    return window ? std::clamp<int64_t>(j_end - 1 + window - shift, 0, Tq) : Tq;
  }
  // ALiBi slope of head h for base-2 scores.
  float slope2(int64_t h) const { return slopes.empty() ? 0.f : slopes[size_t(h)] * kLog2e; }
  // Offset of time t of head bh = (b, h) in a tensor [B, T, H, Dh].
  int64_t at(int64_t T, int64_t bh, int64_t t) const {
    return ((bh / H * T + t) * H + bh % H) * Dh;
  }
};

// Causal tiles on the diagonal: the columns of key tile j0 that query rows up to position
// `pos` can see, rounded up to a 16-column block (0 to kTile). Products over a tile are done per
// group of 16 rows on those columns only; the columns past them hold masked scores, whose
// probabilities are exactly 0, so skipping them leaves every sum as it was. (Columns before a
// window's lower edge are masked too and computed: they hold probability 0 as well.)
inline int64_t visible_cols(const Geometry& g, int64_t pos, int64_t j0) {
  const int64_t end = (g.causal ? std::min(g.Tk, pos + 1) : g.Tk) - j0;
  return std::clamp<int64_t>(round_up(end, 16), 0, kTile);
}

// The first of n query rows (tile i0) that sees key j (on the diagonal: the rows above see
// nothing of it, their probabilities for it are 0).
inline int64_t first_row_seeing(const Geometry& g, int64_t i0, int64_t n, int64_t j) {
  return g.causal ? std::clamp<int64_t>(j - g.shift - i0, 0, n) : 0;
}

// The (query, key) pairs a head computes: all of them, or those in the causal band.
inline int64_t visible_pairs(const Geometry& g) {
  if (!g.causal) return g.Tq * g.Tk;
  int64_t n = 0;
  for (int64_t i = 0; i < g.Tq; ++i) n += g.key_end(i + 1) - g.key_begin(g.shift + i);
  return n;
}

}  // namespace tri::attention_geometry
