// Runtime branches (see src/format/control.h): KilnIf and KilnElse mark the blocks and do
// nothing themselves (execute jumps at them); KilnSelect copies the taken block's results to
// the branch's outputs; KilnAssert checks, when its block runs, a shape guard the block
// needs (a guard of a block must not refuse shapes at bind where the other block runs).
//   KilnIf(cond)   attrs: then_len. cond: one bool (or integer) element, nonzero = then.
//   KilnElse()     attrs: else_len.
//   KilnSelect(cond, t_0..t_{n-1}, e_0..e_{n-1}) -> y_0..y_{n-1}: y_k = cond ? t_k : e_k.
//   KilnAssert()   attrs: relation (0 ==, 1 >=, 2 divisible), lhs, rhs (expression ids), text.
#include <cstring>

#include "kernels/kernel.h"

namespace kiln::kernels {

namespace {

Status check_condition(ShapeCtx& c) {
  const SymTensor& cond = c.in(0);
  for (ExprId d : cond.shape)
    if (!c.pool.is_const_value(d, 1))
      return c.error("condition " + c.pool.shape_to_string(cond.shape) + " must hold exactly one element");
  if (cond.dtype == DType::kF32) return c.error("condition must be bool or integer, got f32");
  return ok_status();
}

bool condition_true(const TensorView& t) {
  if (t.numel() != 1) return false;
  switch (t.dtype) {
    case DType::kBool: return *static_cast<const uint8_t*>(t.data) != 0;
    case DType::kI32: return *static_cast<const int32_t*>(t.data) != 0;
    case DType::kI64: return *static_cast<const int64_t*>(t.data) != 0;
    case DType::kF32: return false;
  }
  return false;
}

}  // namespace

Status kiln_if_shape(ShapeCtx& c);
Status kiln_else_shape(ShapeCtx& c);
Status kiln_assert_shape(ShapeCtx& c);

bool branch_condition(const TensorView& cond) { return condition_true(cond); }

bool produces_no_outputs(const OpDef& op) {
  return op.shape == &kiln_if_shape || op.shape == &kiln_else_shape || op.shape == &kiln_assert_shape;
}

Status kiln_if_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_TRY(check_condition(c));
  if (c.attrs.get_int("then_len", -1) < 0) return c.error("attribute 'then_len' must be >= 0");
  return ok_status();
}

KernelStatus kiln_if_run(const RunCtx&) { return KernelStatus::kOk; }  // execute jumps here

Status kiln_else_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(0, 0));
  if (c.attrs.get_int("else_len", -1) < 0) return c.error("attribute 'else_len' must be >= 0");
  return ok_status();
}

KernelStatus kiln_else_run(const RunCtx&) { return KernelStatus::kOk; }

Status kiln_select_shape(ShapeCtx& c) {
  if (c.num_inputs() < 3 || c.num_inputs() % 2 != 1)
    return c.error("expects a condition and as many then results as else results, got " + std::to_string(c.num_inputs()) + " inputs");
  KILN_TRY(c.expect_inputs(c.num_inputs(), c.num_inputs()));
  KILN_TRY(check_condition(c));
  const size_t n = (c.num_inputs() - 1) / 2;
  if (c.outputs.size() != n)
    return c.error("has " + std::to_string(n) + " results per branch but " + std::to_string(c.outputs.size()) + " outputs");
  for (size_t k = 0; k < n; ++k) {
    const SymTensor& t = c.in(1 + k);
    const SymTensor& e = c.in(1 + n + k);
    const std::string which = "output " + std::to_string(k);
    if (t.dtype != e.dtype)
      return c.error(which + " is " + dtype_name(t.dtype) + " in the then branch and " + dtype_name(e.dtype) + " in the else branch");
    if (t.shape.size() != e.shape.size())
      return c.error(which + " has shape " + c.pool.shape_to_string(t.shape) + " in the then branch and " +
                     c.pool.shape_to_string(e.shape) + " in the else branch; Kiln needs one shape (of one rank)");
    for (size_t a = 0; a < t.shape.size(); ++a)
      KILN_TRY(c.require_eq(t.shape[a], e.shape[a], "(" + which + " of both branches, axis " + std::to_string(a) + ")"));
    c.out(k).dtype = t.dtype;
    c.out(k).shape = t.shape;
  }
  return ok_status();
}

KernelStatus kiln_select_run(const RunCtx& c) {
  const uint32_t n = (c.num_inputs - 1) / 2;
  if (c.num_outputs != n) return KernelStatus::kInvalidValue;
  const bool taken = condition_true(c.in(0));
  for (uint32_t k = 0; k < n; ++k) {
    const TensorView& from = c.in(taken ? 1 + k : 1 + n + k);
    TensorView& y = c.out(k);
    if (from.numel() != y.numel() || from.dtype != y.dtype) return KernelStatus::kInvalidValue;
    if (y.numel() > 0 && y.data != from.data) std::memcpy(y.data, from.data, y.nbytes());
  }
  return KernelStatus::kOk;
}

Status kiln_assert_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(0, 0));
  const int64_t rel = c.attrs.get_int("relation", -1), lhs = c.attrs.get_int("lhs", -1), rhs = c.attrs.get_int("rhs", -1);
  if (rel < 0 || rel > 2) return c.error("attribute 'relation' must be 0 (==), 1 (>=) or 2 (divisible)");
  if (lhs < 0 || rhs < 0 || static_cast<size_t>(lhs) >= c.pool.size() || static_cast<size_t>(rhs) >= c.pool.size())
    return c.error("expression id out of range");
  return ok_status();
}

KernelStatus kiln_assert_run(const RunCtx& c) {
  const int64_t rel = c.attrs.get_int("relation", -1);
  const int64_t l = c.expr_values[c.attrs.get_int("lhs", 0)], r = c.expr_values[c.attrs.get_int("rhs", 0)];
  const bool holds = rel == 0 ? l == r : rel == 1 ? l >= r : (r != 0 && core::floor_mod(l, r) == 0);
  return holds ? KernelStatus::kOk : KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
