// Not, And, Or, Xor: bool operands (any non-zero byte is true), numpy broadcasting for the
// binary ones, bool output. Known values (0/1) fold; And and Or also fold when one side
// alone decides (false And x, true Or x).
#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

enum class LogicOp { kAnd, kOr, kXor };

Status expect_bools(ShapeCtx& c) {
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.in(i).dtype != DType::kBool)
      return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + ", expected bool");
  return ok_status();
}

/// a op b on truths in {1, 0, -1 = unknown}; -1 when undecided.
int decide(LogicOp op, int a, int b) {
  switch (op) {
    case LogicOp::kAnd: return a == 0 || b == 0 ? 0 : a == 1 && b == 1 ? 1 : -1;
    case LogicOp::kOr: return a == 1 || b == 1 ? 1 : a == 0 && b == 0 ? 0 : -1;
    case LogicOp::kXor: return a < 0 || b < 0 ? -1 : a ^ b;
  }
  return -1;
}

Status logic_shape(ShapeCtx& c, LogicOp op) {
  KILN_TRY(c.expect_inputs(2, 2));
  KILN_TRY(expect_bools(c));
  KILN_ASSIGN_OR_RETURN(std::vector<ExprId> shape, c.broadcast(c.in(0).shape, c.in(1).shape));
  c.out(0).dtype = DType::kBool;
  c.out(0).shape = std::move(shape);
  fold_broadcast(c, 2, [&](const std::vector<ExprId>& v) {
    const int r = decide(op, truth_of(c.pool, v[0]), truth_of(c.pool, v[1]));
    return r < 0 ? core::kNoExpr : c.pool.constant(r);
  });
  return ok_status();
}

template <LogicOp op>
KernelStatus logic_run(const RunCtx& c) {
  if (c.in(0).dtype != DType::kBool || c.in(1).dtype != DType::kBool || c.out(0).dtype != DType::kBool)
    return KernelStatus::kInvalidValue;
  if (c.in(0).rank > c.out(0).rank || c.in(1).rank > c.out(0).rank) return KernelStatus::kInvalidValue;
  const auto* a = c.in(0).as<uint8_t>();
  const auto* b = c.in(1).as<uint8_t>();
  auto* y = c.out(0).as<uint8_t>();
  broadcast_binary(c.out(0), c.inputs, a, b, y, [](uint8_t u, uint8_t v) -> uint8_t {
    const bool x = u != 0, z = v != 0;
    return op == LogicOp::kAnd ? x && z : op == LogicOp::kOr ? x || z : x != z;
  });
  return KernelStatus::kOk;
}

}  // namespace

Status logical_not_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_TRY(expect_bools(c));
  c.out(0).dtype = DType::kBool;
  c.out(0).shape = c.in(0).shape;
  fold_broadcast(c, 1, [&](const std::vector<ExprId>& v) {
    const int t = truth_of(c.pool, v[0]);
    return t < 0 ? core::kNoExpr : c.pool.constant(1 - t);
  });
  return ok_status();
}

KernelStatus logical_not_run(const RunCtx& c) {
  if (c.in(0).dtype != DType::kBool || c.out(0).dtype != DType::kBool) return KernelStatus::kInvalidValue;
  const auto* x = c.in(0).as<uint8_t>();
  auto* y = c.out(0).as<uint8_t>();
  const int64_t n = c.out(0).numel();
  if (c.in(0).numel() != n) return KernelStatus::kInvalidValue;
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] == 0 ? 1 : 0;
  return KernelStatus::kOk;
}

Status logical_and_shape(ShapeCtx& c) { return logic_shape(c, LogicOp::kAnd); }
Status logical_or_shape(ShapeCtx& c) { return logic_shape(c, LogicOp::kOr); }
Status logical_xor_shape(ShapeCtx& c) { return logic_shape(c, LogicOp::kXor); }

KernelStatus logical_and_run(const RunCtx& c) { return logic_run<LogicOp::kAnd>(c); }
KernelStatus logical_or_run(const RunCtx& c) { return logic_run<LogicOp::kOr>(c); }
KernelStatus logical_xor_run(const RunCtx& c) { return logic_run<LogicOp::kXor>(c); }

}  // namespace kiln::kernels
