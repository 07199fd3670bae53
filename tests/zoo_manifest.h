#pragma once
// The model zoo's manifest (zoo/manifest.json) for tests that walk every zoo model.

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "export/onnx/onnx_import.h"

namespace kiln::testing {

inline const std::string& zoo_dir() {
  static const std::string dir = std::string(KILN_SOURCE_DIR) + "/zoo";
  return dir;
}

/// The parsed manifest (`file` relative to zoo/: the model zoo's, or "ops/manifest.json",
/// the op zoo's); a discarded json when it cannot be read.
inline nlohmann::json zoo_manifest(const std::string& file = "manifest.json") {
  std::ifstream f(zoo_dir() + "/" + file);
  return nlohmann::json::parse(f, nullptr, false);
}

/// Names of the models of manifest `file` (relative to zoo/), in manifest order.
inline std::vector<std::string> manifest_names(const std::string& file) {
  std::vector<std::string> names;
  nlohmann::json m = zoo_manifest(file);
  if (m.is_discarded()) return names;
  for (const auto& x : m["models"]) names.push_back(x["name"]);
  return names;
}

/// Names of the op zoo's models (zoo/ops/make_ops.py), in manifest order.
inline std::vector<std::string> op_zoo_names() { return manifest_names("ops/manifest.json"); }

/// Names of the zoo's models, in manifest order.
inline std::vector<std::string> zoo_model_names() { return manifest_names("manifest.json"); }

/// Names of the quantized zoo's models (zoo/quantized/make_quantized.py).
inline std::vector<std::string> quantized_zoo_names() { return manifest_names("quantized/manifest.json"); }

/// The manifest entry of model `name` (null when absent).
inline nlohmann::json zoo_model(const std::string& name) {
  const nlohmann::json all = zoo_manifest();  // kept alive: the loop reads into it
  for (const auto& x : all["models"])
    if (x["name"] == name) return x;
  return nullptr;
}

/// `kiln export` options of a zoo model: its `--dim` and `--input` contract from export_args,
/// and `delegate`.
inline exporter::ExportOptions zoo_export_options(const nlohmann::json& model, const std::string& delegate = "xnnpack") {
  exporter::ExportOptions opts;
  opts.delegate = delegate;
  const auto& args = model["export_args"];
  for (size_t k = 0; k + 1 < args.size(); k += 2)
    if (args[k] == "--dim") {
      auto d = exporter::parse_dim_arg(args[k + 1].get<std::string>());
      if (d.ok()) opts.dims.push_back(*d);
    } else if (args[k] == "--input") {
      auto in = exporter::parse_input_arg(args[k + 1].get<std::string>());
      if (in.ok()) opts.inputs.push_back(*in);
    }
  return opts;
}

}  // namespace kiln::testing
