#include "train/checkpoint.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "framework/io/h5.hpp"
#include "framework/io/state_io.hpp"
#include "framework/io/atomic_file.hpp"

namespace tri::train {

namespace fs = std::filesystem;

namespace {

const char* kFormat = "trilemma-checkpoint";
// Rng states are a few words; a larger dataset is a corrupt file, not something to allocate.
constexpr int64_t kMaxRngWords = 64;

std::string slot_path(const std::string& slot, const std::string& param) {
  return "/optimizer/" + slot + "/" + param;
}

void write_contents(const std::string& file, const Module& model, const Optimizer& opt,
                    const CheckpointData& meta) {
  H5File f(file, H5File::Mode::create);
  f.set_attr("/", "format", std::string(kFormat));
  f.set_attr("/", "format_version", kCheckpointFormatVersion);
  f.set_attr("/", "step", meta.step);
  f.set_attr("/", "tokens_seen", meta.tokens_seen);
  for (const auto& [name, value] : meta.config) f.set_attr("/config", name, value);

  save_parameters(f, model, "/model");

  f.set_attr("/optimizer", "name", std::string(opt.name()));
  f.set_attr("/optimizer", "step", opt.step_count());
  std::map<std::string, double> h = opt.hyperparameters();
  for (const auto& [name, value] : meta.optimizer_hparams) h[name] = value;
  for (const auto& [name, value] : h) f.set_attr("/optimizer", name, value);
  for (const auto& [param, state] : opt.state())
    for (const auto& [slot, tensor] : state.slots) {
      f.write(slot_path(slot, param), tensor);
      f.set_attr(slot_path(slot, param), "step", state.step);
    }

  for (const auto& [name, words] : meta.rng) f.write_u64("/rng/" + name, words);
  for (const auto& [name, value] : meta.run) f.set_attr("/run", name, value);
  f.flush();
}  // closed here, before the fsync

// A config value of any scalar type as text (h5py and future writers may not use strings).
std::string attr_as_text(const H5File& f, const std::string& obj, const std::string& name) {
  try {
    return f.attr_string(obj, name);
  } catch (const Error&) {
  }
  try {
    return std::to_string(f.attr_int(obj, name));
  } catch (const Error&) {
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", f.attr_double(obj, name));
  return buf;
}

double attr_as_double(const H5File& f, const std::string& obj, const std::string& name) {
  try {
    return f.attr_double(obj, name);
  } catch (const Error&) {
    return double(f.attr_int(obj, name));
  }
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error("checkpoint " + path + ": " + what);
}

void require_attr(const H5File& f, const std::string& path, const std::string& obj,
                  const std::string& name) {
  if (!f.has_attr(obj, name))
    bad(path, "missing required attribute '" + name + "' on " + obj);
}

CheckpointData read_meta(const H5File& f, const std::string& path) {
  require_attr(f, path, "/", "format");
  const std::string format = f.attr_string("/", "format");
  if (format != kFormat)
    bad(path, "format is '" + format + "', expected '" + kFormat + "'");
  require_attr(f, path, "/", "format_version");
  const int64_t version = f.attr_int("/", "format_version");
  if (version < 1 || version > kCheckpointFormatVersion)
    bad(path, "format_version " + std::to_string(version) + " is not supported (this reader knows 1.." +
                  std::to_string(kCheckpointFormatVersion) + ")");

  CheckpointData d;
  require_attr(f, path, "/", "step");
  require_attr(f, path, "/", "tokens_seen");
  d.step = f.attr_int("/", "step");
  d.tokens_seen = f.attr_int("/", "tokens_seen");

  for (const char* group : {"/config", "/model", "/optimizer", "/rng"})
    if (!f.exists(group)) bad(path, std::string("missing required group ") + group);
  for (const std::string& name : f.attr_names("/config"))
    d.config[name] = attr_as_text(f, "/config", name);

  require_attr(f, path, "/optimizer", "name");
  require_attr(f, path, "/optimizer", "step");
  d.optimizer_name = f.attr_string("/optimizer", "name");
  d.optimizer_step = f.attr_int("/optimizer", "step");
  for (const std::string& name : f.attr_names("/optimizer"))
    if (name != "name" && name != "step") d.optimizer_hparams[name] = attr_as_double(f, "/optimizer", name);

  for (const std::string& name : f.list("/rng")) {
    const std::string p = "/rng/" + name;
    if (f.shape_of(p).numel() > kMaxRngWords)
      bad(path, "rng state '" + name + "' has more than " + std::to_string(kMaxRngWords) + " words");
    d.rng[name] = f.read_u64(p);
  }
  if (f.exists("/run"))
    for (const std::string& name : f.attr_names("/run")) d.run[name] = attr_as_double(f, "/run", name);
  return d;
}

// Opens an existing checkpoint; a missing path and a file HDF5 cannot open get their own message.
std::unique_ptr<H5File> open_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) bad(path, "no such file");
  try {
    return std::make_unique<H5File>(path, H5File::Mode::read);
  } catch (const Error& e) {
    bad(path, std::string("not a valid HDF5 file (truncated, corrupt or another format): ") + e.what());
  }
}

}  // namespace

void write_checkpoint(const std::string& path, const Module& model, const Optimizer& opt,
                      const CheckpointData& meta) {
  const std::string where = "write_checkpoint " + path + ": ";
  if (meta.config.empty()) throw Error(where + "empty config (needed to rebuild the model)");
  if (meta.rng.empty()) throw Error(where + "no rng state (needed to resume bit for bit)");
  // A checkpoint never holds a NaN or Inf: a run that made one keeps its last good checkpoint.
  for (const Parameter& p : model.parameters())
    if (!p.tensor.all_finite())
      throw Error(where + "parameter '" + p.name + "' holds a NaN or Inf; not written");
  for (const auto& [param, state] : opt.state())
    for (const auto& [slot, tensor] : state.slots)
      if (!tensor.all_finite())
        throw Error(where + "optimizer state " + slot + " of '" + param + "' holds a NaN or Inf; not written");
  try {
    write_atomically(path, [&](const std::string& tmp) { write_contents(tmp, model, opt, meta); });
  } catch (const Error& e) {
    throw Error("write_checkpoint " + std::string(e.what()));
  }
}

namespace {
int64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : int64_t(n);
}
constexpr int64_t kRoom = int64_t(64) << 20;  // 64-byte alignment per tensor, scratch buffers
}  // namespace

CheckpointSizeLimit::CheckpointSizeLimit(const std::string& path) : CheckpointSizeLimit(path, file_bytes(path)) {}

CheckpointSizeLimit::CheckpointSizeLimit(const std::string& path, int64_t bytes)
    : TensorMemoryLimit(memory_live_bytes() + bytes + kRoom,
                        "checkpoint " + path + ": its config declares a model larger than the file (" +
                            std::to_string(bytes) + " bytes) holds: corrupt") {}

CheckpointData read_checkpoint_meta(const std::string& path) {
  return read_meta(*open_checkpoint(path), path);
}

CheckpointData read_checkpoint(const std::string& path, Module& model, Optimizer* opt) {
  std::unique_ptr<H5File> file = open_checkpoint(path);
  const H5File& f = *file;
  CheckpointData d = read_meta(f, path);

  // Optimizer slots: checked against the model's parameters and read before anything changes.
  std::map<std::string, ParamState> states;
  if (opt) {
    if (d.optimizer_name != opt->name())
      bad(path, "optimizer is '" + d.optimizer_name + "' in the file, '" + opt->name() + "' here");
    std::map<std::string, Shape> shapes;
    for (const Parameter& p : model.parameters()) shapes[p.name] = p.tensor.shape();
    const std::vector<std::string>& slots = opt->slot_names();
    if (!slots.empty()) {
      const std::string first = "/optimizer/" + slots[0];
      const std::vector<std::string> params =
          f.exists(first) ? f.list(first) : std::vector<std::string>{};
      for (const std::string& param : params) {
        auto it = shapes.find(param);
        if (it == shapes.end())
          bad(path, "optimizer state for unknown parameter '" + param + "'");
        ParamState s;
        for (const std::string& slot : slots) {
          const std::string p = slot_path(slot, param);
          if (!f.exists(p)) bad(path, "missing optimizer slot " + p);
          const Shape shape = f.shape_of(p);
          if (shape != it->second)
            bad(path, "optimizer slot " + p + " has shape " + shape.str() + ", the parameter has " +
                          it->second.str());
          s.slots[slot] = f.read(p);
        }
        require_attr(f, path, slot_path(slots[0], param), "step");
        s.step = f.attr_int(slot_path(slots[0], param), "step");
        states[param] = std::move(s);
      }
    }
    if (d.optimizer_step < 0) bad(path, "negative optimizer step");
    auto lr = d.optimizer_hparams.find("lr");
    if (lr != d.optimizer_hparams.end() && !(lr->second >= 0)) bad(path, "optimizer lr must be >= 0");
  }

  load_parameters(f, model, "/model");  // checks every name and shape before writing
  if (opt) {
    for (const auto& [param, s] : states) opt->restore_state(param, s);
    opt->set_step_count(d.optimizer_step);
    auto lr = d.optimizer_hparams.find("lr");
    if (lr != d.optimizer_hparams.end()) opt->set_lr(lr->second);
  }
  return d;
}

}  // namespace tri::train
