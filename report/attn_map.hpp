// The attention probabilities of an attention model on one row of
// its task's evaluation stream, one heat map per (layer, head) (the book's Figure 9.1), drawn by
// gnuplot into a PNG; --data also writes them as text. The probabilities come from the model's
// own forward (models/attention.hpp record_attention: the naive kernel with the same RoPE, ALiBi
// and mask). Per head it prints the mean probability the scored positions put on the position
// they recall from, for tasks that name one (TaskOptions::recall_source: mqar, induction, needle).
#pragma once
#include <cstdint>
#include <string>

namespace tri::report {

struct AttnMapRequest {
  std::string checkpoint;  // the .h5 of an attention model
  int64_t row = 0;         // of the evaluation stream's first batch
  int64_t layer = -1;      // only this layer; -1: every layer
  int64_t seq_len = 0;     // the row's length; 0: the task's
  std::string out;         // the PNG; empty: attn-map.png next to the checkpoint
  std::string data;        // also the probabilities as text, when given
};

// Prints the recall table, writes the PNG (when gnuplot is here) and the text. A UsageError for
// a checkpoint of another family or a layer or length it does not have.
void attention_map(const AttnMapRequest& req);

}  // namespace tri::report
