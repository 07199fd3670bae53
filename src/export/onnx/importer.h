#pragma once
// The ONNX importer's one class (importer internals): a ModelProto's graph into a GraphBuilder
// under the export options. onnx_import.cc holds the contract (inputs, dims, consts), the
// nodes and the ops the importer resolves itself; onnx_control_flow.cc holds If, Loop, Scan
// and the sequences a loop appends to.

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "export/export_options.h"
#include "export/graph.h"
#include "export/onnx/fuse_patterns.h"
#include "export/pipeline.h"
#include "onnx/onnx_pb.h"

namespace kiln::exporter {

class Importer {
 public:
  /// Imports into `g` (borrowed for the importer's life) under `opts`, counting into `report`.
  Importer(const ExportOptions& opts, GraphBuilder& g, ExportReport* report) : opts_(opts), report_(report), g_(g) {}

  /// Imports `model` (its graph is changed: BatchNormalization folded into the Convs before it).
  Status run(onnx::ModelProto& model);

 private:
  // ---- contract (onnx_import.cc) -------------------------------------------------------------
  /// The inputs as the flags and the model state them, gathered before any is added so every
  /// problem is reported at once.
  struct InputContract {
    struct Input {
      std::string name;
      DType dtype;
      std::vector<Axis> axes;
    };
    std::map<std::string, DimArg> dims;  ///< --dim by name
    std::set<std::string> used_dims, known_inputs;
    std::vector<Input> inputs;
    std::vector<std::string> errors;
  };
  Status add_inputs(const onnx::GraphProto& graph);
  bool input_spec(const onnx::ValueInfoProto& in, InputContract* c, std::vector<std::string>* spec);
  std::vector<Axis> input_axes(const std::string& input, const std::vector<std::string>& spec, InputContract* c);
  void check_flag_names(InputContract* c);
  Status add_const_input(const std::string& name, DType dtype, const std::string& text);
  Status check_specializations();

  // ---- nodes and the ops resolved here (onnx_import.cc) --------------------------------------
  Status check_supported(const onnx::GraphProto& graph);
  Status import_nodes(const onnx::GraphProto& graph, bool main = false);
  bool attention_shapes_agree(const FusionCandidate& f, const std::vector<int>& in);
  Result<bool> import_fusion(const onnx::GraphProto& graph, const FusionCandidate& f);
  /// Every input of node n (-1 for an omitted optional one).
  Result<std::vector<int>> lookup_inputs(const onnx::NodeProto& n, const std::string& name);
  Result<int> lookup(const std::string& value, const std::string& node);
  Status import_node(const onnx::NodeProto& n, const std::string& name);
  Result<int> data_dim(const std::string& base, int64_t max, const std::string& node);
  int64_t most_items(int x, const core::Attrs& attrs);
  Status import_compress(const onnx::NodeProto& n, const std::string& name);
  Status import_unique(const onnx::NodeProto& n, const std::string& name);
  Status import_nonzero(const onnx::NodeProto& n, const std::string& name);
  /// TopK whose K is read from the data (not a constant, not computed from sizes).
  bool k_from_data(const onnx::NodeProto& n) const;
  Status import_topk_from_data(const onnx::NodeProto& n, const std::string& name);
  Status import_nms(const onnx::NodeProto& n, const std::string& name);
  Status import_dropout_extras(const onnx::NodeProto& n, const std::string& name, int in);
  void adapt_to_opset(std::string& op, std::vector<int>* inputs, core::AttrStore* attrs);
  Status import_constant(const onnx::NodeProto& n, const std::string& name);

  // ---- control flow (onnx_control_flow.cc) ---------------------------------------------------
  /// A Loop node's operands: static `trips` or `trip_expr` over the dims, the condition, and
  /// the carried values (-1: a list the body appends to).
  struct LoopHead {
    const onnx::GraphProto* body = nullptr;
    int carried = 0;
    int64_t trips = -1;
    core::ExprId trip_expr = core::kNoExpr;
    int cond = -1;
    bool cond_const = true;
    std::vector<int> state;
    bool lists = false;
  };
  /// A Scan node's attributes and operands: `len` steps (static, or `len_expr` over the dims).
  struct ScanHead {
    const onnx::GraphProto* body = nullptr;
    int states = 0;
    size_t k_out = 0;
    std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
    std::vector<int> state, scan_in;
    int64_t len = -1;
    core::ExprId len_expr = core::kNoExpr;
  };
  /// Body inputs of a runtime loop's iteration, given the iteration value and the slots.
  using BodyInputs = std::function<Result<std::vector<int>>(int, const std::vector<int>&)>;
  bool const_scalar(int id, int64_t* v);
  Result<std::vector<int>> import_iteration(const onnx::GraphProto& body, const std::vector<int>& inputs, const std::string& name,
                                            int64_t i);
  Status add_body_constants(const onnx::GraphProto& body);
  Result<int> stack(const std::vector<int>& values, int64_t axis, const std::string& name);
  Result<int> move_axis0(int v, int64_t axis, const std::string& node_name);
  Status check_unroll(const std::string& name, const char* op, int64_t trips, const onnx::GraphProto& body);
  Result<std::vector<int>> import_runtime_loop(const onnx::GraphProto& body, const std::string& name, const char* op,
                                               core::ExprId trip, int cond, const std::vector<int>& init,
                                               const BodyInputs& body_inputs, size_t scan_outputs,
                                               const std::vector<int64_t>& reverse = {}, std::vector<int>* stacked = nullptr);
  Status import_sequence_op(const onnx::NodeProto& n, const std::string& name);
  Status import_loop(const onnx::NodeProto& n, const std::string& name);
  Result<LoopHead> loop_head(const onnx::NodeProto& n, const std::string& name);
  Status import_loop_at_runtime(const onnx::NodeProto& n, const std::string& name, LoopHead h);
  Status unroll_loop(const onnx::NodeProto& n, const std::string& name, LoopHead h);
  Status import_scan(const onnx::NodeProto& n, const std::string& name);
  Result<ScanHead> scan_head(const onnx::NodeProto& n, const std::string& name);
  Status scan_operands(const onnx::NodeProto& n, const std::string& name, ScanHead* h);
  Status import_runtime_scan(const onnx::NodeProto& n, const std::string& name, const ScanHead& h);
  Status unroll_scan(const onnx::NodeProto& n, const std::string& name, ScanHead h);
  Result<std::vector<int>> import_branch(const onnx::NodeProto& n, const std::string& name, const char* branch_name);
  Status import_if(const onnx::NodeProto& n, const std::string& name);
  Status import_runtime_if(const onnx::NodeProto& n, const std::string& name, int cond);
  bool scalar_expr(const std::string& value, core::ExprId* e);
  bool shape_condition(const std::string& value, kernels::Guard* holds);
  bool negate(kernels::Guard* g);

  const ExportOptions& opts_;
  ExportReport* report_;
  GraphBuilder& g_;
  int64_t opset_ = 13;
  std::map<std::string, const onnx::NodeProto*> producers_;  ///< value name -> the node that makes it
  std::unordered_map<std::string, int> names_;
  std::map<std::string, DimArg> data_bounds_;  ///< --dim names no input uses: bounds of data-dependent sizes
  std::vector<FusionCandidate> fusions_;  // main graph, ascending first node
  std::set<std::string> fused_names_;
  std::string iteration_suffix_;  ///< "@2" while importing a loop body's third iteration
  // Lists (ONNX sequences) as torch exports a list a loop appends to: SequenceEmpty before
  // the loop, SequenceInsert at the end of its body, ConcatFromSequence after it (stack or
  // cat). The list becomes one of the loop's scan outputs; other uses of sequences are refused.
  struct Sequence {
    enum Kind { kEmpty, kInBody, kAppended, kStacked } kind = kEmpty;
    int list = -1;   ///< kInBody, kAppended: which carried value of the loop being imported
    int value = -1;  ///< kAppended: the item appended; kStacked: the items stacked on a new axis 0
  };
  std::unordered_map<std::string, Sequence> sequences_;
};

}  // namespace kiln::exporter
