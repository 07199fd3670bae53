// Runtime branches (see src/format/control.h): KilnIf and KilnElse mark the blocks and do
// nothing themselves (execute jumps at them); KilnSelect copies the taken block's results to
// the branch's outputs; KilnAssert checks, when its block runs, a shape guard the block
// needs (a guard of a block must not refuse shapes at bind where the other block runs).
//   KilnIf(cond)   attrs: then_len. cond: one bool (or integer) element, nonzero = then.
//   KilnElse()     attrs: else_len.
//   KilnSelect(cond, t_0..t_{n-1}, e_0..e_{n-1}) -> y_0..y_{n-1}: y_k = cond ? t_k : e_k.
//   KilnAssert()   attrs: relation (0 ==, 1 >=, 2 divisible), lhs, rhs (expression ids), text.
// Runtime loops (control.h): the kernels move values; execute decides whether to run the body.
//   KilnLoop(cond, init_0..init_{n-1}) -> (iter, slot_0..slot_{n-1})
//       attrs: body_len, trip (expression id of the trip count). iter = 0, slot_k = init_k.
//   KilnEndLoop(iter, cond, slot_0..slot_{n-1}, result_0..result_{n-1}, scan_0..scan_{m-1})
//       -> (count, out_0..out_{m-1})   attrs: carried = n, trip, reverse (optional, one per
//       scan value). out_j row `iter` (out_j is [trip, scan_j's shape]; row trip - 1 - iter
//       where reverse[j] is nonzero) = scan_j; slot_k = result_k (in
//       place: the slots are the loop's state); iter += 1; count = iter.
#include <cstring>

#include "kernels/kernel.h"
#include "core/status.h"

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
    case DType::kF32:
    case DType::kI8:
    case DType::kU8: return false;
  }
  return false;
}

}  // namespace

Status kiln_if_shape(ShapeCtx& c);
Status kiln_else_shape(ShapeCtx& c);
Status kiln_assert_shape(ShapeCtx& c);
Status kiln_select_shape(ShapeCtx& c);

bool branch_condition(const TensorView& cond) { return condition_true(cond); }

Status nonzero_shape(ShapeCtx& c);
Status compress_shape(ShapeCtx& c);
Status unique_shape(ShapeCtx& c);
Status nms_shape(ShapeCtx& c);
Status topk_shape(ShapeCtx& c);

bool produces_data_dim(const OpDef& op, const core::Attrs& attrs) {
  // TopK with K read from the data; an If result sized by the branch taken.
  if (op.shape == &topk_shape || op.shape == &kiln_select_shape) return attrs.has("dim");
  return op.shape == &nonzero_shape || op.shape == &compress_shape || op.shape == &unique_shape || op.shape == &nms_shape;
}

Result<ExprId> data_dim_attr(ShapeCtx& c) {
  const int64_t d = c.attrs.get_int("dim", -1);
  if (d < 0 || static_cast<size_t>(d) >= c.pool.dims().size() || !c.pool.dims()[static_cast<size_t>(d)].data)
    return c.error("attribute 'dim' must name a data-dependent dim");
  return c.pool.dim(static_cast<int>(d));
}

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
  // attrs dim and axes: per result, the axis (or -1) the branch taken sizes, a data-dependent dim.
  std::vector<int64_t> axes;
  ExprId branch_size = core::kNoExpr;
  if (c.attrs.has("dim")) {
    KILN_ASSIGN_OR_RETURN(branch_size, data_dim_attr(c));
    const int64_t* p = c.attrs.ints("axes");
    axes.assign(p, p + c.attrs.ints_size("axes"));
    if (axes.size() != n) return c.error("attribute 'axes' must name one axis (or -1) per result");
  }
  for (size_t k = 0; k < n; ++k) {
    const SymTensor& t = c.in(1 + k);
    const SymTensor& e = c.in(1 + n + k);
    const std::string which = "output " + std::to_string(k);
    if (t.dtype != e.dtype)
      return c.error(which + " is " + dtype_name(t.dtype) + " in the then branch and " + dtype_name(e.dtype) + " in the else branch");
    if (t.shape.size() != e.shape.size())
      return c.error(which + " has shape " + c.pool.shape_to_string(t.shape) + " in the then branch and " +
                     c.pool.shape_to_string(e.shape) + " in the else branch; Kiln needs one shape (of one rank)");
    c.out(k).dtype = t.dtype;
    c.out(k).shape = t.shape;
    const int64_t sized = k < axes.size() ? axes[k] : -1;  // the axis the branch taken sizes
    for (size_t a = 0; a < t.shape.size(); ++a) {
      if (static_cast<int64_t>(a) == sized) {
        c.out(k).shape[a] = branch_size;
        continue;
      }
      KILN_TRY(c.require_eq(t.shape[a], e.shape[a], "(" + which + " of both branches, axis " + std::to_string(a) + ")"));
    }
  }
  return ok_status();
}

KernelStatus kiln_select_run(const RunCtx& c) {
  const uint32_t n = (c.num_inputs - 1) / 2;
  if (c.num_outputs != n) return KernelStatus::kInvalidValue;
  const bool taken = condition_true(c.in(0));
  const int64_t* axes = c.produced_dim ? c.attrs.ints("axes") : nullptr;
  for (uint32_t k = 0; k < n; ++k) {
    const TensorView& from = c.in(taken ? 1 + k : 1 + n + k);
    TensorView& y = c.out(k);
    if (from.dtype != y.dtype) return KernelStatus::kInvalidValue;
    if (axes && axes[k] >= 0) {  // y is reserved at the bound; the branch's size is the dim
      if (axes[k] >= from.rank) return KernelStatus::kInvalidValue;
      *c.produced_dim = from.dims[axes[k]];
      if (from.numel() > y.numel()) return KernelStatus::kInvalidValue;
    } else if (from.numel() != y.numel()) {
      return KernelStatus::kInvalidValue;
    }
    if (from.numel() > 0 && y.data != from.data) std::memcpy(y.data, from.data, from.nbytes());
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

namespace {

constexpr size_t kMaxLoopCarried = 1024;

Status check_trip(ShapeCtx& c) {
  const int64_t trip = c.attrs.get_int("trip", -1);
  if (trip < 0 || static_cast<size_t>(trip) >= c.pool.size()) return c.error("attribute 'trip' must be an expression id");
  return ok_status();
}

}  // namespace

Status kiln_loop_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1 + kMaxLoopCarried));
  KILN_TRY(check_condition(c));
  KILN_TRY(check_trip(c));
  if (c.attrs.get_int("body_len", -1) < 0) return c.error("attribute 'body_len' must be >= 0");
  if (c.outputs.size() != c.num_inputs()) return c.error("needs one output per loop-carried value, and the iteration");
  c.out(0).dtype = DType::kI64;
  c.out(0).shape.clear();
  for (size_t k = 1; k < c.num_inputs(); ++k) {
    c.out(k).dtype = c.in(k).dtype;
    c.out(k).shape = c.in(k).shape;
  }
  return ok_status();
}

KernelStatus kiln_loop_run(const RunCtx& c) {
  if (c.num_outputs != c.num_inputs || c.out(0).dtype != DType::kI64 || c.out(0).numel() != 1) return KernelStatus::kInvalidValue;
  *static_cast<int64_t*>(c.out(0).data) = 0;
  for (uint32_t k = 1; k < c.num_inputs; ++k) {
    const TensorView& from = c.in(k);
    TensorView& slot = c.out(k);
    if (from.nbytes() != slot.nbytes()) return KernelStatus::kInvalidValue;
    if (slot.nbytes() > 0 && slot.data != from.data) std::memmove(slot.data, from.data, slot.nbytes());
  }
  return KernelStatus::kOk;
}

Status kiln_end_loop_shape(ShapeCtx& c) {
  KILN_TRY(check_trip(c));
  const int64_t n = c.attrs.get_int("carried", -1);
  if (n < 0 || static_cast<size_t>(n) > kMaxLoopCarried || c.num_inputs() < 2 + 2 * static_cast<size_t>(n))
    return c.error("attribute 'carried' must count the slots and results among its inputs");
  KILN_TRY(c.expect_inputs(c.num_inputs(), c.num_inputs()));
  const SymTensor& iter = c.in(0);
  if (iter.dtype != DType::kI64 || !iter.shape.empty()) return c.error("input 0 must be the loop's iteration (an int64 scalar)");
  for (ExprId d : c.in(1).shape)
    if (!c.pool.is_const_value(d, 1)) return c.error("the body's condition must hold exactly one element");
  for (size_t k = 0; k < static_cast<size_t>(n); ++k) {
    const SymTensor& slot = c.in(2 + k);
    const SymTensor& r = c.in(2 + static_cast<size_t>(n) + k);
    const std::string which = "loop-carried value " + std::to_string(k);
    if (slot.dtype != r.dtype)
      return c.error(which + " enters the body as " + dtype_name(slot.dtype) + " and leaves it as " + dtype_name(r.dtype));
    bool same = slot.shape.size() == r.shape.size();
    for (size_t a = 0; same && a < slot.shape.size(); ++a) same = slot.shape[a] == r.shape[a] || c.pool.always(slot.shape[a], core::ExprPool::Relation::kEq, r.shape[a]);
    if (!same)
      return c.error(which + " enters the body as " + c.pool.shape_to_string(slot.shape) + " and leaves it as " +
                     c.pool.shape_to_string(r.shape) + "; Kiln runs loops whose carried values keep their shape");
  }
  const size_t scans = c.num_inputs() - 2 - 2 * static_cast<size_t>(n);
  if (c.outputs.size() != 1 + scans) return c.error("needs the iteration count and one output per scan value");
  if (c.attrs.has("reverse") && c.attrs.ints_size("reverse") != scans) return c.error("attribute 'reverse' needs one value per scan value");
  c.out(0).dtype = DType::kI64;
  c.out(0).shape.clear();
  const ExprId trip = static_cast<ExprId>(c.attrs.get_int("trip", 0));
  for (size_t j = 0; j < scans; ++j) {
    const SymTensor& v = c.in(2 + 2 * static_cast<size_t>(n) + j);
    if (v.shape.size() + 1 > static_cast<size_t>(kMaxRank)) return c.error("scan value " + std::to_string(j) + " has too high a rank");
    c.out(1 + j).dtype = v.dtype;
    c.out(1 + j).shape = {trip};
    c.out(1 + j).shape.insert(c.out(1 + j).shape.end(), v.shape.begin(), v.shape.end());
  }
  return ok_status();
}

KernelStatus kiln_end_loop_run(const RunCtx& c) {
  const int64_t n = c.attrs.get_int("carried", -1);
  if (n < 0 || c.num_inputs < 2 + 2 * static_cast<uint32_t>(n) || c.num_outputs < 1) return KernelStatus::kInvalidValue;
  const TensorView& iter_t = c.in(0);
  if (iter_t.dtype != DType::kI64 || iter_t.numel() != 1) return KernelStatus::kInvalidValue;
  int64_t* iter = static_cast<int64_t*>(iter_t.data);  // the loop's state: updated in place
  const int64_t i = *iter;
  const uint32_t first_scan = 2 + 2 * static_cast<uint32_t>(n);
  for (uint32_t j = first_scan; j < c.num_inputs; ++j) {
    const TensorView& v = c.in(j);
    TensorView& out = c.out(1 + j - first_scan);
    const size_t row = v.nbytes();
    if (out.dtype != v.dtype || out.rank < 1 || i < 0 || i >= out.dims[0] || out.nbytes() != row * static_cast<size_t>(out.dims[0]))
      return KernelStatus::kInvalidValue;
    const uint32_t k = j - first_scan;
    const bool back = c.attrs.has("reverse") && k < c.attrs.ints_size("reverse") && c.attrs.ints("reverse")[k] != 0;
    const int64_t at = back ? out.dims[0] - 1 - i : i;
    if (row > 0) std::memcpy(static_cast<uint8_t*>(out.data) + row * static_cast<size_t>(at), v.data, row);
  }
  for (uint32_t k = 0; k < static_cast<uint32_t>(n); ++k) {
    const TensorView& slot = c.in(2 + k);
    const TensorView& r = c.in(2 + static_cast<uint32_t>(n) + k);
    if (slot.nbytes() != r.nbytes()) return KernelStatus::kInvalidValue;
    if (slot.nbytes() > 0 && slot.data != r.data) std::memmove(slot.data, r.data, slot.nbytes());
  }
  *iter = i + 1;
  TensorView& count = c.out(0);
  if (count.dtype != DType::kI64 || count.numel() != 1) return KernelStatus::kInvalidValue;
  *static_cast<int64_t*>(count.data) = i + 1;
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
