// Gated DeltaNet (Yang, Kautz & Hatamizadeh 2025): DeltaNet's mixer (deltanet.hpp) with the
// state decayed by alpha_t = exp(g_t) before each delta-rule update (Mamba 2's gate on the
// delta rule's memory, --state-gate) and the normed readout multiplied by SiLU(W_g x_t)
// (--output-gate). With both gates off it is DeltaNet; with g = 0 the kernel gives DeltaNet's
// bits (tests/framework/test_delta_rule.cpp).
#include "models/deltanet.hpp"
#include "models/family.hpp"

namespace tri {

FamilySpec gated_deltanet_family() {
  FamilySpec f;
  f.name = "gated_deltanet";
  f.summary = "Gated DeltaNet, the delta rule on a decaying state S = alpha S (I - beta k k^T) + beta v k^T, "
              "Yang et al. 2025";
  f.options = [] { return std::make_unique<GatedDeltaNetOptions>(); };
  f.make = [](const ModelConfig& c, Rng& rng) { return std::make_unique<DeltaNet>(c, rng); };
  f.positions = {"none", "sinusoidal", "learned"};
  f.validate = validate_deltanet;
  f.decode_state = "S per head: H Dh^2 floats per layer, constant in T; with --conv-size K also the last K-1 "
                   "inputs of the q, k and v convolutions";
  f.parity_model = "GatedDeltaNet";
  return f;
}

}  // namespace tri
