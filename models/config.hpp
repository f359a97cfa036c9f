// Model configuration: one typed struct, mapped one to one onto CLI flags (train/) and onto the
// checkpoint's /config attributes. validate() throws a one-line Error naming the bad field.
#pragma once
#include <cstdint>
#include <string>

namespace tri {

struct ModelConfig {
  std::string family = "attention";  // attention | linear | mamba
  int64_t vocab = 16;
  int64_t d_model = 64;
  int64_t n_layers = 2;
  int64_t max_seq_len = 1024;        // learned positions' table size
  bool tie_embeddings = false;

  // attention and linear attention
  int64_t n_heads = 4;
  std::string pos = "none";          // none | sinusoidal | learned | rope | alibi (attention only)
  std::string norm = "pre";          // pre: X + f(LN(X)); post: LN(X + f(X)) as the book's block
  std::string mlp = "gelu";          // none | gelu (d_ff = 4 d_model)
  bool bias = false;                 // biases on q/k/v/out projections
  std::string feature_map = "elu";   // linear attention: elu (elu+1) | relu | identity

  // mamba
  int64_t d_state = 16;
  int64_t d_conv = 4;
  int64_t expand = 2;
  int64_t dt_rank = 0;               // 0 means ceil(d_model / 16)
  bool ssm_selective = true;         // false: dt, B, C learned and input-independent (LTI, S4D-like)
  std::string a_init = "s4d-real";   // s4d-real | s4d-lin | hippo-legs (the last two: dense fixed A,
                                     // need ssm_selective=false; s4d-lin an even d_state)

  int64_t head_dim() const { return d_model / n_heads; }
  int64_t d_inner() const { return expand * d_model; }
  int64_t resolved_dt_rank() const { return dt_rank > 0 ? dt_rank : (d_model + 15) / 16; }
  void validate() const;
};

}  // namespace tri
