#pragma once
// Runs an op's shape function on symbolic input shapes, the way export does, and evaluates
// the resulting shapes at concrete dim values, the way bind does.

#include <string>
#include <vector>

#include "core/attr_store.h"
#include "kernels/kernel.h"

namespace kiln::testing {

/// Outcome of symbolic shape inference for one node.
struct SymResult {
  Status status;
  std::vector<kernels::SymTensor> outputs;
  std::vector<kernels::Guard> guards;
};

/// Calls find_op(name)->shape on inputs of the given symbolic shapes (all f32 unless
/// `dtypes` says otherwise). Expressions live in `pool`, which must outlive the result.
inline SymResult infer_shapes(const char* name, core::ExprPool& pool,
                              const std::vector<std::vector<core::ExprId>>& shapes,
                              const core::AttrStore& attrs = core::AttrStore(), size_t num_outputs = 1,
                              const std::vector<DType>& dtypes = {}) {
  SymResult r;
  const kernels::OpDef* op = kernels::find_op(name);
  if (!op) {
    r.status = not_found(std::string("no op ") + name);
    return r;
  }
  kernels::ShapeCtx ctx(pool, attrs.view());
  ctx.node_name = "sym";
  ctx.op_type = name;
  for (size_t i = 0; i < shapes.size(); ++i) {
    kernels::SymTensor t;
    t.dtype = i < dtypes.size() ? dtypes[i] : DType::kF32;
    t.shape = shapes[i];
    ctx.inputs.push_back(std::move(t));
  }
  ctx.outputs.resize(num_outputs);
  r.status = op->shape(ctx);
  r.outputs = ctx.outputs;
  r.guards = ctx.guards;
  return r;
}

/// "H - 2 >= 1", "C == 3", "H % 2 == 0".
inline std::string guard_to_string(const core::ExprPool& pool, const kernels::Guard& g) {
  const char* op = g.op == kernels::Guard::Op::kEq ? " == " : g.op == kernels::Guard::Op::kGe ? " >= " : " % ";
  std::string s = pool.to_string(g.lhs) + op + pool.to_string(g.rhs);
  return g.op == kernels::Guard::Op::kDivisible ? s + " == 0" : s;
}

/// Every guard of `r`, rendered and joined with "; ".
inline std::string guards_to_string(const core::ExprPool& pool, const SymResult& r) {
  std::string s;
  for (const kernels::Guard& g : r.guards) s += (s.empty() ? "" : "; ") + guard_to_string(pool, g);
  return s;
}

/// Evaluates a symbolic shape at one value per dim of `pool` (as bind would).
inline std::vector<int64_t> eval_shape(const core::ExprPool& pool, const std::vector<core::ExprId>& shape,
                                       const std::vector<int64_t>& dim_values) {
  std::vector<int64_t> values(pool.size());
  core::eval_exprs(pool.nodes().data(), pool.size(), dim_values.data(), values.data(), nullptr);
  std::vector<int64_t> out;
  for (core::ExprId e : shape) out.push_back(values[e]);
  return out;
}

}  // namespace kiln::testing
