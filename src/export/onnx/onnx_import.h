#pragma once
// kiln export: an ONNX model specialized to a stated shape contract, with its shape
// arithmetic folded into SymExprs and guards, written as a .kiln program.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::exporter {

/// `--dim NAME=MIN..MAX[:STEP]` or `--dim NAME=V` (pinned: min == max, the axis becomes static).
struct DimArg {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  int64_t step = 1;
  bool pinned = false;
};

struct ExportOptions {
  /// `--input NAME=D0,D1,...`: each Di an integer (static) or a dim name.
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs;
  std::vector<DimArg> dims;
  /// `--const NAME=VALUE`: a scalar input pinned as a constant.
  std::vector<std::pair<std::string, std::string>> consts;
  std::string method_name = "forward";
  /// `--delegate xnnpack|none`: partition for the XNNPACK delegate (the portable path stays).
  std::string delegate = "xnnpack";
  /// `--require-coverage=F`: fail unless the delegate takes at least this share of FLOPs.
  double require_coverage = 0;
  /// Fuse LayerNorm and GELU chains into one instruction each (fuse_patterns.h); `--no-fusion`
  /// turns it off (the unfused reference).
  bool fuse = true;
  /// `--bucket DIM=S1,S2,...`: one static method per size ("forward@seq=32"), each marked as a
  /// bucket of `method_name` with the input axes to pad and the output axes to cut back.
  std::string bucket_dim;
  std::vector<int64_t> bucket_sizes;
  /// `--pad INPUT=VALUE`: what padding fills for a bucket (default 0).
  std::map<std::string, double> pads;
  /// `--max-arena=SIZE`: refuse a contract whose arena at the bound (the larger of the portable
  /// and the delegated plan) is above this many bytes, naming the dims responsible and a smaller
  /// bound that fits; 0: no limit.
  uint64_t max_arena_bytes = kDefaultMaxArena;
  /// `--warn-arena=SIZE`: above this (and within max_arena_bytes), export succeeds with a warning
  /// of the same form; 0: never.
  uint64_t warn_arena_bytes = kDefaultWarnArena;
  static constexpr uint64_t kDefaultMaxArena = uint64_t{64} << 30;  ///< 64 GiB
  static constexpr uint64_t kDefaultWarnArena = uint64_t{1} << 30;  ///< 1 GiB
};

/// What export did, for its summary and the closing notes.
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

/// Parses "NAME=MIN..MAX[:STEP]" / "NAME=V".
Result<DimArg> parse_dim_arg(const std::string& text);
/// Parses a byte size: "4096", "512K", "512M", "2G", "1.5GiB", "64GB" (K, M, G, T and KiB...
/// are powers of 1024; KB, MB, GB, TB powers of 1000).
Result<uint64_t> parse_byte_size(const std::string& text);
/// Parses "NAME=D0,D1,...".
Result<std::pair<std::string, std::vector<std::string>>> parse_input_arg(const std::string& text);

/// Imports `model_path` under `opts` and appends one method to `program`.
Result<ExportReport> export_onnx(const std::string& model_path, const ExportOptions& opts,
                                 format::ProgramDesc* program);
/// The same for a serialized ModelProto in memory (fuzzing, embedding).
Result<ExportReport> export_onnx_bytes(const void* data, size_t size, const ExportOptions& opts, format::ProgramDesc* program);
/// Human-readable summary of a report.
std::string format_report(const ExportReport& r);

/// `kiln inspect MODEL.onnx`: the model's inputs and outputs as declared, its dim names (where
/// each is used), what a trial export with every dim in [1, 4096] finds the model needs of
/// them, and the `kiln export` command line to start from.
Result<std::string> describe_onnx(const std::string& model_path);

}  // namespace kiln::exporter
