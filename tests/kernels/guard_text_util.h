#pragma once
// Renders recorded guards as text, so symbolic tests can compare them as one string.

#include <string>

#include "sym_test_util.h"

namespace kiln::testing {

/// "H - 2 >= 1", "C == 3", "H % 2 == 0".
inline std::string guard_text(const core::ExprPool& pool, const kernels::Guard& g) {
  const char* op = g.op == kernels::Guard::Op::kEq ? " == " : g.op == kernels::Guard::Op::kGe ? " >= " : " % ";
  std::string s = pool.to_string(g.lhs) + op + pool.to_string(g.rhs);
  return g.op == kernels::Guard::Op::kDivisible ? s + " == 0" : s;
}

/// Every guard of `r`, rendered and joined with "; " ("" when none).
inline std::string guards_text(const core::ExprPool& pool, const SymResult& r) {
  std::string s;
  for (const kernels::Guard& g : r.guards) s += (s.empty() ? "" : "; ") + guard_text(pool, g);
  return s;
}

}  // namespace kiln::testing
