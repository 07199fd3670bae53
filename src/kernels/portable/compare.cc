// Equal, Less, Greater, LessOrEqual, GreaterOrEqual: two operands of one numeric dtype
// (f32, i64, i32; Equal also bool), numpy broadcasting, bool output. Known integer values
// fold to 0/1 only where the comparison is provable for every dim value.
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

Status compare_shape(ShapeCtx& c, CmpOp op) {
  KILN_TRY(c.expect_inputs(2, 2));
  if (c.in(0).dtype != c.in(1).dtype)
    return c.error(std::string("operands have different dtypes ") + dtype_name(c.in(0).dtype) + " and " +
                   dtype_name(c.in(1).dtype));
  if (c.in(0).dtype == DType::kBool && op != CmpOp::kEq)
    return c.error("does not accept bool operands (only Equal compares bools)");
  KILN_ASSIGN_OR_RETURN(std::vector<ExprId> shape, c.broadcast(c.in(0).shape, c.in(1).shape));
  c.out(0).dtype = DType::kBool;
  c.out(0).shape = std::move(shape);
  fold_broadcast(c, 2, [&](const std::vector<ExprId>& v) { return fold_compare(c.pool, op, v[0], v[1]); });
  return ok_status();
}

template <CmpOp op, typename T>
inline bool holds(T a, T b) {
  if constexpr (op == CmpOp::kEq) return a == b;
  if constexpr (op == CmpOp::kLt) return a < b;
  if constexpr (op == CmpOp::kGt) return a > b;
  if constexpr (op == CmpOp::kLe) return a <= b;
  return a >= b;
}

template <CmpOp op, typename T>
KernelStatus compare_typed(const RunCtx& c) {
  const T* a = c.in(0).as<T>();
  const T* b = c.in(1).as<T>();
  auto* y = c.out(0).as<uint8_t>();
  broadcast_binary(c.out(0), c.inputs, a, b, y, [](T u, T v) -> uint8_t {
    if constexpr (std::is_same_v<T, uint8_t>) return holds<op>(u != 0, v != 0);  // bool: non-zero is true
    return holds<op>(u, v);
  });
  return KernelStatus::kOk;
}

template <CmpOp op>
KernelStatus compare_run(const RunCtx& c) {
  if (c.in(0).dtype != c.in(1).dtype || c.out(0).dtype != DType::kBool) return KernelStatus::kInvalidValue;
  if (c.in(0).rank > c.out(0).rank || c.in(1).rank > c.out(0).rank) return KernelStatus::kInvalidValue;
  switch (c.in(0).dtype) {
    case DType::kF32: return compare_typed<op, float>(c);
    case DType::kI64: return compare_typed<op, int64_t>(c);
    case DType::kI32: return compare_typed<op, int32_t>(c);
    case DType::kBool: return compare_typed<op, uint8_t>(c);
    case DType::kI8: return compare_typed<op, int8_t>(c);
    case DType::kU8: return compare_typed<op, uint8_t>(c);
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace

Status equal_shape(ShapeCtx& c) { return compare_shape(c, CmpOp::kEq); }
Status less_shape(ShapeCtx& c) { return compare_shape(c, CmpOp::kLt); }
Status greater_shape(ShapeCtx& c) { return compare_shape(c, CmpOp::kGt); }
Status less_or_equal_shape(ShapeCtx& c) { return compare_shape(c, CmpOp::kLe); }
Status greater_or_equal_shape(ShapeCtx& c) { return compare_shape(c, CmpOp::kGe); }

KernelStatus equal_run(const RunCtx& c) { return compare_run<CmpOp::kEq>(c); }
KernelStatus less_run(const RunCtx& c) { return compare_run<CmpOp::kLt>(c); }
KernelStatus greater_run(const RunCtx& c) { return compare_run<CmpOp::kGt>(c); }
KernelStatus less_or_equal_run(const RunCtx& c) { return compare_run<CmpOp::kLe>(c); }
KernelStatus greater_or_equal_run(const RunCtx& c) { return compare_run<CmpOp::kGe>(c); }

}  // namespace kiln::kernels
