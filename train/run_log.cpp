#include "train/run_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/config/options.hpp"
#include "framework/io/atomic_file.hpp"
#include "train/run_config.hpp"

namespace tri::train {

namespace {

const char* kCsvHeader = "step,split,loss,acc,seq_acc,grad_norm,lr,ms_per_step,tokens_per_s,elapsed_s\n";

std::string csv_field(double v) {
  std::string s = ",";
  if (std::isfinite(v)) s += exact_number(v);
  return s;
}

// Keeps the CSV header and the rows of steps <= last_step; later rows and torn ones go.
void drop_rows_after(const std::string& path, int64_t last_step) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  bool dropped = false;
  const std::string header(kCsvHeader, std::strlen(kCsvHeader) - 1);
  while (std::getline(in, line)) {
    const int64_t step = metrics_line_step(line);
    if (line != header && (step < 0 || step > last_step)) {  // later rows, or a torn one
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (dropped) write_text_atomically(path, kept);
}

FILE* open_append(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) throw Error("cannot open " + path + " for writing: " + std::strerror(errno));
  return f;
}

}  // namespace

int64_t metrics_line_step(const std::string& line) {
  if (!line.empty() && line[0] == '{') {  // a metrics.jsonl row
    const Json row = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    return row.is_object() && row.contains("step") && row["step"].is_number_integer() ? row["step"].get<int64_t>() : -1;
  }
  const char* s = line.c_str();  // a metrics.csv row: the step is the first field
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  return end != s && *end == ',' ? v : -1;
}

MetricsLog::MetricsLog(const std::string& dir, int64_t resume_step)
    : jsonl_path_(dir + "/metrics.jsonl"), csv_path_(dir + "/metrics.csv") {
  const std::string &jsonl = jsonl_path_, &csv = csv_path_;
  if (resume_step >= 0) {
    drop_rows_after(jsonl, resume_step);
    drop_rows_after(csv, resume_step);
  }
  const bool new_csv = !std::filesystem::exists(csv);
  jsonl_ = open_append(jsonl);
  csv_ = open_append(csv);
  if (new_csv && (std::fputs(kCsvHeader, csv_) < 0 || std::fflush(csv_) != 0))
    throw Error("cannot write " + csv + ": " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (jsonl_) std::fclose(jsonl_);
  if (csv_) std::fclose(csv_);
}

void MetricsLog::append(const MetricsRow& r) {
  // NaN fields (those a row does not have) are written as null.
  Json row = {{"step", r.step},           {"split", r.split},        {"loss", r.loss},
                    {"acc", r.acc},             {"seq_acc", r.seq_acc},    {"grad_norm", r.grad_norm},
                    {"lr", r.lr},               {"ms_per_step", r.ms_per_step}, {"tokens_per_s", r.tokens_per_s},
                    {"elapsed_s", r.elapsed_s}};
  for (const auto& [name, value] : r.extra) row[name] = value;
  const std::string j = row.dump() + "\n";
  std::string c = std::to_string(r.step) + "," + r.split + csv_field(r.loss) + csv_field(r.acc) +
                  csv_field(r.seq_acc) + csv_field(r.grad_norm) + csv_field(r.lr) +
                  csv_field(r.ms_per_step) + csv_field(r.tokens_per_s) + csv_field(r.elapsed_s) + "\n";
  // Each row is flushed at once; a failed write names its file and the OS error. A torn last
  // line (a full disk mid-row) is dropped when the run resumes (drop_rows_after).
  auto put = [](FILE* f, const std::string& text, const std::string& path) {
    if (std::fputs(text.c_str(), f) < 0 || std::fflush(f) != 0)
      throw Error("cannot append to " + path + ": " + std::strerror(errno));
  };
  put(jsonl_, j, jsonl_path_);
  put(csv_, c, csv_path_);
}

// ---- progress

Progress::Progress(const std::string& mode, int64_t first_step, int64_t total_steps)
    : first_(first_step), total_(total_steps), start_(std::chrono::steady_clock::now()) {
  if (mode == "none") mode_ = Mode::none;
  else if (mode == "lines") mode_ = Mode::lines;
  else if (mode == "bar") mode_ = Mode::bar;
  else mode_ = ::isatty(STDERR_FILENO) ? Mode::bar : Mode::lines;
  last_draw_ = start_;
}

std::string Progress::eta(int64_t step) const {
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int64_t done = step - first_;
  if (done <= 0) return "?";
  const int64_t left = int64_t(sec / double(done) * double(total_ - step) + 0.5);
  char buf[32];
  if (left >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)left / 3600, (long long)left / 60 % 60,
                  (long long)left % 60);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)left / 60, (long long)left % 60);
  return buf;
}

void Progress::draw(const MetricsRow& r) {
  const int width = 24;
  const int filled = int(double(width) * double(r.step) / double(total_));
  std::string bar(size_t(filled), '#');
  bar.resize(width, '.');
  char acc[16] = "-";  // the accuracy of the last logged step; none before the first
  if (std::isfinite(r.acc)) std::snprintf(acc, sizeof acc, "%.3f", r.acc);
  std::fprintf(stderr, "\r\033[K%lld/%lld [%s] %3.0f%%  loss %.4f  acc %s  %.0f tok/s  ETA %s",
               (long long)r.step, (long long)total_, bar.c_str(), 100.0 * double(r.step) / double(total_),
               r.loss, acc, r.tokens_per_s, eta(r.step).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::step(const MetricsRow& r, bool logged) {
  if (mode_ == Mode::lines && logged) {
    std::printf("step %lld/%lld  loss %.4f  acc %.3f  gnorm %.3f  lr %.2e  %.2f ms/step  %.0f tok/s  ETA %s\n",
                (long long)r.step, (long long)total_, r.loss, r.acc, r.grad_norm, r.lr, r.ms_per_step,
                r.tokens_per_s, eta(r.step).c_str());
    std::fflush(stdout);
  } else if (mode_ == Mode::bar) {
    const auto now = std::chrono::steady_clock::now();
    if (logged || r.step == total_ || now - last_draw_ > std::chrono::milliseconds(200)) {
      last_draw_ = now;
      if (std::isfinite(r.tokens_per_s)) draw(r);
    }
  }
}

void Progress::message(const std::string& line) {
  if (mode_ == Mode::none) return;
  if (drawn_) std::fputs("\r\033[K", stderr);
  drawn_ = false;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Progress::finish() {
  if (drawn_) std::fputs("\n", stderr);
  drawn_ = false;
}

}  // namespace tri::train
