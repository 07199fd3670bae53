// Reshape (view): input 0 reinterpreted with the shape held by input 1. The shape's
// elements may be symbolic (a folded Shape computation), e.g. [4*batch, -1].
#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Product of shape[k] for k in [0, n) except `skip`, built in the pool.
ExprId product_except(core::ExprPool& p, const std::vector<ExprId>& shape, size_t skip) {
  ExprId acc = p.constant(1);
  for (size_t k = 0; k < shape.size(); ++k)
    if (k != skip) acc = p.mul(acc, shape[k]);
  return acc;
}

// A computed element v of the shape (element k): its meaning must not depend on the data. A
// computed 0 would mean "copy input dim k" (unless allowzero): fine when, whenever v is 0,
// input dim k is 0 as well, e.g. a slice that is empty for small inputs.
Status check_computed_size(ShapeCtx& c, ExprId v, size_t k, bool allow_zero, const std::string& where) {
  core::ExprPool& p = c.pool;
  const SymTensor& x = c.in(0);
  using Rel = core::ExprPool::Relation;
  const ExprId zero = p.constant(0), one = p.constant(1);
  const bool known = (k < x.shape.size() && v == x.shape[k]) ||  // 0 or not, both meanings agree
                     p.always(v, Rel::kGe, allow_zero ? zero : one) ||
                     (p.always(v, Rel::kGe, zero) && k < x.shape.size() &&
                      p.always(p.mul(p.sub(one, p.min(v, one)), x.shape[k]), Rel::kEq, zero));
  if (known) return ok_status();
  const core::Interval r = p.range(v);
  core::ExprPool::Census at = p.census(v, Rel::kGe, allow_zero ? zero : one, 100000);
  const std::string example = at.complete && !at.first_failure.empty()
                                  ? ": at " + p.assignment_text(at.dims, at.first_failure) + " it is " +
                                        std::to_string(at.failure_lhs)
                                  : " (range [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "])";
  return c.error(where + " (" + p.to_string(v) + ") may be " + (allow_zero ? "negative" : "0 or negative") + example +
                 ", so its meaning is unknown at export");
}

}  // namespace

Status reshape_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  core::ExprPool& p = c.pool;
  const SymTensor& x = c.in(0);
  if (c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32)
    return c.error(std::string("shape input #1 has dtype ") + dtype_name(c.in(1).dtype) + ", expected i64");
  if (c.rank(1) != 1) return c.error("shape input #1 must be 1-D, got rank " + std::to_string(c.rank(1)));
  std::vector<ExprId> spec;
  if (!known_ints(c, 1, &spec))
    return c.error("shape input #1 is not known at export; it must be a constant or computed from input shapes");
  const std::string spec_str = p.shape_to_string(spec);
  if (spec.size() > static_cast<size_t>(kMaxRank))
    return c.error("shape " + spec_str + " has rank " + std::to_string(spec.size()) + ", above the limit " +
                   std::to_string(kMaxRank));
  const bool allow_zero = c.attrs.get_int("allowzero", 0) != 0;

  std::vector<ExprId> out(spec.size());
  size_t infer = spec.size();  // index of the -1, if any
  bool has_zero = false;
  for (size_t k = 0; k < spec.size(); ++k) {
    const std::string where = "shape " + spec_str + " element " + std::to_string(k);
    ExprId v = spec[k];
    if (!p.is_const(v)) {
      KILN_TRY(check_computed_size(c, v, k, allow_zero, where));
      out[k] = v;
      continue;
    }
    int64_t n = p.const_value(v);
    if (n == -1) {
      if (infer != spec.size()) return c.error("shape " + spec_str + " has more than one -1");
      infer = k;
    } else if (n < -1) {
      return c.error(where + " is " + std::to_string(n) + "; sizes must be >= 0, or -1 to infer one dim");
    } else if (n == 0 && !allow_zero) {  // 0 copies the input's dim at the same index
      if (k >= x.shape.size())
        return c.error(where + " is 0 (copy input dim " + std::to_string(k) + ") but the input " +
                       p.shape_to_string(x.shape) + " has rank " + std::to_string(x.shape.size()));
      out[k] = x.shape[k];
    } else {
      has_zero = has_zero || n == 0;
      out[k] = v;
    }
  }

  ExprId numel = product_except(p, x.shape, x.shape.size());
  if (infer != spec.size()) {
    if (has_zero) return c.error("shape " + spec_str + " has both 0 and -1, which allowzero=1 forbids");
    ExprId rest = product_except(p, out, infer);
    if (p.is_const_value(rest, 0))
      return c.error("shape " + spec_str + " cannot infer its -1: the other dims multiply to 0");
    if (p.is_const(rest) && p.is_const(numel) && p.const_value(numel) % p.const_value(rest) != 0)
      return c.error("cannot reshape " + p.shape_to_string(x.shape) + " (" + std::to_string(p.const_value(numel)) +
                     " elements) into " + spec_str + ": " + std::to_string(p.const_value(numel)) +
                     " is not divisible by " + std::to_string(p.const_value(rest)) + ", the product of the other dims");
    out[infer] = p.floordiv(numel, rest);  // exact for products of the same dims
  }
  ExprId total = product_except(p, out, out.size());
  if (p.is_const(total) && p.is_const(numel) && p.const_value(total) != p.const_value(numel))
    return c.error("cannot reshape " + p.shape_to_string(x.shape) + " (" + std::to_string(p.const_value(numel)) +
                   " elements) into " + spec_str + " (" + std::to_string(p.const_value(total)) +
                   " elements); the element counts must match");
  KILN_TRY(c.require_eq(total, numel, "to reshape " + p.shape_to_string(x.shape) + " into " + spec_str));
  c.out(0).dtype = x.dtype;
  c.out(0).shape = std::move(out);
  fold_view(c);  // known values keep their order
  return ok_status();
}

}  // namespace kiln::kernels
