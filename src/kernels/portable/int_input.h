#pragma once
// Reading small integer inputs (shapes, axes, starts...) during shape inference.

#include <vector>

#include "kernels/kernel.h"

namespace kiln::kernels {

/// ShapeCtx::int_values, except that an input of constant shape with no elements is known
/// to be the empty list even when it carries no data pointer.
inline bool known_ints(ShapeCtx& c, size_t i, std::vector<ExprId>* out) {
  if (c.int_values(i, out)) return true;
  if (!c.has_input(i)) return false;
  const SymTensor& t = c.in(i);
  for (ExprId d : t.shape)
    if (c.pool.is_const_value(d, 0)) return true;  // out was cleared by int_values
  return false;
}

/// known_ints for values that must all be constants.
inline bool known_const_ints(ShapeCtx& c, size_t i, std::vector<int64_t>* out) {
  std::vector<ExprId> e;
  out->clear();
  if (!known_ints(c, i, &e)) return false;
  for (ExprId x : e) {
    if (!c.pool.is_const(x)) return false;
    out->push_back(c.pool.const_value(x));
  }
  return true;
}

}  // namespace kiln::kernels
