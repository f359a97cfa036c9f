#include "framework/io/state_io.hpp"

#include <set>

namespace tri {

namespace {
std::string dataset_path(const std::string& group, const std::string& name) {
  return (group.empty() || group.back() != '/' ? group + "/" : group) + name;
}
}  // namespace

void save_parameters(H5File& f, const Module& m, const std::string& group) {
  for (const Parameter& p : m.parameters()) f.write(dataset_path(group, p.name), p.tensor);
}

void load_parameters(const H5File& f, Module& m, const std::string& group) {
  const std::string where = f.filename() + " " + group;
  if (!f.exists(group)) throw Error("load_parameters: " + where + ": no such group");
  std::vector<Parameter> params = m.parameters();
  std::set<std::string> in_file;
  for (const std::string& name : f.list(group)) in_file.insert(name);

  // Check everything first, so a bad file never leaves the module half loaded.
  std::set<std::string> expected;
  for (const Parameter& p : params) {
    expected.insert(p.name);
    if (!in_file.count(p.name))
      throw Error("load_parameters: " + where + ": missing parameter '" + p.name + "' " +
                  p.tensor.shape().str());
    const Shape s = f.shape_of(dataset_path(group, p.name));
    if (s != p.tensor.shape())
      throw Error("load_parameters: " + where + ": parameter '" + p.name + "' has shape " +
                  s.str() + " in the file, the model expects " + p.tensor.shape().str());
  }
  for (const std::string& name : in_file)
    if (!expected.count(name))
      throw Error("load_parameters: " + where + ": unexpected parameter '" + name +
                  "' (the model has no parameter of that name)");

  std::vector<Tensor> values;
  for (const Parameter& p : params) values.push_back(f.read(dataset_path(group, p.name)));
  for (size_t i = 0; i < params.size(); ++i) params[i].tensor.copy_(values[i]);
}

}  // namespace tri
