#include "data/batch_dump.hpp"

#include "framework/io/atomic_file.hpp"
#include "framework/io/h5.hpp"

namespace tri {

namespace {

void append(BatchDump& d, const Batch& b) {
  d.inputs.insert(d.inputs.end(), b.inputs.values().begin(), b.inputs.values().end());
  d.targets.insert(d.targets.end(), b.targets.values().begin(), b.targets.values().end());
  d.mask.insert(d.mask.end(), b.mask.begin(), b.mask.end());
}

}  // namespace

BatchDump batch_dump(const Batch& batch) {
  BatchDump d;
  d.shape = batch.inputs.shape();
  append(d, batch);
  return d;
}

BatchDump stream_dump(const TaskConfig& c, uint64_t stream, int64_t first, int64_t n, int64_t rows) {
  BatchDump d;
  d.shape = Shape{n, rows, c.length()};
  for (int64_t i = 0; i < n; ++i) append(d, make_batch(c, stream, uint64_t(first + i), rows));
  return d;
}

void write_batch_dump(const std::string& path, const BatchDump& d) {
  write_atomically(path, [&](const std::string& tmp) {
    H5File f(tmp, H5File::Mode::create);
    f.write_ints("/inputs", d.shape, d.inputs);
    f.write_ints("/targets", d.shape, d.targets);
    f.write_ints("/mask", d.shape, d.mask);
    if (d.logits) f.write("/logits", *d.logits);
    for (const auto& attr : d.attrs) {
      const std::string& name = attr.first;  // clang 14 cannot capture a structured binding
      std::visit([&](const auto& v) { f.set_attr("/", name, v); }, attr.second);
    }
    f.flush();
  });
}

}  // namespace tri
