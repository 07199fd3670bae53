#pragma once
// Reading small integer inputs (shapes, axes, starts...) during shape inference.

#include <limits>
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "core/status.h"

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

/// The operands Gather and GatherElements share: two inputs, data of rank >= 1 and i64/i32
/// indices.
inline Status expect_gather_operands(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  if (c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32)
    return c.error(std::string("indices input #1 has dtype ") + dtype_name(c.in(1).dtype) + ", expected i64 or i32");
  if (c.rank(0) == 0) return c.error("cannot gather from a scalar (rank 0)");
  return ok_status();
}

/// When input i holds constant i64/i32 indices, requires an axis of size `axis_size` to hold
/// every one of them (negative ones count from the end): an export error when provably not,
/// a guard when the size is symbolic. `where` names the axis, e.g. " on axis 1 of [b, 64]".
inline Status require_indices_fit(ShapeCtx& c, size_t i, ExprId axis_size, const std::string& where) {
  core::ExprPool& p = c.pool;
  const SymTensor& idx = c.in(i);
  int64_t n = 1;
  for (ExprId e : idx.shape) n = p.is_const(e) && n >= 0 ? n * p.const_value(e) : -1;
  if (!idx.const_data || n <= 0) return ok_status();
  int64_t lo = 0, hi = -1;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t v = idx.dtype == DType::kI64 ? static_cast<const int64_t*>(idx.const_data)[k]
                                               : static_cast<const int32_t*>(idx.const_data)[k];
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // No axis holds INT64_MIN or INT64_MAX as an index (and -lo, hi + 1 would overflow).
  if (lo == std::numeric_limits<int64_t>::min() || hi == std::numeric_limits<int64_t>::max())
    return c.error("index " + std::to_string(lo == std::numeric_limits<int64_t>::min() ? lo : hi) +
                   " is out of range for any axis" + where);
  if (hi >= 0) KILN_TRY(c.require_ge(axis_size, p.constant(hi + 1), "for index " + std::to_string(hi) + where));
  if (lo < 0) KILN_TRY(c.require_ge(axis_size, p.constant(-lo), "for index " + std::to_string(lo) + where));
  return ok_status();
}

}  // namespace kiln::kernels
