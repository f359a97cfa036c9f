// The registry of position encodings (--pos). Everything outside this file learns what an
// encoding does from its entry's flags, never from its name: adding one is its entry in
// position_encodings.cpp plus its line in the registry there, the families that support it list
// it (FamilySpec::positions), and a new kind of behaviour is a new flag read where it acts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tri {

struct ModelConfig;

struct PositionSpec {
  std::string name;     // the --pos value (saved configs and run ids hold it)
  std::string summary;  // one line for --help
  // What it does; none of them: order reaches the model only through causal mixing.
  bool sinusoids = false;  // fixed sinusoids added to the token embeddings
  // A learned table of --max-seq-len rows added to the embeddings: a parameter, and the limit of
  // the positions a model can read (check_position_limit).
  bool table = false;
  bool rotary = false;  // RoPE: rotates q and k (attention and linear attention); even widths
  bool alibi = false;   // ALiBi: linear distance biases on the attention scores
};

// The entry of `name`; an Error naming the registered encodings when there is none.
const PositionSpec& position_spec(const std::string& name);
std::vector<std::string> position_names();
// "<lead> none (its summary), sinusoidal (...), ...", for --help.
std::string positions_help(const std::string& lead);

// An Error when `m`'s encoding cannot place `positions` positions (a learned table of
// max-seq-len rows); `what` names what needs them ("--seq-len 64"):
//   --seq-len 64 exceeds the learned positions (--max-seq-len 32; allowed: at most 32 positions)
void check_position_limit(const ModelConfig& m, int64_t positions, const std::string& what);

}  // namespace tri
