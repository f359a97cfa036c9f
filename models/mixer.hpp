// A sequence mixer: the part of a block that moves information along time. Attention, linear
// attention and Mamba each implement it; blocks and the LM wrapper only see this interface.
#pragma once
#include <memory>
#include <string>

#include "framework/core/module.hpp"
#include "framework/core/tensor.hpp"

namespace tri {

// Per-sequence recurrent state for step-by-step decoding: a KV cache (attention), (S, z)
// (linear attention), (conv state, h) (Mamba).
struct MixerState {
  virtual ~MixerState() = default;
  virtual int64_t bytes() const = 0;  // memory the state holds now
};

// The state a mixer's step() was given, as the mixer's own kind; a one-line Error naming the
// mixer when it is another mixer's.
template <class State>
State& state_as(MixerState& s, const char* mixer) {
  auto* own = dynamic_cast<State*>(&s);
  if (!own) throw Error(std::string(mixer) + ": step was given another mixer's decode state");
  return *own;
}

class Mixer : public Module {
 public:
  // x [B, T, D] -> [B, T, D], causal, recorded on the tape. With a residual [B, T, D]:
  // residual + mixer(x), added by the output projection, so a block's sum does not keep the
  // mixer's output as a tensor of its own.
  virtual Tensor forward(const Tensor& x, const Tensor& residual = Tensor()) = 0;
  // A fresh state for `batch` sequences (positions start at 0).
  virtual std::unique_ptr<MixerState> new_state(int64_t batch) const = 0;
  // One decoding step, no grad: x [B, 1, D] -> [B, 1, D]; advances the state by one position.
  virtual Tensor step(const Tensor& x, MixerState& state) = 0;
  // Bytes of recurrent state per sequence after T tokens (attention's KV cache grows with T;
  // the recurrent mixers' state does not).
  virtual int64_t state_bytes(int64_t T) const = 0;
};

}  // namespace tri
