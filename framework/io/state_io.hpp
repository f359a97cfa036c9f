// A module's parameters in an HDF5 group: one float32 dataset per parameter, named by its
// full dotted name and shaped as in PyTorch (`/model/backbone.layers.0.mixer.q_proj.weight`).
// The layout of docs/CHECKPOINT.md's /model group; h5py reads it into a torch state_dict with
// {k: torch.from_numpy(v[()]) for k, v in f["model"].items()}.
#pragma once
#include <string>

#include "framework/io/h5.hpp"
#include "framework/core/module.hpp"

namespace tri {

// Writes every parameter of `m` under `group` (created when missing).
void save_parameters(H5File& f, const Module& m, const std::string& group = "/model");

// Loads every parameter of `m` from `group`. All names and shapes are checked before any
// parameter is written: a parameter missing from the file, a dataset the module does not have
// or a shape that differs throws an Error naming the parameter, and leaves `m` unchanged.
void load_parameters(const H5File& f, Module& m, const std::string& group = "/model");

}  // namespace tri
