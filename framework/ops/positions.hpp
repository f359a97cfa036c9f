// Position information for attention-like mixers: ALiBi slopes, rotary embeddings (RoPE) and
// the book's sinusoidal table (positions.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "framework/core/tensor.hpp"

namespace tri {

// ALiBi's head slopes (Press et al. 2021): 2^(-8h/H) for h = 1..H, for H a power of two, and the
// paper's interleaving rule otherwise.
std::vector<float> alibi_slopes(int64_t heads);

// Rotary position embedding on x [B, T, H, Dh] (Dh even), "rotate half" form as in GPT-NeoX /
// LLaMA: pairs (x[j], x[j + Dh/2]) rotate by angle pos * base^(-2j/Dh), pos = offset + t.
// Differentiable (backward rotates by the negative angle).
Tensor rope(const Tensor& x, int64_t offset, float base = 10000.f);

// The book's sinusoidal table (§8): PE[pos, 2i] = sin(pos / 10000^(2i/D)),
// PE[pos, 2i+1] = cos(pos / 10000^(2i/D)); shape [T, D], rows offset .. offset+T-1. No grad.
Tensor sinusoidal_positions(int64_t T, int64_t D, int64_t offset = 0);

}  // namespace tri
