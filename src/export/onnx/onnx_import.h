#pragma once
// kiln export: an ONNX model specialized to a stated shape contract, with its shape
// arithmetic folded into SymExprs and guards, written as a .kiln program.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "export/export_options.h"
#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::exporter {

/// What export did, for its summary (tooling/export_report.h formats it) and the closing notes.
struct ExportReport {
  size_t onnx_nodes = 0;            ///< nodes in the main graph (subgraphs counted when inlined)
  size_t instructions = 0;
  size_t folded_constant_nodes = 0;  ///< ran at export on constant inputs
  size_t folded_shape_nodes = 0;     ///< shape arithmetic folded into SymExprs
  size_t removed_nodes = 0;          ///< Identity/Dropout/Constant/If/BatchNormalization folded into a Conv
  size_t runtime_branches = 0;       ///< If nodes whose condition is known only at run time (both blocks kept)
  size_t runtime_loops = 0;          ///< Loop/Scan nodes run as runtime loops (trip count from the dims, or too long to unroll)
  size_t views = 0;
  std::vector<std::string> inputs;   ///< "'pixels' f32 [batch, 3, H, W]"
  std::vector<std::string> outputs;
  std::vector<std::string> dims;     ///< "H in [32, 224] step 32"
  /// Dims the model's guards narrowed: "height: requested [1, 224], admissible [9, 224] (...)"
  std::vector<std::string> narrowed;
  std::vector<core::DimInfo> contract_dims;  ///< the program's dims (after narrowing)
  std::vector<std::string> guards;   ///< "H % 32 == 0 (node 'Add_57' (Add) ...)"
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  uint64_t arena_min_bytes = 0;  ///< the portable plan's arena with every dim at its minimum
  uint64_t constant_bytes = 0;
  std::map<std::string, int> ops;    ///< instructions by op
  int64_t opset = 0;
  std::string coverage;               ///< coverage_line() of the delegate, "" without one
  std::vector<std::string> declined;  ///< grouped: "Gather x19: op not supported by XNNPACK"
  uint64_t delegate_arena_bytes = 0;
  uint64_t delegate_lower_bound_bytes = 0;
  uint64_t delegate_arena_min_bytes = 0;
  /// "arena at the bound is 2.3 GiB (H=1024, W=1024), over the warning threshold of 1 GiB; ..."
  std::vector<std::string> warnings;
  std::vector<std::string> fusions;  ///< "LayerNormalization '/ln1/LayerNormalization' <- 9 nodes"
  std::vector<std::string> notes;    ///< buckets written, warnings
  size_t fused_nodes = 0;
};

/// Imports `model_path` under `opts` and appends one method to `program`.
Result<ExportReport> export_onnx(const std::string& model_path, const ExportOptions& opts,
                                 format::ProgramDesc* program);
/// The same for a serialized ModelProto in memory (fuzzing, embedding).
Result<ExportReport> export_onnx_bytes(const void* data, size_t size, const ExportOptions& opts, format::ProgramDesc* program);

/// `kiln inspect MODEL.onnx`: the model's inputs and outputs as declared, its dim names (where
/// each is used), what a trial export with every dim in [1, 4096] finds the model needs of
/// them, and the `kiln export` command line to start from.
Result<std::string> describe_onnx(const std::string& model_path);

}  // namespace kiln::exporter
