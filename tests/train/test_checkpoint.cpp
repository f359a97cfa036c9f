// train/checkpoint.hpp: a bit-exact round trip of model and AdamW state (and one more identical
// training step after it), the file as h5py sees it (spec paths and attributes), atomic writes,
// and corrupt or mismatched files rejected with a message naming the problem, nothing changed.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "framework/core/autograd.hpp"
#include "framework/optim/optim.hpp"
#include "framework/core/rng.hpp"
#include "models/lm.hpp"
#include "tests/compare.hpp"
#include "tests/run_binary.hpp"
#include "train/checkpoint.hpp"

using namespace tri;
using namespace tri::train;
using namespace trilemma_test;

namespace {

// A family, or "based": linear attention with Based's Taylor map and short convolutions.
ModelConfig small_config(const std::string& family, int64_t d_model = 16) {
  ModelConfig c = ModelConfig::of(family == "based" ? "linear" : family);
  c.vocab = 12;
  c.d_model = d_model;
  c.n_layers = 2;
  c.max_seq_len = 16;
  c.pos = family == "attention" ? "learned" : "none";
  c.tie_embeddings = false;  // a head of its own: the checkpoint holds lm_head.weight
  set_options(c, {{"n-heads", "2"}, {"bias", "1"}, {"d-state", "4"}, {"head-dim", "8"}, {"state-size", "4"}});
  if (family == "based") set_options(c, {{"feature-map", "taylor"}, {"feature-dim", "4"}, {"short-conv", "3"}});
  return c;
}

void train_step(LanguageModel& m, Optimizer& opt, uint64_t seed) {
  const IntTensor ids = random_ids(2, 8, m.config().vocab, seed);
  const IntTensor targets = random_ids(2, 8, m.config().vocab, seed + 1000);
  opt.zero_grad();
  backward(m.loss(ids, targets));
  opt.step();
}

CheckpointData sample_meta(const ModelConfig& c) {
  CheckpointData d;
  d.step = 2;
  d.tokens_seen = 32;
  d.config = {{"family", c.family}, {"d_model", std::to_string(c.d_model)}, {"seed", "5"}};
  Rng init(5);
  d.rng["init"] = {init.state()[0], init.state()[1], init.state()[2], init.state()[3]};
  d.rng["dropout"] = {7};
  d.rng["data"] = {123456789, 2};
  return d;
}

// A trained model and its optimizer.
struct Trained {
  LanguageModel model;
  AdamW opt;
  Trained(const ModelConfig& c, uint64_t seed, int steps)
      : model(c, seed), opt(model.parameters(), 3e-3) {
    for (int s = 0; s < steps; ++s) train_step(model, opt, 100 + s);
  }
};

std::vector<Tensor> snapshot(const Module& m) {
  std::vector<Tensor> out;
  for (const Parameter& p : m.parameters()) out.push_back(p.tensor.clone());
  return out;
}

bool same_parameters(const Module& m, const std::vector<Tensor>& snap) {
  std::vector<Parameter> ps = m.parameters();
  if (ps.size() != snap.size()) return false;
  for (size_t i = 0; i < ps.size(); ++i)
    if (!bit_equal(ps[i].tensor, snap[i])) return false;
  return true;
}

bool same_optimizer_state(const Optimizer& a, const Optimizer& b) {
  if (a.step_count() != b.step_count() || a.state().size() != b.state().size()) return false;
  for (const auto& [name, s] : a.state()) {
    auto it = b.state().find(name);
    if (it == b.state().end() || it->second.step != s.step) return false;
    for (const auto& [slot, t] : s.slots)
      if (!it->second.slots.count(slot) || !bit_equal(t, it->second.slots.at(slot))) return false;
  }
  return true;
}

int python(const std::string& code, const std::string& args, const fs::path& out = "/dev/null") {
  const fs::path script = scratch("script.py");
  write_text(script, code);
  const std::string cmd = "/usr/bin/python3 '" + script.string() + "' " + args + " >'" +
                          out.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool tmp_left_in(const fs::path& folder) {
  for (const auto& e : fs::directory_iterator(folder))
    if (contains(e.path().filename().string(), ".tmp")) return true;
  return false;
}

}  // namespace

TEST_CASE("checkpoint round trip is bit exact and training continues identically") {
  for (const std::string family : {"attention", "mamba", "based", "mamba2"}) {
    CAPTURE(family);
    const ModelConfig c = small_config(family);
    Trained a(c, 1, 2);
    const fs::path path = scratch("round_" + family + ".h5");
    const CheckpointData meta = sample_meta(c);
    write_checkpoint(path.string(), a.model, a.opt, meta);

    Trained b(c, 2, 0);  // other init, fresh optimizer
    CHECK_FALSE(same_parameters(b.model, snapshot(a.model)));
    b.opt.set_lr(1.0);
    const CheckpointData got = read_checkpoint(path.string(), b.model, &b.opt);
    CHECK(same_parameters(b.model, snapshot(a.model)));
    CHECK(same_optimizer_state(a.opt, b.opt));
    CHECK(b.opt.step_count() == 2);
    CHECK(b.opt.lr() == a.opt.lr());
    CHECK(got.step == meta.step);
    CHECK(got.tokens_seen == meta.tokens_seen);
    CHECK(got.config == meta.config);
    CHECK(got.rng == meta.rng);
    CHECK(got.optimizer_name == "adamw");
    CHECK(got.optimizer_step == 2);
    CHECK(got.optimizer_hparams.at("beta2") == 0.999);
    CHECK(got.optimizer_hparams.at("lr") == a.opt.lr());

    const CheckpointData only_meta = read_checkpoint_meta(path.string());
    CHECK(only_meta.config == meta.config);
    CHECK(only_meta.step == meta.step);

    train_step(a.model, a.opt, 500);
    train_step(b.model, b.opt, 500);
    CHECK(same_parameters(b.model, snapshot(a.model)));
    CHECK(same_optimizer_state(a.opt, b.opt));
  }
}

TEST_CASE("checkpoint opens with h5py and has the spec's paths and attributes") {
  const ModelConfig c = small_config("attention");
  Trained a(c, 1, 2);
  const fs::path path = scratch("h5py.h5"), listing = scratch("listing.txt");
  const CheckpointData meta = sample_meta(c);
  write_checkpoint(path.string(), a.model, a.opt, meta);
  const std::string code = R"(import sys, h5py
def text(v): return v.decode() if isinstance(v, bytes) else str(v)
def shape(d): return "x".join(str(n) for n in d.shape)
f = h5py.File(sys.argv[1], "r")
for k in ("format", "format_version", "step", "tokens_seen"): print("root", k, text(f.attrs[k]))
for k, v in f["config"].attrs.items(): print("config", k, text(v))
for k, d in f["model"].items(): print("model", k, d.dtype, shape(d))
for k in ("name", "step"): print("optimizer", k, text(f["optimizer"].attrs[k]))
print("optimizer lr", repr(float(f["optimizer"].attrs["lr"])))
for slot in ("exp_avg", "exp_avg_sq"):
    for k, d in f["optimizer"][slot].items(): print(slot, k, d.dtype, shape(d), int(d.attrs["step"]))
for k, d in f["rng"].items(): print("rng", k, " ".join(str(int(x)) for x in d[()]))
)";
  REQUIRE(python(code, "'" + path.string() + "'", listing) == 0);
  const std::string out = read_text(listing);
  CAPTURE(out);
  CHECK(contains(out, "root format trilemma-checkpoint\n"));
  CHECK(contains(out, "root format_version 1\n"));
  CHECK(contains(out, "root step 2\n"));
  CHECK(contains(out, "root tokens_seen 32\n"));
  for (const auto& [k, v] : meta.config) CHECK(contains(out, "config " + k + " " + v + "\n"));
  CHECK(contains(out, "optimizer name adamw\n"));
  CHECK(contains(out, "optimizer step 2\n"));
  CHECK(contains(out, "optimizer lr 0.003\n"));  // the lr the optimizer was built with
  auto dims = [](const Shape& s) {
    std::string t;
    for (int i = 0; i < s.nd; ++i) {
      if (i) t += 'x';
      t += std::to_string(s.d[i]);
    }
    return t;
  };
  for (const Parameter& p : a.model.parameters()) {
    CHECK(contains(out, "model " + p.name + " float32 " + dims(p.tensor.shape()) + "\n"));
    for (const char* slot : {"exp_avg", "exp_avg_sq"})
      CHECK(contains(out, std::string(slot) + " " + p.name + " float32 " +
                              dims(p.tensor.shape()) + " 2\n"));
  }
  // PyTorch shapes: a linear weight is [out, in].
  CHECK(contains(out, "model backbone.layers.0.mlp.fc1.weight float32 64x16\n"));
  CHECK(contains(out, "rng data 123456789 2\n"));
  CHECK(contains(out, "rng dropout 7\n"));
}

TEST_CASE("checkpoint writes are atomic and failures leave existing files untouched") {
  const ModelConfig c = small_config("attention");
  Trained a(c, 1, 2);
  const CheckpointData meta = sample_meta(c);
  const fs::path folder = scratch("atomic");
  fs::create_directories(folder);
  const fs::path path = folder / "ck.h5";

  write_checkpoint(path.string(), a.model, a.opt, meta);
  CHECK_FALSE(tmp_left_in(folder));
  const std::string first = read_text(path);

  // Overwriting replaces the whole file.
  train_step(a.model, a.opt, 9);
  write_checkpoint(path.string(), a.model, a.opt, meta);
  CHECK_FALSE(tmp_left_in(folder));
  CHECK(read_text(path) != first);
  Trained b(c, 2, 0);
  read_checkpoint(path.string(), b.model, &b.opt);
  CHECK(same_parameters(b.model, snapshot(a.model)));

  // A parent that is a regular file: the write fails, naming the path.
  const fs::path bad_parent = folder / "ck.h5" / "inner.h5";
  std::string err = error_of([&] { write_checkpoint(bad_parent.string(), a.model, a.opt, meta); });
  CHECK(contains(err, bad_parent.string()));
  CHECK(contains(err, "not a folder"));
  err = error_of([&] { write_checkpoint((folder / "no/such/ck.h5").string(), a.model, a.opt, meta); });
  CHECK(contains(err, "no/such/ck.h5"));

  // A target that cannot be replaced (a folder): the rename fails after the temporary file was
  // written; it is removed and the target is untouched.
  const fs::path dir_target = folder / "a_folder";
  fs::create_directories(dir_target / "keep");
  err = error_of([&] { write_checkpoint(dir_target.string(), a.model, a.opt, meta); });
  CHECK(contains(err, dir_target.string()));
  CHECK(fs::is_directory(dir_target / "keep"));
  CHECK_FALSE(tmp_left_in(folder));

  // A refused write leaves the existing checkpoint as it was.
  const std::string before = read_text(path);
  CheckpointData no_config = meta;
  no_config.config.clear();
  CHECK(contains(error_of([&] { write_checkpoint(path.string(), a.model, a.opt, no_config); }),
                 "empty config"));
  CHECK(read_text(path) == before);
  CHECK_FALSE(tmp_left_in(folder));

  // Non-finite values are never written: a NaN in a parameter, an Inf in the optimizer state.
  const Parameter p0 = a.model.parameters()[1];
  const float kept = p0.tensor.data()[3];
  p0.tensor.data()[3] = NAN;
  CHECK(contains(error_of([&] { write_checkpoint(path.string(), a.model, a.opt, meta); }),
                 "parameter '" + p0.name + "' holds a NaN or Inf; not written"));
  p0.tensor.data()[3] = kept;
  for (const auto& [param, state] : a.opt.state()) {
    Tensor slot = state.slots.begin()->second;
    slot.data()[0] = INFINITY;
    CHECK(contains(error_of([&] { write_checkpoint(path.string(), a.model, a.opt, meta); }),
                   "optimizer state " + state.slots.begin()->first + " of '" + param + "' holds a NaN or Inf"));
    slot.data()[0] = 0.f;
    break;
  }
  CHECK(read_text(path) == before);
  CHECK_FALSE(tmp_left_in(folder));
}

TEST_CASE("corrupt or mismatched checkpoints are rejected and change nothing") {
  const ModelConfig c = small_config("attention");
  Trained a(c, 1, 2);
  const CheckpointData meta = sample_meta(c);
  const fs::path good = scratch("good.h5");
  write_checkpoint(good.string(), a.model, a.opt, meta);

  Trained target(c, 3, 1);  // its own parameters and optimizer state
  const std::vector<Tensor> params_before = snapshot(target.model);
  Trained reference(c, 3, 1);  // the same state, for comparing the optimizer
  auto expect_rejected = [&](const fs::path& file, const std::string& problem) {
    CAPTURE(file);
    const std::string err = error_of([&] { read_checkpoint(file.string(), target.model, &target.opt); });
    CAPTURE(err);
    CHECK(contains(err, file.string()));
    CHECK(contains(err, problem));
    CHECK(err.find('\n') == std::string::npos);
    CHECK(same_parameters(target.model, params_before));
    CHECK(same_optimizer_state(target.opt, reference.opt));
  };

  expect_rejected(scratch("missing.h5"), "no such file");

  const std::string bytes = read_text(good);
  const fs::path truncated = scratch("truncated.h5");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_rejected(truncated, "not a valid HDF5 file");

  const fs::path text = scratch("text.h5");
  write_text(text, "step = 2\nthis is not HDF5\n");
  expect_rejected(text, "not a valid HDF5 file");
  CHECK(contains(error_of([&] { read_checkpoint_meta(text.string()); }), "not a valid HDF5 file"));

  Trained wide(small_config("attention", 32), 1, 1);
  const fs::path other = scratch("other.h5");
  write_checkpoint(other.string(), wide.model, wide.opt, sample_meta(wide.model.config()));
  expect_rejected(other, "shape");
  {  // without the optimizer the model's own check reports it
    const std::string err = error_of([&] { read_checkpoint(other.string(), target.model, nullptr); });
    CHECK(contains(err, "has shape"));
    CHECK(same_parameters(target.model, params_before));
  }

  const fs::path v2 = scratch("v2.h5");
  fs::copy_file(good, v2);
  REQUIRE(python("import sys, h5py\nh5py.File(sys.argv[1], 'r+').attrs['format_version'] = 2\n",
                 "'" + v2.string() + "'") == 0);
  expect_rejected(v2, "format_version 2");
  CHECK(contains(error_of([&] { read_checkpoint_meta(v2.string()); }), "format_version 2"));

  const fs::path no_head = scratch("no_head.h5");
  fs::copy_file(good, no_head);
  REQUIRE(python("import sys, h5py\ndel h5py.File(sys.argv[1], 'r+')['model/lm_head.weight']\n",
                 "'" + no_head.string() + "'") == 0);
  expect_rejected(no_head, "lm_head.weight");

  const fs::path no_step = scratch("no_step.h5");
  fs::copy_file(good, no_step);
  REQUIRE(python("import sys, h5py\ndel h5py.File(sys.argv[1], 'r+').attrs['tokens_seen']\n",
                 "'" + no_step.string() + "'") == 0);
  expect_rejected(no_step, "tokens_seen");

  const fs::path not_ours = scratch("not_ours.h5");
  REQUIRE(python("import sys, h5py\nh5py.File(sys.argv[1], 'w').attrs['format'] = 'something-else'\n",
                 "'" + not_ours.string() + "'") == 0);
  expect_rejected(not_ours, "format");

  // Unknown extra fields are ignored.
  const fs::path extra = scratch("extra.h5");
  fs::copy_file(good, extra);
  REQUIRE(python("import sys, h5py\nf = h5py.File(sys.argv[1], 'r+')\nf.attrs['future'] = 1\n"
                 "f['future/data'] = [1.0, 2.0]\nf['config'].attrs['new_option'] = 3\n",
                 "'" + extra.string() + "'") == 0);
  Trained fresh(c, 4, 0);
  const CheckpointData got = read_checkpoint(extra.string(), fresh.model, &fresh.opt);
  CHECK(same_parameters(fresh.model, snapshot(a.model)));
  CHECK(got.config.at("new_option") == "3");
}

TEST_CASE("trilemma inspect shows a checkpoint and rejects a bad one") {
  const ModelConfig c = small_config("mamba");
  Trained a(c, 1, 2);
  const fs::path path = scratch("inspect.h5"), text = scratch("inspect.txt");
  write_checkpoint(path.string(), a.model, a.opt, sample_meta(c));
  Run r = run("inspect '" + path.string() + "'");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("step ") != std::string::npos);
  for (const Parameter& p : a.model.parameters()) {
    INFO(p.name);
    CHECK(r.out.find(p.name) != std::string::npos);
  }
  CHECK(r.out.find(std::to_string(a.model.num_parameters())) != std::string::npos);  // the total

  write_text(text, "not a checkpoint\n");
  Run bad = run("inspect '" + text.string() + "'");
  CHECK(bad.code == 1);
  CHECK(bad.err.find(text.string()) != std::string::npos);
  Run missing = run("inspect");
  CHECK(missing.code == 2);
}
