// SymbolicInts: materializes an integer tensor whose elements export folded into SymExprs
// (e.g. Shape -> Gather -> Concat feeding an op that reads the values at run time).
// attrs: exprs (ints, ExprIds, one per element), to (ONNX dtype code: 7 int64, 6 int32),
// shape (ints; absent = 1-D of len(exprs)). No inputs.
#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status symbolic_ints_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(0, 0));
  uint32_t n = c.attrs.ints_size("exprs");
  const int64_t* ids = c.attrs.ints("exprs");
  int64_t to = c.attrs.get_int("to", 7);
  if (to != 7 && to != 6) return c.error("attribute 'to' must be 7 (int64) or 6 (int32)");
  c.out(0).dtype = to == 7 ? DType::kI64 : DType::kI32;
  c.out(0).sym_values.clear();
  for (uint32_t k = 0; k < n; ++k) {
    if (ids[k] < 0 || static_cast<size_t>(ids[k]) >= c.pool.size()) return c.error("expression id out of range");
    c.out(0).sym_values.push_back(static_cast<ExprId>(ids[k]));
  }
  c.out(0).shape.clear();
  if (c.attrs.has("shape")) {
    int64_t numel = 1;
    for (uint32_t k = 0; k < c.attrs.ints_size("shape"); ++k) {
      numel *= c.attrs.ints("shape")[k];
      c.out(0).shape.push_back(c.pool.constant(c.attrs.ints("shape")[k]));
    }
    if (numel != n) return c.error("shape does not match the number of expressions");
  } else {
    c.out(0).shape.push_back(c.pool.constant(n));
  }
  return ok_status();
}

KernelStatus symbolic_ints_run(const RunCtx& c) {
  uint32_t n = c.attrs.ints_size("exprs");
  const int64_t* ids = c.attrs.ints("exprs");
  TensorView& y = c.out(0);
  for (uint32_t k = 0; k < n; ++k) {
    int64_t v = c.expr_values[ids[k]];
    if (y.dtype == DType::kI64) y.as<int64_t>()[k] = v;
    else y.as<int32_t>()[k] = static_cast<int32_t>(v);
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
