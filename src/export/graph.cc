#include "export/graph.h"

#include "format/control.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/crc32c.h"
#include "export/memory_plan.h"
#include "format/file_header.h"
#include "format/schedule.h"
#include "core/status.h"

namespace kiln::exporter {

Status GraphBuilder::add_dim(const std::string& name, int64_t min, int64_t max, int64_t step) {
  std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (name.empty()) return invalid_argument("a dim needs a name");
  if (min < 0) return invalid_argument("dim '" + name + "' has min " + std::to_string(min) + "; dims are at least 0");
  if (min > max) return invalid_argument("dim '" + name + "' has min above max " + range);
  if (step < 1) return invalid_argument("dim '" + name + "' has step " + std::to_string(step) + "; use a step of 1 or more");
  if ((min + step - 1) / step * step > max)
    return invalid_argument("dim '" + name + "' admits no value: no multiple of " + std::to_string(step) + " in " + range);
  // With a step, both bounds are on its grid (multiples of the step): an off-grid bound was
  // either refused as a value (min) or promised one that padding would exceed (max).
  if (step > 1 && (min % step != 0 || max % step != 0)) {
    auto s = [](int64_t v) { return std::to_string(v); };
    const int64_t lo_dn = min / step * step, lo_up = (min + step - 1) / step * step;
    const int64_t hi_dn = max / step * step, hi_up = (max + step - 1) / step * step;
    std::string fix = name + "=" + s(lo_up) + ".." + s(hi_dn) + ":" + s(step);
    if (lo_dn >= step && (lo_dn != lo_up || hi_up != hi_dn)) fix += " or " + name + "=" + s(lo_dn) + ".." + s(hi_up) + ":" + s(step);
    return invalid_argument("dim '" + name + "' bounds " + range + " are not on the grid of its step " + s(step) + " (" +
                            (min % step != 0 ? "min " + s(min) : "max " + s(max)) + " is not a multiple of " + s(step) +
                            "); use " + fix);
  }
  int existing = pool_.find_dim(name);
  if (existing >= 0) {
    const DimSpec& d = pool_.dims()[existing];
    if (d.min != min || d.max != max || d.step != step)
      return invalid_argument("dim '" + name + "' is declared twice with different bounds");
    return ok_status();
  }
  pool_.add_dim(DimSpec{name, min, max, step});
  return ok_status();
}

Result<int> GraphBuilder::add_input(const std::string& name, DType dtype, const std::vector<Axis>& axes,
                                    std::vector<int64_t> example_shape) {
  if (axes.size() > static_cast<size_t>(kMaxRank))
    return invalid_argument("input '" + name + "' has rank " + std::to_string(axes.size()) + ", above the maximum 8");
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.kind = Kind::kInput;
  for (size_t k = 0; k < axes.size(); ++k) {
    const Axis& a = axes[k];
    if (a.dim.empty()) {
      if (a.size < 0)
        return invalid_argument("input '" + name + "' axis " + std::to_string(k) + " has negative size " + std::to_string(a.size));
      v.shape.push_back(pool_.constant(a.size));
      continue;
    }
    int d = pool_.find_dim(a.dim);
    if (d < 0)
      return invalid_argument("input '" + name + "' axis " + std::to_string(k) + " names dim '" + a.dim +
                              "', which has no bounds; declare it with --dim " + a.dim + "=MIN..MAX");
    v.shape.push_back(pool_.dim(d));
  }
  v.example_shape = std::move(example_shape);  // empty: no example known (an ONNX file has none)
  values_.push_back(std::move(v));
  inputs_.push_back(static_cast<int>(values_.size()) - 1);
  return static_cast<int>(values_.size()) - 1;
}

Result<int> GraphBuilder::add_constant(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                                       const void* data, size_t nbytes) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument("constant '" + name + "' has a negative dim");
    numel *= d;
  }
  if (static_cast<size_t>(numel) * dtype_size(dtype) != nbytes)
    return invalid_argument("constant '" + name + "' has " + std::to_string(nbytes) + " bytes but its shape needs " +
                            std::to_string(static_cast<size_t>(numel) * dtype_size(dtype)));
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.kind = Kind::kConstant;
  for (int64_t d : shape) v.shape.push_back(pool_.constant(d));
  v.bytes.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + nbytes);
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size()) - 1;
}

Result<kernels::SymTensor> GraphBuilder::sym_input(int id, size_t i, const std::string& node_name) const {
  kernels::SymTensor t;
  if (id < 0) {
    t.present = false;
    return t;
  }
  if (static_cast<size_t>(id) >= values_.size())
    return invalid_argument("node '" + node_name + "': input #" + std::to_string(i) + " is not a value");
  const Value& v = values_[id];
  t.dtype = v.dtype;
  t.shape = v.shape;
  const Value& root = v.alias_of >= 0 ? values_[v.alias_of] : v;
  static const uint64_t kEmpty = 0;  // an empty constant still has known (no) contents
  if (root.kind == Kind::kConstant) t.const_data = root.bytes.empty() ? static_cast<const void*>(&kEmpty) : root.bytes.data();
  t.sym_values = v.sym_values;
  return t;
}

Result<std::vector<int>> GraphBuilder::add_op(const std::string& op_type, const std::string& node_name,
                                              const std::vector<int>& inputs, const core::AttrStore& attrs,
                                              size_t num_outputs,
                                              const std::vector<std::string>& fused_from) {
  const kernels::OpDef* op = kernels::find_op(op_type.c_str());
  if (!op) return unimplemented("node '" + node_name + "': op type '" + op_type + "' is not supported");
  if (op_type == "Transpose" && inputs.size() == 1 && inputs[0] >= 0 && num_outputs == 1) {
    KILN_ASSIGN_OR_RETURN(int shuffled, channel_shuffle(node_name, inputs[0], attrs));
    if (shuffled >= 0) return std::vector<int>{shuffled};
  }
  kernels::ShapeCtx ctx(pool_, attrs.view());
  ctx.node_name = node_name;
  ctx.op_type = op_type;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(kernels::SymTensor t, sym_input(inputs[i], i, node_name));
    ctx.inputs.push_back(std::move(t));
  }
  // Every op but the branch marker produces output 0; shape functions write it unconditionally.
  if (num_outputs == 0 && !kernels::produces_no_outputs(*op)) return invalid_argument("node '" + node_name + "' (" + op_type + ") has no outputs");
  ctx.outputs.resize(num_outputs);
  Status shaped = op->shape(ctx);
  // An overflow is the cause of whatever else the shape function concluded from its results.
  KILN_TRY(check_arithmetic("node '" + node_name + "' (" + op_type + ")"));
  KILN_TRY(shaped);
  for (size_t k = 0; k < num_outputs; ++k)
    if (!ctx.outputs[k].defined)
      return invalid_argument("node '" + node_name + "' (" + op_type + ") names " + std::to_string(num_outputs) +
                              " outputs; the op produces " + std::to_string(k));
  take_guards(&ctx.guards);
  if (fold_ && num_outputs > 0) {
    // (NonZero's count is a dim of the method: it runs at execute even on a constant. A
    // runtime loop's markers move its state: they run at execute.)
    bool all_const = !op->view && !inputs.empty() && ctx.scratch_bytes == core::kNoExpr && !kernels::produces_data_dim(*op, attrs.view()) &&
                     op_type != format::kLoopOp && op_type != format::kEndLoopOp;
    for (int id : inputs) all_const = all_const && (id < 0 || is_constant(id));
    if (all_const) return fold_node(op, ctx, node_name, inputs, attrs);
    if (!op->view && num_outputs == 1) {
      KILN_ASSIGN_OR_RETURN(int folded, fold_shape_math(ctx.outputs[0], node_name));
      if (folded >= 0) return std::vector<int>{folded};
    }
  }
  return add_shaped_node(op, ctx, op_type, node_name, inputs, attrs, fused_from);
}

Result<std::vector<int>> GraphBuilder::add_shaped_node(const kernels::OpDef* op, const kernels::ShapeCtx& ctx,
                                                       const std::string& op_type, const std::string& node_name,
                                                       const std::vector<int>& inputs, const core::AttrStore& attrs,
                                                       const std::vector<std::string>& fused_from) {
  const size_t num_outputs = ctx.outputs.size();
  const bool view = op->view || ctx.same_bytes;
  Node node;
  node.op = op;
  node.name = node_name;
  node.inputs = inputs;
  node.attrs = attrs;
  node.fused_from = fused_from;
  std::vector<int> outs;
  for (size_t k = 0; k < num_outputs; ++k) {
    Value v;
    v.name = num_outputs == 1 ? node_name : node_name + ":" + std::to_string(k);
    v.dtype = ctx.outputs[k].dtype;
    v.shape = ctx.outputs[k].shape;
    v.sym_values = ctx.outputs[k].sym_values;
    if (v.shape.size() > static_cast<size_t>(kMaxRank))
      return invalid_argument("node '" + node_name + "' (" + op_type + "): output rank " + std::to_string(v.shape.size()) +
                              " exceeds the maximum 8");
    if (view) {
      const Value& in = values_[inputs[0]];
      v.kind = Kind::kView;
      v.alias_of = in.alias_of >= 0 ? in.alias_of : inputs[0];
    }
    values_.push_back(std::move(v));
    outs.push_back(static_cast<int>(values_.size()) - 1);
  }
  node.outputs = outs;
  if (ctx.scratch_bytes != core::kNoExpr && !view) {
    Value sv;
    sv.name = node_name + ":scratch";
    sv.dtype = DType::kBool;  // bytes
    sv.shape = {ctx.scratch_bytes};
    values_.push_back(std::move(sv));
    node.scratch = static_cast<int>(values_.size()) - 1;
  }
  if (!view) nodes_.push_back(std::move(node));
  return outs;
}

Result<std::vector<int>> GraphBuilder::fold_node(const kernels::OpDef* op, const kernels::ShapeCtx& ctx,
                                                 const std::string& node_name, const std::vector<int>& inputs,
                                                 const core::AttrStore& attrs) {
  // Every input is a constant: run the kernel now and keep its outputs as constants.
  std::vector<TensorView> in_views(inputs.size()), out_views(ctx.outputs.size());
  std::vector<const TensorView*> in_ptrs(inputs.size(), nullptr);
  std::vector<TensorView*> out_ptrs(ctx.outputs.size());
  std::vector<std::vector<uint8_t>> out_bytes(ctx.outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] < 0) continue;
    const Value& v = values_[inputs[i]];
    const Value& root = v.alias_of >= 0 ? values_[v.alias_of] : v;
    in_views[i].dtype = v.dtype;
    in_views[i].rank = static_cast<int32_t>(v.shape.size());
    for (size_t k = 0; k < v.shape.size(); ++k) in_views[i].dims[k] = pool_.const_value(v.shape[k]);
    in_views[i].data = const_cast<uint8_t*>(root.bytes.data());
    in_ptrs[i] = &in_views[i];
  }
  for (size_t k = 0; k < ctx.outputs.size(); ++k) {
    const kernels::SymTensor& o = ctx.outputs[k];
    TensorView& t = out_views[k];
    t.dtype = o.dtype;
    t.rank = static_cast<int32_t>(o.shape.size());
    for (size_t a = 0; a < o.shape.size(); ++a) {
      if (!pool_.is_const(o.shape[a]))
        return internal_error("node '" + node_name + "': constant inputs gave a symbolic output shape");
      t.dims[a] = pool_.const_value(o.shape[a]);
    }
    out_bytes[k].assign(t.nbytes(), 0);
    t.data = out_bytes[k].data();
    out_ptrs[k] = &t;
  }
  kernels::RunCtx rc;
  rc.inputs = in_ptrs.data();
  rc.num_inputs = static_cast<uint32_t>(in_ptrs.size());
  rc.outputs = out_ptrs.data();
  rc.num_outputs = static_cast<uint32_t>(out_ptrs.size());
  rc.attrs = attrs.view();
  std::vector<int64_t> expr_values(pool_.size(), 0);
  rc.expr_values = expr_values.data();
  kernels::KernelStatus ks = kernels::run_once(*op, rc);
  if (ks != kernels::KernelStatus::kOk)
    return invalid_argument("node '" + node_name + "' (" + op->name + "): folding its constant inputs failed: " +
                            kernels::kernel_status_message(ks));
  std::vector<int> outs;
  for (size_t k = 0; k < ctx.outputs.size(); ++k) {
    std::string name = ctx.outputs.size() == 1 ? node_name : node_name + ":" + std::to_string(k);
    std::vector<int64_t> shape(out_views[k].dims, out_views[k].dims + out_views[k].rank);
    KILN_ASSIGN_OR_RETURN(int id, add_constant(name, out_views[k].dtype, shape, out_bytes[k].data(), out_bytes[k].size()));
    values_[id].sym_values = ctx.outputs[k].sym_values;
    outs.push_back(id);
  }
  ++folded_constant_nodes_;
  return outs;
}

Result<int> GraphBuilder::add_sym_scalar(core::ExprId e, const std::string& node_name) {
  kernels::SymTensor t;
  t.dtype = DType::kI64;
  t.sym_values = {e};
  return fold_shape_math(t, node_name);
}

Result<int> GraphBuilder::add_sym_ints(const std::vector<core::ExprId>& e, const std::string& node_name) {
  kernels::SymTensor t;
  t.dtype = DType::kI64;
  t.shape = {pool_.constant(static_cast<int64_t>(e.size()))};
  t.sym_values = e;
  return fold_shape_math(t, node_name);
}

Result<int> GraphBuilder::fold_shape_math(const kernels::SymTensor& out, const std::string& node_name) {
  // An integer output whose every element export knows as an expression: keep the
  // expressions (for later shape functions) and, if the value is needed at run time,
  // materialize it with one SymbolicInts instruction instead of the original subgraph.
  if ((out.dtype != DType::kI64 && out.dtype != DType::kI32) || out.sym_values.empty()) return -1;
  int64_t numel = 1;
  for (core::ExprId d : out.shape) {
    if (!pool_.is_const(d)) return -1;
    numel *= pool_.const_value(d);
  }
  if (numel != static_cast<int64_t>(out.sym_values.size())) return -1;
  bool all_const = true;
  for (core::ExprId e : out.sym_values) all_const = all_const && pool_.is_const(e);
  std::vector<int64_t> shape;
  for (core::ExprId d : out.shape) shape.push_back(pool_.const_value(d));
  ++folded_shape_nodes_;
  if (all_const) {
    std::vector<int64_t> v64;
    for (core::ExprId e : out.sym_values) v64.push_back(pool_.const_value(e));
    int id;
    if (out.dtype == DType::kI64) {
      KILN_ASSIGN_OR_RETURN(id, add_constant(node_name, DType::kI64, shape, v64));
    } else {
      std::vector<int32_t> v32(v64.begin(), v64.end());
      KILN_ASSIGN_OR_RETURN(id, add_constant(node_name, DType::kI32, shape, v32));
    }
    values_[id].sym_values = out.sym_values;
    return id;
  }
  core::AttrStore a;
  std::vector<int64_t> ids(out.sym_values.begin(), out.sym_values.end());
  a.set_ints("exprs", ids).set_int("to", out.dtype == DType::kI64 ? 7 : 6).set_ints("shape", shape);
  Node node;
  node.op = kernels::find_op("SymbolicInts");
  node.name = node_name;
  node.attrs = a;
  Value v;
  v.name = node_name;
  v.dtype = out.dtype;
  v.shape = out.shape;
  v.sym_values = out.sym_values;
  values_.push_back(std::move(v));
  node.outputs = {static_cast<int>(values_.size()) - 1};
  nodes_.push_back(std::move(node));
  return static_cast<int>(values_.size()) - 1;
}

// A channel shuffle as models write it (shufflenet: x.view(n, g, c/g, h, w).transpose(1, 2),
// then a view back to [n, c, h, w]) is a per-pixel channel permutation: as ChannelShuffle it
// runs channels-last in the delegate, where the 5-D view and its Transpose stopped a region
// (shufflenet_v2 at 8x3x224x224 spent 30% of its time in the layout changes around them).
Result<int> GraphBuilder::channel_shuffle(const std::string& node_name, int in, const core::AttrStore& attrs) {
  const Value& v = values_[in];
  if (v.kind != Kind::kView || v.alias_of < 0 || !fold_ || !rewrite_ || is_constant(in)) return -1;
  const int src = v.alias_of;
  const std::vector<core::ExprId> vs = v.shape, ss = values_[src].shape;
  const size_t r = vs.size();
  if (r < 4 || ss.size() + 1 != r || values_[src].dtype != v.dtype || !pool_.is_const(vs[1])) return -1;
  const core::Attrs a = attrs.view();
  const int64_t* perm = a.ints("perm");
  if (perm == nullptr || a.ints_size("perm") != r) return -1;
  for (size_t k = 0; k < r; ++k)
    if (perm[k] != static_cast<int64_t>(k == 1 ? 2 : k == 2 ? 1 : k)) return -1;
  if (vs[0] != ss[0] || pool_.mul(vs[1], vs[2]) != ss[1]) return -1;
  for (size_t k = 3; k < r; ++k)
    if (vs[k] != ss[k - 1]) return -1;
  core::AttrStore groups;
  groups.set_int("groups", pool_.const_value(vs[1]));
  KILN_ASSIGN_OR_RETURN(std::vector<int> y, add_op("ChannelShuffle", node_name, {src}, groups, 1, {node_name}));
  std::vector<core::ExprId> shape = vs;
  std::swap(shape[1], shape[2]);
  KILN_ASSIGN_OR_RETURN(int shape_v, add_sym_ints(shape, node_name + "/shape"));
  return add("Reshape", node_name + "/view", {y[0], shape_v});
}

Result<int> GraphBuilder::add(const std::string& op_type, const std::string& node_name,
                              const std::vector<int>& inputs, const core::AttrStore& attrs) {
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, add_op(op_type, node_name, inputs, attrs, 1));
  return outs[0];
}

int GraphBuilder::add_data_dim(const std::string& base, int64_t max) {
  std::string name = base;
  for (int k = 2; pool_.find_dim(name) >= 0; ++k) name = base + std::to_string(k);
  return pool_.add_dim(DimSpec{name, 0, max, 1, true});
}

bool GraphBuilder::reads_data_dim(core::ExprId e) const {
  std::vector<core::ExprId> stack = {e};
  while (!stack.empty()) {
    const core::ExprNode& n = pool_.node(stack.back());
    stack.pop_back();
    if (n.op == core::ExprOp::kDim && pool_.dims()[static_cast<size_t>(n.a)].data) return true;
    if (n.op != core::ExprOp::kDim && n.op != core::ExprOp::kConst) stack.push_back(n.a), stack.push_back(n.b);
  }
  return false;
}

void GraphBuilder::take_guards(std::vector<kernels::Guard>* guards) {
  for (kernels::Guard& g : *guards) {
    // In a block, or reading a size known only while executing: checked in the instruction
    // stream (a KilnAssert), not at bind.
    if (!branches_.empty() || reads_data_dim(g.lhs) || reads_data_dim(g.rhs)) {
      add_assert(g);
      continue;
    }
    bool dup = std::any_of(guards_.begin(), guards_.end(),
                           [&](const kernels::Guard& o) { return o.op == g.op && o.lhs == g.lhs && o.rhs == g.rhs; });
    if (!dup) guards_.push_back(std::move(g));
  }
  guards->clear();
}

Status GraphBuilder::require(const kernels::Guard& g) {
  kernels::ShapeCtx ctx(pool_, core::Attrs());
  ctx.node_name = g.node_name;
  ctx.op_type = g.op_type;
  KILN_TRY(g.op == kernels::Guard::Op::kEq ? ctx.require_eq(g.lhs, g.rhs, g.context) : ctx.require_ge(g.lhs, g.rhs, g.context));
  take_guards(&ctx.guards);
  return ok_status();
}

void GraphBuilder::rollback(const Checkpoint& c) {
  values_.resize(c.values);
  nodes_.resize(c.nodes);
  guards_.resize(c.guards);
  branches_.resize(c.branches);
  loops_.resize(c.loops);
  folded_constant_nodes_ = c.folded_constant;
  folded_shape_nodes_ = c.folded_shape;
}

void GraphBuilder::add_assert(const kernels::Guard& g) {
  Node n;
  n.op = kernels::find_op("KilnAssert");
  n.name = g.node_name + "/assert";
  const std::string text = core::relation_text(pool_.to_string(g.lhs), static_cast<core::ExprPool::Relation>(g.op),
                                               pool_.to_string(g.rhs));
  n.attrs.set_int("relation", static_cast<int64_t>(g.op)).set_int("lhs", g.lhs).set_int("rhs", g.rhs)
      .set_str("text", "node '" + g.node_name + "' (" + g.op_type + ") needs " + text + " " + g.context);
  n.side_effect = true;
  nodes_.push_back(std::move(n));
}

Status GraphBuilder::begin_if(int cond, const std::string& node_name) {
  const size_t before = nodes_.size();
  core::AttrStore a;
  a.set_int("then_len", 0);  // counted at emit, over the instructions kept
  KILN_TRY(add_op("KilnIf", node_name, {cond}, a, 0).status());
  if (nodes_.size() != before + 1) return internal_error("begin_if: the branch node was not added");
  nodes_.back().side_effect = true;
  branches_.push_back(OpenBranch{static_cast<int>(before), -1, cond, node_name});
  return ok_status();
}

Status GraphBuilder::begin_else() {
  if (branches_.empty() || branches_.back().else_node >= 0) return internal_error("begin_else: no then block is open");
  OpenBranch& b = branches_.back();
  Node n;
  n.op = kernels::find_op("KilnElse");
  n.name = b.name + "/else";
  n.attrs.set_int("else_len", 0);
  n.side_effect = true;
  nodes_.push_back(std::move(n));
  b.else_node = static_cast<int>(nodes_.size()) - 1;
  nodes_[b.if_node].else_node = b.else_node;
  return ok_status();
}

Result<std::vector<int>> GraphBuilder::end_if(const std::vector<int>& then_results, const std::vector<int>& else_results) {
  if (branches_.empty() || branches_.back().else_node < 0) return internal_error("end_if: no else block is open");
  if (then_results.size() != else_results.size() || then_results.empty())
    return internal_error("end_if: the branches must give as many results, at least one");
  const OpenBranch b = branches_.back();
  branches_.pop_back();  // the select runs after both blocks
  nodes_[b.if_node].end_node = nodes_[b.else_node].end_node = static_cast<int>(nodes_.size());
  std::vector<int> inputs = {b.cond};
  inputs.insert(inputs.end(), then_results.begin(), then_results.end());
  inputs.insert(inputs.end(), else_results.begin(), else_results.end());
  KILN_ASSIGN_OR_RETURN(core::AttrStore attrs, select_sizes(b.name, then_results, else_results));
  return add_op("KilnSelect", b.name, inputs, attrs, then_results.size());
}

Result<core::AttrStore> GraphBuilder::select_sizes(const std::string& node_name, const std::vector<int>& then_results,
                                                   const std::vector<int>& else_results) {
  // Results whose sizes differ on an axis that reads a data-dependent size (torchvision's
  // "no boxes found: an empty tensor, else the boxes NMS kept") take a data-dependent dim of
  // their own on that axis, set by the select from the branch taken. One per If: every such
  // axis must differ alike. Other differences stay guards (the shape function's).
  core::AttrStore a;
  std::vector<int64_t> axes(then_results.size(), -1);
  core::ExprId then_size = core::kNoExpr, else_size = core::kNoExpr;
  for (size_t k = 0; k < then_results.size(); ++k) {
    const std::vector<core::ExprId>& t = values_[then_results[k]].shape;
    const std::vector<core::ExprId>& e = values_[else_results[k]].shape;
    for (size_t ax = 0; ax < t.size() && t.size() == e.size(); ++ax) {
      if (t[ax] == e[ax] || (!reads_data_dim(t[ax]) && !reads_data_dim(e[ax]))) continue;
      if (axes[k] >= 0 || (then_size != core::kNoExpr && (then_size != t[ax] || else_size != e[ax])))
        return unimplemented("node '" + node_name + "' (If): its branches' results differ in size on more than one "
                             "data-dependent axis (" + pool_.to_string(t[ax]) + " and " + pool_.to_string(e[ax]) +
                             "); Kiln sizes one such axis per If");
      axes[k] = static_cast<int64_t>(ax);
      then_size = t[ax], else_size = e[ax];
    }
  }
  if (then_size == core::kNoExpr) return a;
  const int64_t most = std::max(pool_.range(then_size).hi, pool_.range(else_size).hi);
  a.set_int("dim", add_data_dim("branch", std::max<int64_t>(most, 0))).set_ints("axes", axes);
  return a;
}

Result<std::vector<int>> GraphBuilder::begin_loop(core::ExprId trip, int cond, const std::vector<int>& init,
                                                  const std::string& node_name) {
  const size_t before = nodes_.size();
  core::AttrStore a;
  a.set_int("body_len", 0).set_int("trip", trip);  // body_len: counted at emit, over the instructions kept
  std::vector<int> inputs = {cond};
  inputs.insert(inputs.end(), init.begin(), init.end());
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, add_op("KilnLoop", node_name, inputs, a, 1 + init.size()));
  if (nodes_.size() != before + 1) return internal_error("begin_loop: the loop node was not added");
  nodes_.back().side_effect = true;
  for (size_t k = 0; k < outs.size(); ++k)
    values_[outs[k]].name = node_name + (k == 0 ? "/iteration" : "/carried" + std::to_string(k - 1));
  loops_.push_back(OpenLoop{static_cast<int>(before), trip, outs, node_name});
  return outs;
}

Result<std::vector<int>> GraphBuilder::end_loop(int cond, const std::vector<int>& results, const std::vector<int>& scans,
                                                const std::vector<int64_t>& reverse) {
  if (loops_.empty()) return internal_error("end_loop: no loop is open");
  const OpenLoop l = loops_.back();
  if (results.size() + 1 != l.slots.size()) return internal_error("end_loop: one result per carried value");
  auto root = [&](int v) { return values_[v].alias_of >= 0 ? values_[v].alias_of : v; };
  for (size_t k = 0; k < results.size(); ++k)  // results are copied into the slots in order: none may be another slot
    for (size_t j = 1; j < l.slots.size(); ++j)
      if (j != k + 1 && root(results[k]) == root(l.slots[j]))
        return unimplemented("node '" + l.name + "': its body passes carried value " + std::to_string(j - 1) +
                             " on as carried value " + std::to_string(k) + "; Kiln does not exchange carried values in place");
  loops_.pop_back();
  core::AttrStore a;
  a.set_int("carried", static_cast<int64_t>(results.size())).set_int("trip", l.trip);
  if (std::any_of(reverse.begin(), reverse.end(), [](int64_t r) { return r != 0; })) a.set_ints("reverse", reverse);
  std::vector<int> inputs = {l.slots[0], cond};
  inputs.insert(inputs.end(), l.slots.begin() + 1, l.slots.end());
  inputs.insert(inputs.end(), results.begin(), results.end());
  inputs.insert(inputs.end(), scans.begin(), scans.end());
  const size_t at = nodes_.size();
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, add_op("KilnEndLoop", l.name, inputs, a, 1 + scans.size()));
  if (nodes_.size() != at + 1) return internal_error("end_loop: the loop's end was not added");
  nodes_.back().side_effect = true;  // it updates the slots
  nodes_[l.loop_node].end_node = static_cast<int>(at);
  return outs;
}

Status GraphBuilder::mark_output(int value, const std::string& name) {
  if (value < 0 || static_cast<size_t>(value) >= values_.size()) return invalid_argument("mark_output: no such value");
  // The signature names each input and output after the graph: an output that is also an
  // input, a constant or another output gets a view of its own under its own name (an
  // input passed through Identity keeps its name; two outputs of one value keep both).
  const Value& v = values_[value];
  const bool shared = v.kind == Kind::kInput || v.kind == Kind::kConstant ||
                      std::find(outputs_.begin(), outputs_.end(), value) != outputs_.end();
  if (shared && !name.empty() && name != v.name) {
    Value view;
    view.name = name;
    view.dtype = v.dtype;
    view.shape = v.shape;
    view.sym_values = v.sym_values;
    view.kind = Kind::kView;
    view.alias_of = v.alias_of >= 0 ? v.alias_of : value;
    values_.push_back(std::move(view));
    value = static_cast<int>(values_.size()) - 1;
  } else if (!name.empty()) {
    values_[value].name = name;
  }
  outputs_.push_back(value);
  return ok_status();
}

Result<uint64_t> GraphBuilder::bound_bytes(const Value& v) const {
  std::vector<int64_t> hi;
  for (core::ExprId e : v.shape) hi.push_back(pool_.range(e).hi);
  uint64_t n = 0;
  if (format::bytes_at_bound(dtype_size(v.dtype), hi.data(), hi.size(), &n)) return n;
  for (size_t k = 0; k < hi.size(); ++k)
    if (static_cast<uint64_t>(hi[k]) > format::kMaxValueBytes)
      return invalid_argument("value '" + v.name + "' has no usable upper bound on an axis sized " + pool_.to_string(v.shape[k]) +
                              "; tighten the --dim ranges");
  return invalid_argument("value '" + v.name + "' would exceed 1 TiB at the bound");
}

namespace {
std::string range_text(const DimSpec& d) {
  return "[" + std::to_string(d.min) + ", " + std::to_string(d.max) + "]" + (d.step > 1 ? " step " + std::to_string(d.step) : "");
}
}  // namespace

std::string DimNarrowing::text() const {
  std::string s = requested.name + ": requested " + range_text(requested) + ", admissible " + range_text(admissible);
  if (gaps) s += " with gaps the guards still check";
  std::string why;
  for (const std::string& b : because) why += (why.empty() ? "" : "; ") + b;
  return why.empty() ? s : s + " (" + why + ")";
}

Result<std::vector<DimNarrowing>> GraphBuilder::narrow_dims(int64_t limit) {
  using Relation = core::ExprPool::Relation;
  const size_t n_dims = pool_.dims().size();
  // Per dim: the guards that read it alone and refuse some of its values, with the values each admits.
  struct OneDimGuard {
    size_t guard;
    std::vector<int64_t> admits;  // ascending
  };
  std::vector<std::vector<OneDimGuard>> by_dim(n_dims);
  for (size_t gi = 0; gi < guards_.size(); ++gi) {
    const kernels::Guard& g = guards_[gi];
    core::ExprPool::Census c = pool_.census(g.lhs, static_cast<Relation>(g.op), g.rhs, limit);
    if (!c.complete || c.dims.size() != 1 || c.satisfied == c.assignments) continue;
    by_dim[static_cast<size_t>(c.dims[0])].push_back({gi, std::move(c.solutions)});
  }
  auto guard_text = [&](size_t gi) {
    const kernels::Guard& g = guards_[gi];
    return "node '" + g.node_name + "' (" + g.op_type + ") needs " +
           core::relation_text(pool_.to_string(g.lhs), static_cast<Relation>(g.op), pool_.to_string(g.rhs));
  };
  auto admits = [](const OneDimGuard& o, int64_t v) { return std::binary_search(o.admits.begin(), o.admits.end(), v); };
  std::vector<DimNarrowing> out;
  std::vector<bool> drop(guards_.size(), false);
  for (size_t d = 0; d < n_dims; ++d) {
    if (by_dim[d].empty()) continue;
    const DimSpec requested = pool_.dims()[d];
    std::vector<int64_t> values;  // the requested values every guard admits
    for (int64_t v = core::ceil_div(requested.min, requested.step) * requested.step; v <= requested.max; v += requested.step)
      if (std::all_of(by_dim[d].begin(), by_dim[d].end(), [&](const OneDimGuard& o) { return admits(o, v); }))
        values.push_back(v);
    std::string all;
    for (const OneDimGuard& o : by_dim[d]) all += (all.empty() ? "" : "; ") + guard_text(o.guard);
    if (values.empty())
      return invalid_argument("no value of dim '" + requested.name + "' in " + range_text(requested) +
                              " satisfies what the model needs of it together (" + all + "); widen or move the --dim range");
    if (values.size() == 1)
      return invalid_argument("dim '" + requested.name + "' is specialized to " + std::to_string(values[0]) + " by what the model needs of it (" +
                              all + "); export with --dim " + requested.name + "=" + std::to_string(values[0]) +
                              " to accept that, or change the model so it does not fix the size");
    int64_t step = 0;
    for (int64_t v : values) step = std::gcd(step, v);
    DimNarrowing n;
    n.requested = requested;
    n.admissible = {requested.name, values.front(), values.back(), step};
    n.gaps = (values.back() - values.front()) / step + 1 != static_cast<int64_t>(values.size());
    // Cite the guard that refuses the value just outside each new end, and one off the new step.
    auto cite = [&](int64_t v) {
      for (const OneDimGuard& o : by_dim[d])
        if (!admits(o, v)) {
          std::string t = guard_text(o.guard);
          if (std::find(n.because.begin(), n.because.end(), t) == n.because.end()) n.because.push_back(t);
          return;
        }
    };
    if (n.admissible.min > requested.min) cite(n.admissible.min - requested.step);
    if (n.admissible.max < requested.max) cite(n.admissible.max + requested.step);
    if (step > requested.step) cite(n.admissible.min + requested.step);
    pool_.narrow_dim(static_cast<int>(d), n.admissible.min, n.admissible.max, n.admissible.step);
    for (const OneDimGuard& o : by_dim[d]) {  // a guard that admits every value left is now the contract's
      bool always = true;
      for (int64_t v = n.admissible.min; always && v <= n.admissible.max; v += step) always = admits(o, v);
      drop[o.guard] = always;
    }
    out.push_back(std::move(n));
  }
  std::vector<kernels::Guard> kept;
  for (size_t gi = 0; gi < guards_.size(); ++gi)
    if (!drop[gi]) kept.push_back(std::move(guards_[gi]));
  guards_ = std::move(kept);
  return out;
}

Status GraphBuilder::check_arithmetic(const std::string& where) const {
  if (!pool_.overflowed()) return ok_status();
  return invalid_argument(where + ": its shape arithmetic leaves int64 (a size, product or coefficient beyond " +
                          std::to_string(std::numeric_limits<int64_t>::max()) +
                          "); the model's shape constants are out of range");
}

void GraphBuilder::live_nodes(std::vector<bool>* keep, std::vector<bool>* needed) const {
  auto root = [&](int v) { return values_[v].alias_of >= 0 ? values_[v].alias_of : v; };
  needed->assign(values_.size(), false);
  keep->assign(nodes_.size(), false);
  for (int o : outputs_) (*needed)[o] = (*needed)[root(o)] = true;
  for (size_t n = nodes_.size(); n-- > 0;) {
    bool any = nodes_[n].side_effect;
    for (int o : nodes_[n].outputs) any = any || (*needed)[o];
    if (!any) continue;
    (*keep)[n] = true;
    for (int o : nodes_[n].outputs) (*needed)[o] = true;
    if (nodes_[n].scratch >= 0) (*needed)[nodes_[n].scratch] = true;
    for (int i : nodes_[n].inputs)
      if (i >= 0) (*needed)[i] = (*needed)[root(i)] = true;
  }
  for (size_t v = 0; v < values_.size(); ++v)  // a needed view needs its root
    if ((*needed)[v] && values_[v].alias_of >= 0) (*needed)[values_[v].alias_of] = true;
}

format::Lifetimes GraphBuilder::lifetimes(const std::vector<int>& kept) const {
  std::vector<format::Step> steps;
  std::vector<format::LoopSpan> loops;
  std::vector<int64_t> step_of(nodes_.size(), -1);
  for (size_t s = 0; s < kept.size(); ++s) {
    const Node& n = nodes_[kept[s]];
    step_of[static_cast<size_t>(kept[s])] = static_cast<int64_t>(s) + 1;
    format::Step st{std::vector<int32_t>(n.inputs.begin(), n.inputs.end()), std::vector<int32_t>(n.outputs.begin(), n.outputs.end())};
    if (n.scratch >= 0) st.writes.push_back(n.scratch);
    steps.push_back(std::move(st));
  }
  for (int n : kept)
    if (std::strcmp(nodes_[n].op->name, format::kLoopOp) == 0 && nodes_[n].end_node >= 0)
      loops.push_back(format::LoopSpan{step_of[static_cast<size_t>(n)], step_of[static_cast<size_t>(nodes_[n].end_node)]});
  std::vector<int32_t> roots(values_.size());
  for (size_t v = 0; v < values_.size(); ++v) roots[v] = values_[v].alias_of >= 0 ? values_[v].alias_of : static_cast<int32_t>(v);
  return format::compute_lifetimes(values_.size(), steps, std::vector<int32_t>(inputs_.begin(), inputs_.end()),
                                   std::vector<int32_t>(outputs_.begin(), outputs_.end()), roots, loops);
}

format::InstructionDesc GraphBuilder::instruction(int n, const std::vector<int32_t>& remap, const std::vector<bool>& keep) const {
  const Node& node = nodes_[n];
  format::InstructionDesc in;
  in.op = node.op->name;
  in.node_name = node.name;
  for (int i : node.inputs) in.inputs.push_back(i < 0 ? -1 : remap[i]);
  for (int o : node.outputs) in.outputs.push_back(remap[o]);
  in.attrs = node.attrs;
  if (node.end_node >= 0) {  // a branch or loop marker: the length of its block over the kept instructions
    const bool is_if = node.else_node >= 0, is_loop = in.op == format::kLoopOp;
    const int from = n + 1, to = is_if ? node.else_node : node.end_node;
    in.attrs.set_int(is_loop ? "body_len" : is_if ? "then_len" : "else_len", std::count(keep.begin() + from, keep.begin() + to, true));
  }
  in.scratch = node.scratch >= 0 ? remap[node.scratch] : -1;
  in.fused_from = node.fused_from;
  return in;
}

namespace {
// Appends a constant's bytes to the program's segment (64-byte aligned), or finds an equal blob
// already there; returns its offset and adds the bytes it added to *added.
uint64_t place_constant(format::ProgramDesc* program, const std::vector<uint8_t>& bytes, uint64_t* added) {
  const auto key = std::make_pair(core::crc32c(bytes.data(), bytes.size()), static_cast<uint64_t>(bytes.size()));
  auto [lo, hi] = program->constant_index.equal_range(key);
  auto same = std::find_if(lo, hi, [&](const auto& e) {
    return bytes.empty() || std::memcmp(program->constants.data() + e.second, bytes.data(), bytes.size()) == 0;
  });
  if (same != hi) return same->second;  // an equal blob is there already: share it
  const uint64_t offset = format::align_up(program->constants.size(), format::kSegmentAlignment);
  program->constants.resize(offset, 0);
  program->constants.insert(program->constants.end(), bytes.begin(), bytes.end());
  program->constant_index.emplace(key, offset);
  *added += bytes.size();
  return offset;
}
}  // namespace

Result<MethodStats> GraphBuilder::emit(format::ProgramDesc* program) const {
  if (outputs_.empty()) return invalid_argument("method '" + method_name_ + "' has no outputs");
  KILN_TRY(check_arithmetic("method '" + method_name_ + "'"));
  for (const auto& m : program->methods)
    if (m.name == method_name_) return invalid_argument("method '" + method_name_ + "' is emitted twice");
  if (!branches_.empty() || !loops_.empty()) return internal_error("method '" + method_name_ + "' has a branch or loop left open");
  // Keep only nodes that feed an output (dead nodes are dropped), in order.
  std::vector<bool> keep, needed;
  live_nodes(&keep, &needed);
  std::vector<int> kept;
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (keep[n]) kept.push_back(static_cast<int>(n));
  const format::Lifetimes life = lifetimes(kept);

  format::MethodDesc m;
  m.name = method_name_;
  m.dims = pool_.dims();
  m.exprs = pool_.nodes();
  m.guards = guards_;
  std::vector<int32_t> remap(values_.size(), -1);
  std::vector<Buffer> buffers;  // the arena's slots, for the planner
  std::vector<int32_t> buffer_value;
  MethodStats stats;
  for (size_t v = 0; v < values_.size(); ++v) {
    const Value& val = values_[v];
    bool is_input = val.kind == Kind::kInput;
    if (!needed[v] && !is_input) continue;
    format::ValueDesc d;
    d.name = val.name;
    d.dtype = val.dtype;
    d.shape = val.shape;
    if (val.kind == Kind::kConstant) {
      d.storage = format::Storage::kConstant;
      d.nbytes = val.bytes.size();
      d.offset = place_constant(program, val.bytes, &stats.constant_bytes);
    } else if (val.alias_of >= 0) {
      d.storage = format::Storage::kAlias;
      ++stats.views;
    } else {
      bool is_output = std::find(outputs_.begin(), outputs_.end(), static_cast<int>(v)) != outputs_.end();
      d.storage = is_input ? format::Storage::kInput : is_output ? format::Storage::kOutput : format::Storage::kArena;
      KILN_ASSIGN_OR_RETURN(d.nbytes, bound_bytes(val));
      buffers.push_back(Buffer{d.nbytes, life.first[v], std::max(life.first[v], life.last[v])});
      buffer_value.push_back(static_cast<int32_t>(m.values.size()));
    }
    if (is_input) d.example_shape = val.example_shape;
    remap[v] = static_cast<int32_t>(m.values.size());
    m.values.push_back(std::move(d));
  }
  for (size_t v = 0; v < values_.size(); ++v)
    if (remap[v] >= 0 && values_[v].alias_of >= 0) {
      format::ValueDesc& d = m.values[remap[v]];
      d.alias_of = remap[values_[v].alias_of];
      KILN_ASSIGN_OR_RETURN(d.nbytes, bound_bytes(values_[v]));
    }
  MemoryPlan plan = plan_memory(buffers, format::kSegmentAlignment, sample_sizes(m, buffer_value));
  for (size_t b = 0; b < buffers.size(); ++b) m.values[buffer_value[b]].offset = plan.offsets[b];
  m.placement = placement_of(plan, buffer_value, m.values.size());
  m.arena_bytes = plan.arena_bytes;
  m.lower_bound_bytes = plan.lower_bound_bytes;
  m.plan_strategy = plan.strategy;
  for (int i : inputs_) m.inputs.push_back(remap[i]);
  for (int o : outputs_) m.outputs.push_back(remap[o]);
  for (int n : kept) m.instructions.push_back(instruction(n, remap, keep));
  stats.instructions = m.instructions.size();
  stats.guards = m.guards.size();
  stats.arena_bytes = m.arena_bytes;
  stats.lower_bound_bytes = m.lower_bound_bytes;
  stats.strategy = m.plan_strategy;
  program->methods.push_back(std::move(m));
  return stats;
}

}  // namespace kiln::exporter
