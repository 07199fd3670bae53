#pragma once
// The export driver, shared by every way into export (`kiln export`, Python's export_onnx,
// `kiln inspect MODEL.onnx`'s trial export): an importer fills a graph under the options; the
// pipeline emits it (memory planned at the bound), partitions it for the delegate (coverage,
// --require-coverage), reports the contract, weighs the arena against --max-arena and
// --warn-arena (exporting again to confirm a smaller bound it suggests), and with --bucket
// makes one static method per size. It knows no model format.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/symexpr.h"
#include "export/export_options.h"
#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::exporter {

class GraphBuilder;

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
  std::vector<DimSpec> contract_dims;  ///< the program's dims (after narrowing)
  std::vector<std::string> guards;   ///< "H % 32 == 0 (node 'Add_57' (Add) ...)"
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  uint64_t arena_min_bytes = 0;  ///< the portable plan's arena with every dim at its minimum
  uint64_t constant_bytes = 0;          ///< this method's constants, each stored once (no alignment)
  uint64_t constant_segment_bytes = 0;  ///< the file's constant segment: every method's, 64-byte aligned (kiln inspect's)
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
  /// Near-misses: "LayerNormalization from '/ln/Div' (Div): stopped at '/ln/Mul' (Mul): Scale is not ..."
  std::vector<std::string> fusion_misses;
  bool explain_fusion = false;  ///< --explain-fusion: the summary lists fusion_misses
  /// QDQ chains (DequantizeLinear -> Conv/MatMul -> QuantizeLinear) folded into integer instructions
  size_t qdq_folded = 0;
  size_t retyped_u8 = 0;
  size_t dynamic_matmuls_folded = 0;  ///< MatMulInteger chains made PackedMatMulIntegerToFloat
  size_t contrib_rewritten = 0;
  double int8_flop_share = 0;  ///< FLOPs at the bound in integer instructions (QLinearConv, MatMulInteger, ...)  ///< com.microsoft ops rewritten into standard ones (contrib_ops.h)  ///< uint8 activations made int8 (zero points minus 128) for int8 kernels
};

/// An importer's part: fills `g` (a new method's graph, named opts.method_name) from the model
/// under `opts` (inputs, dims, consts, fusion) and the import's lines of `report` (opset, node
/// counts, fusions, narrowed dims). The pipeline calls it once per method it makes, and again
/// to confirm a smaller bound it suggests; each call starts from the model as given.
using ImportGraph = std::function<Status(const ExportOptions& opts, GraphBuilder* g, ExportReport* report)>;

/// Exports under `opts` through `import`: appends one method to `program`, or with
/// opts.bucket_sizes one per size (the report is then the last one's, with a note of them all).
Result<ExportReport> run_export(const ImportGraph& import, const ExportOptions& opts, format::ProgramDesc* program);

}  // namespace kiln::exporter
