#include "kernels/portable/sym_values.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln::kernels {

namespace {

/// Operands within +-2^31 keep sums and products far from int64 overflow.
constexpr int64_t kSafeMagnitude = int64_t{1} << 31;

bool small_range(const core::ExprPool& p, ExprId e) {
  core::Interval r = p.range(e);
  return r.lo >= -kSafeMagnitude && r.hi <= kSafeMagnitude;
}

/// e >= v for every admissible dim value (by ranges, else by checking every assignment).
bool at_least(core::ExprPool& p, ExprId e, int64_t v) {
  return p.always(e, core::ExprPool::Relation::kGe, p.constant(v));
}

/// v wrapped to dtype t, as the kernel would store it.
int64_t wrap(DType t, uint64_t v) {
  return t == DType::kI32 ? static_cast<int32_t>(static_cast<uint32_t>(v)) : static_cast<int64_t>(v);
}

/// fold_int_op for f32 operands (integers within +-kMaxExactF32).
ExprId fold_f32_op(core::ExprPool& p, IntOp op, ExprId a, ExprId b) {
  if (!exact_in_f32(p, a) || !exact_in_f32(p, b)) return core::kNoExpr;
  ExprId r = core::kNoExpr;
  switch (op) {
    case IntOp::kAdd: r = p.add(a, b); break;
    case IntOp::kSub: r = p.sub(a, b); break;
    case IntOp::kMul: r = p.mul(a, b); break;
    case IntOp::kMax: r = p.max(a, b); break;
    case IntOp::kMin: r = p.min(a, b); break;
    case IntOp::kFmod:  // integers: exact in f32
      if (!p.is_const(b) || p.const_value(b) <= 0 || !at_least(p, a, 0)) return core::kNoExpr;
      r = p.mod(a, b);
      break;
    case IntOp::kMod: return core::kNoExpr;  // f32 Mod needs fmod=1
    case IntOp::kDiv: {  // true division: an integer only when b divides a
      if (!p.is_const(b) || p.const_value(b) == 0) return core::kNoExpr;
      const int64_t d = p.const_value(b), m = d < 0 ? -d : d;
      if (p.is_const(a) ? p.const_value(a) % m != 0 : !p.provably_divisible(a, m)) return core::kNoExpr;
      r = p.floordiv(a, p.constant(m));
      if (d < 0) r = p.sub(p.constant(0), r);
      break;
    }
  }
  return exact_in_f32(p, r) ? r : core::kNoExpr;
}

ExprId fold_constants(core::ExprPool& p, IntOp op, DType t, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case IntOp::kAdd: return p.constant(wrap(t, ua + ub));
    case IntOp::kSub: return p.constant(wrap(t, ua - ub));
    case IntOp::kMul: return p.constant(wrap(t, ua * ub));
    case IntOp::kMax: return p.constant(std::max(a, b));
    case IntOp::kMin: return p.constant(std::min(a, b));
    case IntOp::kDiv:
      if (b == 0) return core::kNoExpr;  // the kernel fails
      return p.constant(b == -1 ? wrap(t, 0 - ua) : a / b);  // lowest / -1 wraps to lowest
    case IntOp::kMod:
    case IntOp::kFmod: {
      if (b == 0) return core::kNoExpr;  // the kernel fails
      int64_t r = b == -1 ? 0 : a % b;
      if (op == IntOp::kMod && r != 0 && (r < 0) != (b < 0)) r += b;
      return p.constant(r);
    }
  }
  return core::kNoExpr;
}

}  // namespace

bool const_dims(const core::ExprPool& p, const std::vector<ExprId>& shape, std::vector<int64_t>* out) {
  out->clear();
  for (ExprId d : shape) {
    if (!p.is_const(d)) return false;
    out->push_back(p.const_value(d));
  }
  return true;
}

bool exact_in_f32(const core::ExprPool& p, ExprId e) {
  const core::Interval r = p.range(e);
  return r.lo >= -kMaxExactF32 && r.hi <= kMaxExactF32;
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool small_values(ShapeCtx& c, size_t i, std::vector<ExprId>* out) {
  out->clear();
  if (!c.has_input(i)) return false;
  const SymTensor& t = c.in(i);
  if (!t.sym_values.empty()) {
    *out = t.sym_values;
    return true;
  }
  std::vector<int64_t> dims;
  if (!const_dims(c.pool, t.shape, &dims)) return false;
  const int64_t n = numel_of(dims);
  if (n == 0) return true;  // nothing to know (e.g. Shape(x)[2:] of a rank-2 x)
  if (!t.const_data || n > kMaxSymValues) return false;
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = 0;
    switch (t.dtype) {
      case DType::kI64: v = static_cast<const int64_t*>(t.const_data)[k]; break;
      case DType::kI32: v = static_cast<const int32_t*>(t.const_data)[k]; break;
      case DType::kBool: v = static_cast<const uint8_t*>(t.const_data)[k] != 0; break;
      case DType::kI8: v = static_cast<const int8_t*>(t.const_data)[k]; break;
      case DType::kU8: v = static_cast<const uint8_t*>(t.const_data)[k]; break;
      case DType::kF32: {
        const float f = static_cast<const float*>(t.const_data)[k];
        if (!(std::fabs(f) <= static_cast<float>(kMaxExactF32)) || f != std::trunc(f)) return false;
        v = static_cast<int64_t>(f);
        break;
      }
    }
    out->push_back(c.pool.constant(v));
  }
  return true;
}

bool can_carry(ShapeCtx& c, std::vector<int64_t>* dims) {
  if (!const_dims(c.pool, c.out(0).shape, dims)) return false;
  return numel_of(*dims) <= kMaxSymValues;
}

std::vector<int64_t> broadcast_map(const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  const size_t rank = out.size(), lead = rank - std::min(rank, in.size());
  const int64_t total = numel_of(out);
  std::vector<int64_t> map(static_cast<size_t>(std::max<int64_t>(total, 0)), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t rest = e, src = 0, stride = 1;
    for (size_t k = rank; k-- > 0;) {
      const int64_t i = rest % out[k];
      rest /= out[k];
      if (k < lead) continue;
      const int64_t d = in[k - lead];
      if (d != 1) src += i * stride;
      stride *= d;
    }
    map[e] = src;
  }
  return map;
}

ExprId fold_int_op(core::ExprPool& p, IntOp op, DType t, ExprId a, ExprId b) {
  if (a == core::kNoExpr || b == core::kNoExpr || t == DType::kBool) return core::kNoExpr;
  if (t == DType::kF32) return fold_f32_op(p, op, a, b);
  if (p.is_const(a) && p.is_const(b)) return fold_constants(p, op, t, p.const_value(a), p.const_value(b));
  ExprId r = core::kNoExpr;
  switch (op) {
    case IntOp::kMax: return p.max(a, b);
    case IntOp::kMin: return p.min(a, b);
    case IntOp::kDiv:
      if (at_least(p, a, 0) && at_least(p, b, 1)) r = p.floordiv(a, b);
      break;
    case IntOp::kMod:  // the pool's mod has the divisor's sign; so does fmod for a >= 0
    case IntOp::kFmod:
      if (p.is_const(b) && p.const_value(b) >= 1 && (op == IntOp::kMod || at_least(p, a, 0))) r = p.mod(a, b);
      break;
    case IntOp::kAdd:
    case IntOp::kSub:
    case IntOp::kMul:
      if (!small_range(p, a) || !small_range(p, b)) return core::kNoExpr;
      r = op == IntOp::kAdd ? p.add(a, b) : op == IntOp::kSub ? p.sub(a, b) : p.mul(a, b);
      break;
  }
  if (r != core::kNoExpr && t == DType::kI32) {  // a symbolic result must not wrap
    core::Interval rr = p.range(r);
    if (rr.lo < std::numeric_limits<int32_t>::min() || rr.hi > std::numeric_limits<int32_t>::max())
      return core::kNoExpr;
  }
  return r;
}

ExprId fold_compare(core::ExprPool& p, CmpOp op, ExprId a, ExprId b) {
  if (a == core::kNoExpr || b == core::kNoExpr) return core::kNoExpr;
  // The sign of a - b: known when the ranges are disjoint or the difference is bounded.
  core::Interval ra = p.range(a), rb = p.range(b);
  int64_t lo, hi;  // bounds of sign(a - b) in {-1, 0, 1}
  if (a == b) {
    lo = hi = 0;
  } else if (p.is_const(a) && p.is_const(b)) {
    lo = hi = p.const_value(a) < p.const_value(b) ? -1 : p.const_value(a) > p.const_value(b) ? 1 : 0;
  } else if (ra.hi < rb.lo) {
    lo = hi = -1;
  } else if (ra.lo > rb.hi) {
    lo = hi = 1;
  } else if (small_range(p, a) && small_range(p, b)) {
    core::Interval d = p.range(p.sub(a, b));
    lo = d.lo > 0 ? 1 : d.lo == 0 ? 0 : -1;
    hi = d.hi < 0 ? -1 : d.hi == 0 ? 0 : 1;
  } else {  // magnitudes too large to subtract safely: the ranges alone
    lo = ra.lo >= rb.hi ? 0 : -1;
    hi = ra.hi <= rb.lo ? 0 : 1;
  }
  auto decide = [&](bool all_true, bool all_false) {
    return all_true ? p.constant(1) : all_false ? p.constant(0) : core::kNoExpr;
  };
  ExprId by_range = core::kNoExpr;
  switch (op) {
    case CmpOp::kEq: by_range = decide(lo == 0 && hi == 0, lo > 0 || hi < 0); break;
    case CmpOp::kLt: by_range = decide(hi < 0, lo >= 0); break;
    case CmpOp::kGt: by_range = decide(lo > 0, hi <= 0); break;
    case CmpOp::kLe: by_range = decide(hi <= 0, lo > 0); break;
    case CmpOp::kGe: by_range = decide(lo >= 0, hi < 0); break;
  }
  if (by_range != core::kNoExpr || !small_range(p, a) || !small_range(p, b)) return by_range;
  // The ranges cannot tell: the exact prover over every admissible dim value (e.g. a
  // downsampled length that is never 1 within the contract, where torch branches on it).
  using Rel = core::ExprPool::Relation;
  const bool eq = op == CmpOp::kEq;
  const ExprId rhs = op == CmpOp::kGt || op == CmpOp::kLe ? p.add(b, p.constant(1)) : b;  // a > b: a >= b + 1
  const core::ExprPool::Census c = p.census(a, eq ? Rel::kEq : Rel::kGe, rhs);
  if (!c.complete || c.assignments == 0) return core::kNoExpr;
  const bool always = c.satisfied == c.assignments, never = c.satisfied == 0;
  const bool negated = op == CmpOp::kLt || op == CmpOp::kLe;  // a < b: not a >= b
  return negated ? decide(never, always) : decide(always, never);
}

int truth_of(const core::ExprPool& p, ExprId v) {
  if (v == core::kNoExpr || !p.is_const(v)) return -1;
  return p.const_value(v) != 0 ? 1 : 0;
}

void fold_view(ShapeCtx& c) {
  std::vector<int64_t> dims;
  std::vector<ExprId> values;
  if (!can_carry(c, &dims) || !small_values(c, 0, &values)) return;
  if (static_cast<int64_t>(values.size()) == numel_of(dims)) c.out(0).sym_values = std::move(values);
}

}  // namespace kiln::kernels
