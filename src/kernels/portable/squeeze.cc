// Squeeze (view): removes size-1 axes, listed by the `axes` attribute (before opset 13) or
// constant input #1 (opset 13); without axes (or with an empty list), every axis whose
// size is the constant 1.
#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

Status squeeze_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 2));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& in = c.in(0).shape;
  const int64_t rank = c.rank(0);
  std::vector<int64_t> axes;  // empty: squeeze every constant 1
  if (c.attrs.has("axes")) {
    axes.assign(c.attrs.ints("axes"), c.attrs.ints("axes") + c.attrs.ints_size("axes"));
  } else if (c.has_input(1)) {
    if (!known_const_ints(c, 1, &axes)) return c.error("axes input #1 must be a constant");
  }
  std::vector<bool> drop(rank, false);
  if (axes.empty()) {  // a symbolic dim stays even when it is 1 at bind: the output rank is fixed here
    for (int64_t k = 0; k < rank; ++k) drop[k] = p.is_const_value(in[k], 1);
  }
  if (rank == 0 && !axes.empty()) return c.error("cannot squeeze a scalar (rank 0)");
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t k, c.normalize_axis(a, rank));
    if (drop[k]) return c.error("axis " + std::to_string(a) + " is listed twice in axes");
    if (p.is_const(in[k]) && p.const_value(in[k]) != 1)
      return c.error("cannot squeeze axis " + std::to_string(a) + " of " + p.shape_to_string(in) + ": its size is " +
                     std::to_string(p.const_value(in[k])) + ", not 1");
    KILN_TRY(
        c.require_eq(in[k], p.constant(1), "to squeeze axis " + std::to_string(a) + " of " + p.shape_to_string(in)));
    drop[k] = true;
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape.clear();
  for (int64_t k = 0; k < rank; ++k)
    if (!drop[k]) c.out(0).shape.push_back(in[k]);
  fold_view(c);  // known values keep their order
  return ok_status();
}

}  // namespace kiln::kernels
