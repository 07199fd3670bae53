#pragma once
// Graph IR and builder: inputs with static or named dynamic axes, constants, ops with
// symbolic shape inference (through each op's shape function), views that alias, memory
// planning at the bound, and emission into a ProgramDesc. The ONNX importer and the tests
// both build programs through this API.

#include <cstdint>
#include <string>
#include <vector>

#include "core/attr_store.h"
#include "core/symexpr.h"
#include "format/program_desc.h"
#include "format/schedule.h"
#include "kernels/kernel.h"

namespace kiln::exporter {

/// One axis of an input: a static size or the name of a Dim declared with add_dim.
struct Axis {
  Axis(int64_t s) : size(s) {}                     // NOLINT: implicit by design
  Axis(const char* d) : size(-1), dim(d) {}         // NOLINT
  Axis(std::string d) : size(-1), dim(std::move(d)) {}  // NOLINT
  int64_t size;
  std::string dim;
};

/// Summary numbers of an emitted method (for export's report and tests).
struct MethodStats {
  size_t instructions = 0;
  size_t views = 0;
  size_t guards = 0;
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  uint64_t constant_bytes = 0;
  std::string strategy;
};

/// A dim whose admissible values guards over it alone narrowed (GraphBuilder::narrow_dims).
struct DimNarrowing {
  DimSpec requested;   ///< as declared (--dim)
  DimSpec admissible;  ///< what the program's contract now states
  std::vector<std::string> because;  ///< "node 'Conv_0' (Conv) needs ceildiv(height,2) - 1 >= 1"
  bool gaps = false;  ///< some values in [min, max] at the step are still refused, by guards kept at bind
  /// "height: requested [1, 224], admissible [9, 224] (node 'MaxPool_2' (MaxPool) needs ...)"
  std::string text() const;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string method_name = "forward") : method_name_(std::move(method_name)) {}

  /// Declares a dynamic dim. Errors when min < 1, min > max, step < 1, or no multiple of
  /// step lies in [min, max]; re-declaring a name with other bounds is an error.
  Status add_dim(const std::string& name, int64_t min, int64_t max, int64_t step = 1);
  /// Adds a graph input. Dims named in `axes` must be declared first. `example_shape` (the
  /// shape a traced program was exported from; empty when there was none, as for an ONNX
  /// file) is what error messages cite.
  Result<int> add_input(const std::string& name, DType dtype, const std::vector<Axis>& axes,
                        std::vector<int64_t> example_shape = {});
  /// Adds a constant; the bytes are copied (row-major, numel * dtype_size).
  Result<int> add_constant(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                           const void* data, size_t nbytes);
  template <typename T>
  Result<int> add_constant(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                           const std::vector<T>& values) {
    return add_constant(name, dtype, shape, values.data(), values.size() * sizeof(T));
  }
  /// Adds a node; runs its shape function now so errors name this node. `inputs` may hold
  /// -1 for an omitted optional operand. Returns the output value ids.
  /// `fused_from`: the model's nodes this one op replaces (export's fusion; kept in the file
  /// for `kiln inspect`).
  Result<std::vector<int>> add_op(const std::string& op_type, const std::string& node_name,
                                  const std::vector<int>& inputs, const core::AttrStore& attrs = {},
                                  size_t num_outputs = 1, const std::vector<std::string>& fused_from = {});
  /// add_op with one output.
  Result<int> add(const std::string& op_type, const std::string& node_name, const std::vector<int>& inputs,
                  const core::AttrStore& attrs = {});
  /// A data-dependent dim in [0, max] (NonZero's count, see DimSpec::data), named `base` or
  /// base + a number when taken; returns its index.
  int add_data_dim(const std::string& base, int64_t max);
  /// True when expression `e` reads a data-dependent dim.
  bool reads_data_dim(core::ExprId e) const;

  /// Runtime branches (src/format/control.h), for an ONNX If whose condition is known only
  /// at run time: begin_if(cond) opens the then block, begin_else() the else block, and
  /// end_if(then results, else results) closes them and returns the KilnSelect outputs (one
  /// per pair). Nodes added in between belong to the open block. Guards that nodes in a
  /// block need become KilnAssert instructions of that block, checked when it runs, so a
  /// block's needs never refuse shapes at bind where the other block runs. Blocks nest.
  Status begin_if(int cond, const std::string& node_name);
  Status begin_else();
  Result<std::vector<int>> end_if(const std::vector<int>& then_results, const std::vector<int>& else_results);
  bool in_branch() const { return !branches_.empty(); }

  /// Runtime loops (src/format/control.h), for an ONNX Loop or Scan whose trip count is a
  /// shape expression: begin_loop(trip, cond, init) opens the body and returns the iteration
  /// (int64 scalar) and one slot per initial value, which the body reads as the carried
  /// values; end_loop(cond, results, scans) closes it and returns the iteration count and one
  /// [trip, ...] output per scan value. The body's results must keep the slots' shapes.
  Result<std::vector<int>> begin_loop(core::ExprId trip, int cond, const std::vector<int>& init, const std::string& node_name);
  /// `reverse[k]` nonzero: scan output k is written from its last step back (ONNX Scan's
  /// scan_output_directions).
  Result<std::vector<int>> end_loop(int cond, const std::vector<int>& results, const std::vector<int>& scans,
                                    const std::vector<int64_t>& reverse = {});
  bool in_loop() const { return !loops_.empty(); }
  /// An int64 scalar holding expression `e` at run time (a constant when `e` is one).
  Result<int> add_sym_scalar(core::ExprId e, const std::string& node_name);
  /// A 1-D int64 tensor holding expressions `e` (a shape for Reshape, ...).
  Result<int> add_sym_ints(const std::vector<core::ExprId>& e, const std::string& node_name);

  /// Requires `g.lhs g.op g.rhs` (kEq or kGe) of the shapes, as a shape function would: proven
  /// (nothing recorded), refuted (an error), or a guard (in an open block: a KilnAssert).
  Status require(const kernels::Guard& g);

  /// What the builder holds, to undo an attempt that failed (the importer tries an If as a
  /// runtime branch first). Expressions made meanwhile stay in the pool, unused.
  struct Checkpoint {
    size_t values = 0, nodes = 0, guards = 0, branches = 0, folded_constant = 0, folded_shape = 0, loops = 0;
  };
  Checkpoint checkpoint() const {
    return {values_.size(), nodes_.size(), guards_.size(), branches_.size(), folded_constant_nodes_, folded_shape_nodes_, loops_.size()};
  }
  void rollback(const Checkpoint& c);
  /// Contents of a small integer value known as expressions (a folded shape computation).
  const std::vector<core::ExprId>& sym_values(int value) const { return values_[value].sym_values; }

  /// Marks a value as a method output named `name` (the graph's name for it). An input, a
  /// constant or a value already an output is not renamed: the output is a view of it.
  Status mark_output(int value, const std::string& name = "");

  /// Folding (on by default): a node whose inputs are all constants runs at export and
  /// becomes a constant; an integer node whose values shape inference knows as SymExprs
  /// becomes one SymbolicInts instruction (dropped if only shape functions read it).
  void set_folding(bool on) { fold_ = on; }
  /// Rewrites (on by default, and only with folding): a channel shuffle written as a Transpose of
  /// a 5-D view becomes ChannelShuffle (channel_shuffle below). Export's --no-fusion turns them off.
  void set_rewrites(bool on) { rewrite_ = on; }
  size_t folded_constant_nodes() const { return folded_constant_nodes_; }
  size_t folded_shape_nodes() const { return folded_shape_nodes_; }
  /// Bytes of a constant value (or of the constant a view aliases); nullptr otherwise.
  const std::vector<uint8_t>* constant_bytes(int value) const {
    const Value& v = values_[value];
    const Value& root = v.alias_of >= 0 ? values_[v.alias_of] : v;
    return root.kind == Kind::kConstant ? &root.bytes : nullptr;
  }

  core::ExprPool& pool() { return pool_; }
  const core::ExprPool& pool() const { return pool_; }
  const std::vector<kernels::Guard>& guards() const { return guards_; }
  DType dtype(int value) const { return values_[value].dtype; }
  const std::vector<core::ExprId>& shape(int value) const { return values_[value].shape; }
  std::string shape_string(int value) const { return pool_.shape_to_string(values_[value].shape); }
  const std::string& value_name(int value) const { return values_[value].name; }
  /// True for constants and for views of constants.
  bool is_constant(int value) const { return constant_bytes(value) != nullptr; }
  size_t num_values() const { return values_.size(); }

  /// Folds the guards that read one dim into that dim's contract: its min, max and step become
  /// those of the values every such guard admits, and the guards that then always hold are
  /// dropped. Checks up to `limit` values per dim (a dim with more is left as declared). An
  /// error when no value, or only one of several, satisfies them together.
  Result<std::vector<DimNarrowing>> narrow_dims(int64_t limit = 100000);

  /// Plans memory at the bound and appends this method (and its constants) to `program`.
  Result<MethodStats> emit(format::ProgramDesc* program) const;

 private:
  enum class Kind { kInput, kConstant, kComputed, kView };
  struct Value {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<core::ExprId> shape;
    Kind kind = Kind::kComputed;
    std::vector<uint8_t> bytes;  // constants
    int alias_of = -1;           // views: the root value whose bytes they reuse
    std::vector<int64_t> example_shape;
    std::vector<core::ExprId> sym_values;
  };
  struct Node {
    const kernels::OpDef* op = nullptr;
    std::string name;
    std::vector<int> inputs;
    std::vector<int> outputs;
    core::AttrStore attrs;
    int scratch = -1;  // value holding the planned scratch bytes
    std::vector<std::string> fused_from;
    bool side_effect = false;  // kept without readers: KilnIf, KilnElse, KilnAssert
    int end_node = -1;         // KilnIf, KilnElse: the first node after the block(s) they open; KilnLoop: its KilnEndLoop
    int else_node = -1;        // KilnIf: its KilnElse
  };
  struct OpenBranch {
    int if_node = -1;
    int else_node = -1;
    int cond = -1;
    std::string name;
  };
  /// A guard a node in an open block needs, as a KilnAssert instruction of that block.
  void add_assert(const kernels::Guard& g);
  /// A Transpose swapping axes 1 and 2 of a view that splits axis 1 of its root into (G, C/G):
  /// ChannelShuffle(groups = G) of the root and a view of its output with the Transpose's
  /// shape; -1 when `in` and `attrs` are not that.
  Result<int> channel_shuffle(const std::string& node_name, int in, const core::AttrStore& attrs);
  /// Records guards a shape function asked for: the method's (deduplicated), or asserts of
  /// the open block.
  void take_guards(std::vector<kernels::Guard>* guards);
  Result<uint64_t> bound_bytes(const Value& v) const;
  /// emit's steps. The nodes that feed an output or have a side effect (`keep`, per node), and
  /// the values they need (`needed`, per value; a needed view needs its root).
  void live_nodes(std::vector<bool>* keep, std::vector<bool>* needed) const;
  /// The lifetimes of every value over the kept nodes (`kept`, in order): step 0 holds the
  /// inputs, kept node s runs at step s+1, outputs live to the end, loops stretch them.
  format::Lifetimes lifetimes(const std::vector<int>& kept) const;
  /// Node n as an instruction, its values renumbered by `remap`; a block marker's length
  /// counts the kept nodes of its block.
  format::InstructionDesc instruction(int n, const std::vector<int32_t>& remap, const std::vector<bool>& keep) const;
  /// An error naming `where` once the pool's arithmetic has overflowed (ExprPool::overflowed).
  Status check_arithmetic(const std::string& where) const;
  Result<std::vector<int>> fold_node(const kernels::OpDef* op, const kernels::ShapeCtx& ctx, const std::string& node_name,
                                     const std::vector<int>& inputs, const core::AttrStore& attrs);
  Result<int> fold_shape_math(const kernels::SymTensor& out, const std::string& node_name);
  /// end_if's: the KilnSelect's attributes sizing a result axis that differs between the
  /// branches on a data-dependent size (attrs dim, axes), or none.
  Result<core::AttrStore> select_sizes(const std::string& node_name, const std::vector<int>& then_results,
                                       const std::vector<int>& else_results);
  /// add_op's steps: input i of a node as the shape function sees it (-1: absent), and the
  /// shaped node's outputs (views of input 0 for a view op) and scratch as values.
  Result<kernels::SymTensor> sym_input(int id, size_t i, const std::string& node_name) const;
  Result<std::vector<int>> add_shaped_node(const kernels::OpDef* op, const kernels::ShapeCtx& ctx, const std::string& op_type,
                                           const std::string& node_name, const std::vector<int>& inputs,
                                           const core::AttrStore& attrs, const std::vector<std::string>& fused_from);
  bool fold_ = true;
  bool rewrite_ = true;
  size_t folded_constant_nodes_ = 0;
  size_t folded_shape_nodes_ = 0;

  std::string method_name_;
  core::ExprPool pool_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_, outputs_;
  std::vector<kernels::Guard> guards_;
  std::vector<OpenBranch> branches_;  // innermost last
  struct OpenLoop {
    int loop_node = -1;
    core::ExprId trip = -1;
    std::vector<int> slots;  // iteration first
    std::string name;
  };
  std::vector<OpenLoop> loops_;  // innermost last
};

}  // namespace kiln::exporter
