// PRelu: Y = X where X >= 0, else slope * X (NaN passes through). The slope broadcasts one
// way onto X (ONNX unidirectional broadcasting): Y has X's shape and every slope axis,
// aligned to X's trailing axes, is 1 or X's size (scalar, per-channel [C, 1, 1], full).
// f32 only.
#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"
#include "core/status.h"

namespace kiln::kernels {

Status prelu_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  const std::vector<ExprId>& s = c.in(1).shape;
  const std::string contract = "slope (input #1) " + p.shape_to_string(s) + " must broadcast to X's shape " +
                               p.shape_to_string(x);
  if (s.size() > x.size()) return c.error(contract + " (it has more axes than X)");
  // Numpy broadcasting (which guards X's size == slope's where neither is the constant 1),
  // then the one-way rule: the result must be X's shape, so where X's size is 1 the slope's
  // must be 1 too.
  Result<std::vector<ExprId>> both = c.broadcast(x, s);
  if (!both.ok()) return c.error(contract + " (each slope axis, aligned to X's last axes, is 1 or X's size)");
  for (size_t k = 0; k < x.size(); ++k) {
    ExprId d = both.value()[k];
    if (d == x[k] || !p.is_const_value(x[k], 1)) continue;  // the latter: guarded equal above
    if (p.is_const(d))
      return c.error(contract + " (its size " + p.to_string(d) + " would stretch X's axis " + std::to_string(k) +
                     " of size 1)");
    KILN_TRY(c.require_eq(d, x[k], "(" + contract + ")"));
  }
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = x;
  return ok_status();
}

KernelStatus prelu_run(const RunCtx& c) {
  const float* x = c.in(0).as<float>();
  const float* slope = c.in(1).as<float>();
  float* y = c.out(0).as<float>();
  broadcast_binary(c.out(0), c.inputs, x, slope, y, [](float v, float a) { return v < 0.f ? a * v : v; });
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
