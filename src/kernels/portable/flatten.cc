// Flatten (view): input 0 as a matrix [prod(dims[:axis]), prod(dims[axis:])].
#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

Status flatten_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  const int64_t rank = c.rank(0);
  int64_t axis = c.attrs.get_int("axis", 1);
  if (axis < -rank || axis > rank)  // axis == rank is allowed: [numel, 1]
    return c.error("axis " + std::to_string(axis) + " is out of range [" + std::to_string(-rank) + ", " +
                   std::to_string(rank) + "] for an input of rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  core::ExprPool& p = c.pool;
  ExprId outer = p.constant(1), inner = p.constant(1);
  for (int64_t k = 0; k < rank; ++k) {
    ExprId& acc = k < axis ? outer : inner;
    acc = p.mul(acc, c.in(0).shape[k]);
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = {outer, inner};
  fold_view(c);  // known values keep their order
  return ok_status();
}

}  // namespace kiln::kernels
