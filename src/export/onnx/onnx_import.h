#pragma once
// kiln export: an ONNX model specialized to a stated shape contract, with its shape
// arithmetic folded into SymExprs and guards, written as a .kiln program.

#include <cstddef>
#include <string>

#include "export/export_options.h"
#include "export/pipeline.h"
#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::exporter {

/// Imports `model_path` under `opts` and appends its method to `program` (with --bucket, one
/// per size) through the export pipeline (pipeline.h).
Result<ExportReport> export_onnx(const std::string& model_path, const ExportOptions& opts,
                                 format::ProgramDesc* program);
/// The same for a serialized ModelProto in memory (fuzzing, embedding).
Result<ExportReport> export_onnx_bytes(const void* data, size_t size, const ExportOptions& opts, format::ProgramDesc* program);

/// `kiln inspect MODEL.onnx`: the model's inputs and outputs as declared, its dim names (where
/// each is used), what a trial export with every dim in [1, 4096] finds the model needs of
/// them, and the `kiln export` command line to start from.
Result<std::string> describe_onnx(const std::string& model_path);

}  // namespace kiln::exporter
