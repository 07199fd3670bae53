// Shape: the input's dims as a 1-D i64 tensor, optionally a slice of them (opset 15
// attributes start and end: negative counts from the rank, then clamped into [0, rank]).
// Size: the input's element count as an i64 scalar.
// At export the outputs carry the dims (or their product) as expressions (sym_values), which
// is how shape arithmetic folds; the kernels write the actual values.
#include <algorithm>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// The [first, last) range of axes the attributes select for an input of rank r.
void selected_axes(const core::Attrs& attrs, int64_t r, int64_t* first, int64_t* last) {
  auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  *first = clamp(attrs.get_int("start", 0));
  *last = std::max(*first, clamp(attrs.get_int("end", r)));
}

}  // namespace

Status shape_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  int64_t first, last;
  selected_axes(c.attrs, c.rank(0), &first, &last);
  c.out(0).dtype = DType::kI64;
  c.out(0).shape = {c.pool.constant(last - first)};
  c.out(0).sym_values.assign(c.in(0).shape.begin() + first, c.in(0).shape.begin() + last);
  return ok_status();
}

KernelStatus shape_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  int64_t first, last;
  selected_axes(c.attrs, x.rank, &first, &last);
  if (c.out(0).dtype != DType::kI64 || c.out(0).numel() != last - first) return KernelStatus::kInvalidValue;
  int64_t* y = c.out(0).as<int64_t>();
  for (int64_t k = first; k < last; ++k) y[k - first] = x.dims[k];
  return KernelStatus::kOk;
}

Status size_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  ExprId n = c.pool.constant(1);
  for (ExprId d : c.in(0).shape) n = c.pool.mul(n, d);
  c.out(0).dtype = DType::kI64;
  c.out(0).shape = {};
  c.out(0).sym_values = {n};
  return ok_status();
}

KernelStatus size_run(const RunCtx& c) {
  if (c.out(0).dtype != DType::kI64 || c.out(0).numel() != 1) return KernelStatus::kInvalidValue;
  *c.out(0).as<int64_t>() = c.in(0).numel();
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
