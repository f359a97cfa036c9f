#include "report/attn_map.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/io/atomic_file.hpp"
#include "models/attention.hpp"
#include "models/position_encodings.hpp"
#include "report/gnuplot.hpp"
#include "train/model_io.hpp"

namespace tri::report {

using namespace tri::train;

namespace {

namespace fs = std::filesystem;

struct Panel {
  int64_t layer, head;
  const float* probs;  // [T, T], query rows
};

// Probabilities as text: a comment line per panel, then T rows of T values; panels apart by two
// blank lines, so gnuplot reads panel i as `index i`.
std::string probabilities_text(const std::string& header, const std::vector<Panel>& panels, int64_t T) {
  std::string s = header;
  char buf[32];
  for (size_t i = 0; i < panels.size(); ++i) {
    s += (i ? "\n\n" : "") + std::string("# layer ") + std::to_string(panels[i].layer) + " head " +
         std::to_string(panels[i].head) + ": probabilities, row = query position, column = key position\n";
    for (int64_t q = 0; q < T; ++q) {
      for (int64_t k = 0; k < T; ++k) {
        std::snprintf(buf, sizeof buf, k ? " %.7g" : "%.7g", double(panels[i].probs[q * T + k]));
        s += buf;
      }
      s += "\n";
    }
  }
  return s;
}

std::string gnuplot_script(const std::string& png, const std::string& data, const std::vector<Panel>& panels,
                           int64_t heads, const std::vector<int32_t>& tokens, const std::string& title) {
  const int64_t T = int64_t(tokens.size()), rows = int64_t(panels.size()) / heads;
  std::ostringstream g;
  g << "set terminal png noenhanced size " << std::max<int64_t>(480, 320 * heads) << "," << 60 + 320 * rows << "\n"
    << "set output " << gnuplot_quoted(png) << "\n"
    << "unset key\nset size ratio 1\nset cbrange [0:1]\nset palette defined (0 'white', 0.25 '#9ecae1', 1 '#08306b')\n"
    << "set xrange [-0.5:" << T - 0.5 << "]\nset yrange [" << T - 0.5 << ":-0.5]\n"
    << "set xlabel 'key position'\nset ylabel 'query position'\n";
  if (T <= 64) {  // the tokens themselves as tics
    std::string tics;
    for (int64_t t = 0; t < T; ++t) tics += (t ? ", " : "") + gnuplot_quoted(std::to_string(tokens[size_t(t)])) + " " + std::to_string(t);
    g << "set xtics (" << tics << ") rotate by 90 scale 0 font ',6'\n"
      << "set ytics (" << tics << ") scale 0 font ',6'\n";
  }
  g << "set multiplot layout " << rows << "," << heads << " title " << gnuplot_quoted(title) << "\n";
  for (size_t i = 0; i < panels.size(); ++i)
    g << "set title 'layer " << panels[i].layer << " head " << panels[i].head << "'\n"
      << "plot " << gnuplot_quoted(data) << " index " << i << " matrix with image\n";
  g << "unset multiplot\n";
  return g.str();
}

// Temporary files removed when the command ends, however it ends.
struct ScratchFiles {
  std::vector<std::string> paths;
  std::string add(const std::string& suffix) {
    paths.push_back((fs::temp_directory_path() / ("trilemma-attn-map-" + std::to_string(getpid()) + suffix)).string());
    return paths.back();
  }
  ~ScratchFiles() {
    std::error_code ignored;
    for (const std::string& p : paths) fs::remove(p, ignored);
  }
};

TaskConfig task_at_length(const LoadedModel& loaded, int64_t L) {
  TaskConfig t = loaded.config.task;
  if (L == 0) return t;
  t.seq_len = L;
  try {
    t.validate();
  } catch (const Error& e) {
    throw UsageError("--seq-len " + std::to_string(L) + ": " + e.what());
  }
  const ModelConfig& m = loaded.config.model;
  as_usage_error([&] { check_position_limit(m, L, "--seq-len " + std::to_string(L)); });
  return t;
}

// Per panel, the mean probability the row's scored positions put on their recall source.
void print_recall(const TaskConfig& task, const Batch& batch, int64_t row, const std::vector<Panel>& panels) {
  const int64_t T = batch.inputs.shape()[1];
  const int32_t* x = batch.inputs.data() + row * T;
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (query, source)
  for (int64_t t = 0; t < T; ++t)
    if (batch.mask[size_t(row * T + t)]) {
      const int64_t s = task.behaviour().recall_source(x, t);
      if (s >= 0 && s <= t) pairs.emplace_back(t, s);
    }
  if (pairs.empty()) {
    std::printf("recall: task %s names no position its answers are recalled from; skipped\n", task.task.c_str());
    return;
  }
  std::printf("recall: mean probability the %zu scored position%s put%s on the earlier position holding the answer\n"
              " layer  head  recall\n", pairs.size(), pairs.size() == 1 ? "" : "s", pairs.size() == 1 ? "s" : "");
  const Panel* best = nullptr;
  double best_mean = -1;
  for (const Panel& p : panels) {
    double sum = 0;
    for (auto [q, s] : pairs) sum += p.probs[q * T + s];
    const double mean = sum / double(pairs.size());
    std::printf("%6lld  %4lld  %6.4f\n", (long long)p.layer, (long long)p.head, mean);
    if (mean > best_mean) best_mean = mean, best = &p;
  }
  std::printf("strongest recall head: layer %lld head %lld (%.4f)\n", (long long)best->layer, (long long)best->head,
              best_mean);
}

}  // namespace

void attention_map(const AttnMapRequest& req) {
  const std::string& path = req.checkpoint;
  LoadedModel loaded = load_model(path);
  const RunConfig& saved = loaded.config;
  if (saved.model.family != "attention")
    throw UsageError("attn-map: checkpoint " + path + " holds model " + saved.model.family +
                     " (allowed: model attention, whose heads have attention probabilities)");
  const int64_t n_layers = saved.model.n_layers;
  if (req.layer >= n_layers)
    throw UsageError("--layer " + std::to_string(req.layer) + " is out of range (allowed: 0.." +
                     std::to_string(n_layers - 1) + ", the checkpoint's layers)");
  const TaskConfig task = task_at_length(loaded, req.seq_len);
  const int64_t row = req.row;
  const uint64_t seed = uint64_t(saved.run.seed);
  const Batch batch = make_batch(task, stream_seed(seed, "eval"), 0, row + 1);
  const int64_t T = batch.inputs.shape()[1];
  const std::vector<int32_t> tokens(batch.inputs.data() + row * T, batch.inputs.data() + (row + 1) * T);
  const IntTensor ids(Shape{1, T}, tokens);

  LanguageModel& model = *loaded.model;
  const AttentionRecording rec = record_attention(model, ids);
  Tensor logits;
  {
    NoGradGuard no_grad;
    logits = model.forward(ids);
  }
  double diff = 0;
  for (int64_t i = 0; i < logits.numel(); ++i)
    diff = std::max(diff, double(std::fabs(logits.data()[i] - rec.logits.data()[i])));

  const int64_t heads = rec.probs[0].shape()[1];
  std::vector<Panel> panels;
  for (int64_t l = 0; l < n_layers; ++l)
    if (req.layer < 0 || req.layer == l)
      for (int64_t h = 0; h < heads; ++h) panels.push_back({l, h, rec.probs[size_t(l)].data() + h * T * T});

  std::printf("checkpoint %s: step %lld, model attention (%lld layers, %lld heads, pos %s), task %s, seq_len %lld\n",
              path.c_str(), (long long)loaded.meta.step, (long long)n_layers, (long long)heads, saved.model.pos.c_str(),
              task.task.c_str(), (long long)T);
  std::printf("row %lld of the evaluation stream (seed %llu)%s%s\n", (long long)row, (unsigned long long)seed,
              T <= 64 ? ": " : "", T <= 64 ? int_list_text(std::vector<int64_t>(tokens.begin(), tokens.end()), ' ').c_str() : "");
  std::printf("recorded forward (naive kernel) vs forward: max |logit difference| %.3g\n", diff);
  print_recall(task, batch, row, panels);

  const std::string png = !req.out.empty() ? req.out : (fs::path(path).parent_path() / "attn-map.png").string();
  const std::string gnuplot = find_gnuplot();
  std::string data = req.data;
  if (gnuplot.empty() && data.empty()) data = fs::path(png).replace_extension(".txt").string();
  ScratchFiles scratch;
  const std::string header = "# trilemma attn-map " + path + ": row " + std::to_string(row) + ", seq_len " +
                             std::to_string(T) + ", task " + task.task + "\n";
  const std::string text = probabilities_text(header, panels, T);
  const std::string data_for_gnuplot = data.empty() ? scratch.add(".txt") : data;
  write_text_atomically(data_for_gnuplot, text);
  if (!data.empty()) std::printf("data: %s\n", data.c_str());
  if (gnuplot.empty()) {
    std::printf("png skipped: gnuplot not found (set TRILEMMA_GNUPLOT or put gnuplot on PATH)\n");
    return;
  }
  const std::string script = scratch.add(".gp"), log = scratch.add(".log");
  const std::string title = fs::path(path).filename().string() + ", step " + std::to_string(loaded.meta.step) +
                            ", task " + task.task + ", row " + std::to_string(row);
  write_atomically(png, [&](const std::string& tmp) {
    write_text_atomically(script, gnuplot_script(tmp, data_for_gnuplot, panels, heads, tokens, title));
    const std::string error = run_gnuplot(gnuplot, script, log);
    if (!error.empty()) throw Error("attn-map: " + error);
  });
  std::printf("png: %s\n", png.c_str());
}

}  // namespace tri::report
