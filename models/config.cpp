#include "config.hpp"

#include <initializer_list>

#include "framework/tensor.hpp"

namespace tri {

namespace {

void require_one_of(const char* field, const std::string& value,
                    std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return;
    list += list.empty() ? a : std::string(" | ") + a;
  }
  throw Error("config: " + std::string(field) + " '" + value + "' is not one of " + list);
}

void require_positive(const char* field, int64_t value) {
  if (value <= 0)
    throw Error("config: " + std::string(field) + " = " + std::to_string(value) +
                " must be positive");
}

}  // namespace

void ModelConfig::validate() const {
  require_one_of("family", family, {"attention", "linear", "mamba"});
  require_positive("vocab", vocab);
  require_positive("d_model", d_model);
  require_positive("n_layers", n_layers);
  require_positive("max_seq_len", max_seq_len);
  require_one_of("norm", norm, {"pre", "post"});
  require_one_of("mlp", mlp, {"none", "gelu"});
  require_one_of("pos", pos, {"none", "sinusoidal", "learned", "rope", "alibi"});
  require_one_of("feature_map", feature_map, {"elu", "relu", "identity"});
  require_one_of("a_init", a_init, {"s4d-real", "s4d-lin", "hippo-legs"});

  if (family == "mamba") {
    if (pos != "none")
      throw Error("config: pos '" + pos + "' is not allowed for family mamba (only none)");
    require_positive("d_state", d_state);
    require_positive("d_conv", d_conv);
    require_positive("expand", expand);
    if (dt_rank < 0)
      throw Error("config: dt_rank = " + std::to_string(dt_rank) +
                  " must be >= 0 (0 means ceil(d_model / 16))");
    if (a_init != "s4d-real" && ssm_selective)
      throw Error("config: a_init '" + a_init +
                  "' needs ssm_selective = false (with a selective SSM only s4d-real)");
    if (a_init == "s4d-lin" && d_state % 2 != 0)
      throw Error("config: a_init 's4d-lin' needs an even d_state (N/2 complex modes), got " +
                  std::to_string(d_state));
    return;
  }
  // attention and linear attention
  require_positive("n_heads", n_heads);
  if (d_model % n_heads != 0)
    throw Error("config: d_model = " + std::to_string(d_model) + " is not divisible by n_heads = " +
                std::to_string(n_heads));
  if (pos == "alibi" && family != "attention")
    throw Error("config: pos 'alibi' is only allowed for family attention, not " + family);
  if (pos == "rope" && head_dim() % 2 != 0)
    throw Error("config: pos 'rope' needs an even head_dim, got d_model / n_heads = " +
                std::to_string(head_dim()));
}

}  // namespace tri
