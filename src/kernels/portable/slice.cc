// Slice: a strided window per listed axis. starts/ends/axes/steps are inputs #1..#4 from
// opset 10, attributes starts/ends/axes (step 1) before. ONNX rules per axis of size D:
// a negative start or end counts from D; then with step > 0, start and end clamp into
// [0, D]; with step < 0, start into [0, D-1] and end into [-1, D-1]; the size is
// max(0, ceil((end - start) / step)). Known small integer inputs (e.g. a Shape result)
// sliced by constant starts and ends fold into the output's values.
#include <algorithm>
#include <limits>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "kernels/portable/strided_copy.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// The per-axis parameters as export sees them; starts/ends may be symbolic.
struct SliceSpec {
  std::vector<ExprId> starts, ends;
  std::vector<int64_t> axes, steps;
};

Status read_spec(ShapeCtx& c, SliceSpec* s) {
  core::ExprPool& p = c.pool;
  if (c.num_inputs() == 1) {  // before opset 10: attributes
    if (!c.attrs.has("starts") || !c.attrs.has("ends"))
      return c.error("needs starts and ends (attributes before opset 10, inputs #1 and #2 from opset 10)");
    for (uint32_t k = 0; k < c.attrs.ints_size("starts"); ++k)
      s->starts.push_back(p.constant(c.attrs.ints("starts")[k]));
    for (uint32_t k = 0; k < c.attrs.ints_size("ends"); ++k) s->ends.push_back(p.constant(c.attrs.ints("ends")[k]));
    s->axes.assign(c.attrs.ints("axes"), c.attrs.ints("axes") + c.attrs.ints_size("axes"));
  } else {
    KILN_TRY(c.expect_inputs(3, 5));
    if (!known_ints(c, 1, &s->starts)) return c.error("starts input #1 must be a constant or computed from shapes");
    if (!known_ints(c, 2, &s->ends)) return c.error("ends input #2 must be a constant or computed from shapes");
    if (c.has_input(3) && !known_const_ints(c, 3, &s->axes)) return c.error("axes input #3 must be a constant");
    if (c.has_input(4) && !known_const_ints(c, 4, &s->steps)) return c.error("steps input #4 must be a constant");
  }
  const size_t n = s->starts.size();
  if (!c.has_input(3) && s->axes.empty())
    for (size_t k = 0; k < n; ++k) s->axes.push_back(static_cast<int64_t>(k));
  if (!c.has_input(4)) s->steps.assign(n, 1);
  if (s->ends.size() != n || s->axes.size() != n || s->steps.size() != n)
    return c.error("starts, ends, axes and steps must have one length, got " + std::to_string(n) + ", " +
                   std::to_string(s->ends.size()) + ", " + std::to_string(s->axes.size()) + " and " +
                   std::to_string(s->steps.size()));
  return ok_status();
}

/// Start or end `v` on an axis of size `d`, made non-negative by adding d when negative;
/// the caller clamps. Constants beyond +-(max(d) + 1) slice exactly like that value, so
/// they are cut there first (INT64_MAX must not reach the pool's arithmetic).
Result<ExprId> from_end(ShapeCtx& c, ExprId v, ExprId d, const char* what) {
  core::ExprPool& p = c.pool;
  const int64_t big = p.range(d).hi + 1;
  bool negative;
  if (p.is_const(v)) {
    v = p.constant(std::clamp(p.const_value(v), -big, big));
    negative = p.const_value(v) < 0;
  } else {
    core::Interval r = p.range(v);
    negative = r.hi < 0;
    if (r.lo < 0 && r.hi >= 0) {  // the range cannot tell; the exact prover may
      core::ExprPool::Census at = p.census(v, core::ExprPool::Relation::kGe, p.constant(0), 100000);
      if (at.complete && at.satisfied == 0) negative = true;
      else if (!at.complete || at.satisfied != at.assignments)
        return c.error(std::string(what) + " " + p.to_string(v) + " may be negative or not (" +
                       (at.complete ? "at " + p.assignment_text(at.dims, at.first_failure) + " it is " +
                                          std::to_string(at.failure_lhs) + ", at " +
                                          p.assignment_text(at.dims, at.last_solution) + " it is not"
                                    : "range [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]") +
                       "); its meaning is unknown at export");
    }
  }
  return negative ? p.add(v, d) : v;
}

/// min/max that also decide when a - b is a known constant (e.g. min(D - 1, D) = D - 1).
ExprId min_of(core::ExprPool& p, ExprId a, ExprId b) {
  ExprId diff = p.sub(a, b);
  if (p.is_const(diff)) return p.const_value(diff) <= 0 ? a : b;
  return p.min(a, b);
}
ExprId max_of(core::ExprPool& p, ExprId a, ExprId b) {
  ExprId diff = p.sub(a, b);
  if (p.is_const(diff)) return p.const_value(diff) >= 0 ? a : b;
  return p.max(a, b);
}

/// a - b with the subtraction pushed through min/max nodes, using
/// x - max(y, z) = min(x - y, x - z) and friends, so that e.g. D - max(D - 3, 0) reads
/// min(3, D). `depth` bounds the expansion.
ExprId sub_through(core::ExprPool& p, ExprId a, ExprId b, int depth = 0) {
  if (depth < 4) {
    const core::ExprNode na = p.node(a), nb = p.node(b);  // copies: the pool may grow
    if (nb.op == core::ExprOp::kMax)
      return min_of(p, sub_through(p, a, nb.a, depth + 1), sub_through(p, a, nb.b, depth + 1));
    if (nb.op == core::ExprOp::kMin)
      return max_of(p, sub_through(p, a, nb.a, depth + 1), sub_through(p, a, nb.b, depth + 1));
    if (na.op == core::ExprOp::kMin)
      return min_of(p, sub_through(p, na.a, b, depth + 1), sub_through(p, na.b, b, depth + 1));
    if (na.op == core::ExprOp::kMax)
      return max_of(p, sub_through(p, na.a, b, depth + 1), sub_through(p, na.b, b, depth + 1));
  }
  return p.sub(a, b);
}

/// ceildiv(x, k) for k > 0, pushed through min/max (it is monotone).
ExprId ceil_through(core::ExprPool& p, ExprId x, int64_t k) {
  const core::ExprNode n = p.node(x);
  if (n.op == core::ExprOp::kMin) return min_of(p, ceil_through(p, n.a, k), ceil_through(p, n.b, k));
  if (n.op == core::ExprOp::kMax) return max_of(p, ceil_through(p, n.a, k), ceil_through(p, n.b, k));
  return p.ceildiv(x, p.constant(k));
}

/// Output size of one sliced axis of size d, given start b and end e already counted from
/// the end (see from_end). Only the clamps that can change max(0, size) are applied: with
/// step > 0, a start above d or an end below 0 already gives a size <= 0; with step < 0,
/// an end above d - 1 does.
ExprId slice_size(core::ExprPool& p, ExprId b, ExprId e, ExprId d, int64_t step) {
  ExprId size;
  if (step > 0) {
    b = max_of(p, b, p.constant(0));
    e = min_of(p, e, d);
    size = ceil_through(p, sub_through(p, e, b), step);
  } else {
    b = max_of(p, min_of(p, b, p.sub(d, p.constant(1))), p.constant(0));
    e = max_of(p, e, p.constant(-1));
    size = ceil_through(p, sub_through(p, b, e), -step);
    if (p.range(d).lo <= 0) size = min_of(p, size, d);  // an empty axis has no start to clamp to
  }
  return max_of(p, size, p.constant(0));
}

/// The window one axis of size d > 0 keeps for start b, end e and step st (constants):
/// its first index and element count, after ONNX's counting from the end and clamping.
void axis_window(int64_t d, int64_t b, int64_t e, int64_t st, int64_t* first, int64_t* count) {
  if (b < 0) b += d;
  if (e < 0) e += d;
  if (st > 0) {
    b = std::clamp<int64_t>(b, 0, d);
    e = std::clamp<int64_t>(e, 0, d);
    *count = e > b ? (e - b - 1) / st + 1 : 0;  // ceil((e - b) / st) without overflow
  } else {
    b = std::clamp<int64_t>(b, 0, d - 1);
    e = std::clamp<int64_t>(e, -1, d - 1);
    *count = b > e ? (b - e - 1) / -st + 1 : 0;
  }
  *first = b;
}

/// Carries the input's known values (sym_values) through a slice whose starts and ends
/// are constants, e.g. Shape -> Slice.
void fold_slice(ShapeCtx& c, const SliceSpec& s) {
  core::ExprPool& p = c.pool;
  std::vector<int64_t> out_dims, dims;
  std::vector<ExprId> values;
  if (!can_carry(c, &out_dims) || !const_dims(p, c.in(0).shape, &dims) || !small_values(c, 0, &values)) return;
  if (static_cast<int64_t>(values.size()) != numel_of(dims)) return;
  const size_t rank = dims.size();
  std::vector<int64_t> first(rank, 0), step(rank, 1), count = dims;
  for (size_t j = 0; j < s.axes.size(); ++j) {
    if (!p.is_const(s.starts[j]) || !p.is_const(s.ends[j])) return;
    const int64_t k = s.axes[j] < 0 ? s.axes[j] + static_cast<int64_t>(rank) : s.axes[j];
    step[k] = s.steps[j];
    if (dims[k] > 0)
      axis_window(dims[k], p.const_value(s.starts[j]), p.const_value(s.ends[j]), step[k], &first[k], &count[k]);
  }
  if (count != out_dims) return;
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t k = rank; k-- > 1;) in_strides[k - 1] = in_strides[k] * dims[k];
  std::vector<ExprId> out;
  for (int64_t e = 0; e < numel_of(out_dims); ++e) {
    int64_t rest = e, src = 0;
    for (size_t k = rank; k-- > 0;) {
      src += (first[k] + rest % count[k] * step[k]) * in_strides[k];
      rest /= count[k];
    }
    out.push_back(values[src]);
  }
  c.out(0).sym_values = std::move(out);
}

/// Reads element k of an i64 or i32 tensor.
int64_t read_int(const TensorView& t, int64_t k) {
  return t.dtype == DType::kI32 ? t.as<int32_t>()[k] : t.as<int64_t>()[k];
}

}  // namespace

Status slice_shape(ShapeCtx& c) {
  core::ExprPool& p = c.pool;
  if (c.num_inputs() == 0) return c.error("expects 1 to 5 inputs, got 0");
  for (size_t i = 1; i < c.num_inputs(); ++i)
    if (c.has_input(i) && c.in(i).dtype != DType::kI64 && c.in(i).dtype != DType::kI32)
      return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + ", expected i64");
  SliceSpec s;
  KILN_TRY(read_spec(c, &s));
  const int64_t rank = c.rank(0);
  std::vector<ExprId> out = c.in(0).shape;
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < s.axes.size(); ++j) {
    if (rank == 0) return c.error("cannot slice a scalar (rank 0)");
    KILN_ASSIGN_OR_RETURN(int64_t k, c.normalize_axis(s.axes[j], rank));
    if (seen[k]) return c.error("axis " + std::to_string(s.axes[j]) + " is listed twice in axes");
    seen[k] = true;
    int64_t step = s.steps[j];
    if (step == 0 || step == std::numeric_limits<int64_t>::min())
      return c.error("step " + std::to_string(step) + " on axis " + std::to_string(s.axes[j]) + " is not allowed");
    ExprId d = c.in(0).shape[k];
    // Beyond max(d) a larger |step| still yields one element: cap it to keep the pool's
    // arithmetic away from overflow.
    const int64_t cap = std::max<int64_t>(p.range(d).hi, 1);
    step = std::clamp(step, -cap, cap);
    KILN_ASSIGN_OR_RETURN(ExprId b, from_end(c, s.starts[j], d, "start"));
    KILN_ASSIGN_OR_RETURN(ExprId e, from_end(c, s.ends[j], d, "end"));
    out[k] = slice_size(p, b, e, d, step);
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = std::move(out);
  fold_slice(c, s);
  return ok_status();
}

KernelStatus slice_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  const bool from_attrs = c.num_inputs == 1;
  const int64_t n = from_attrs ? c.attrs.ints_size("starts") : c.in(1).numel();
  if (y.rank != x.rank || n > x.rank) return KernelStatus::kInvalidValue;
  if (from_attrs ? c.attrs.ints_size("ends") != n : c.in(2).numel() != n) return KernelStatus::kInvalidValue;
  if (from_attrs ? c.attrs.has("axes") && c.attrs.ints_size("axes") != n
                 : (c.has_input(3) && c.in(3).numel() != n) || (c.has_input(4) && c.in(4).numel() != n))
    return KernelStatus::kInvalidValue;

  // Untouched axes run whole with step 1.
  int64_t start[kMaxRank], step[kMaxRank], dims[kMaxRank];
  bool seen[kMaxRank] = {};
  for (int k = 0; k < x.rank; ++k) {
    start[k] = 0;
    step[k] = 1;
    dims[k] = x.dims[k];
  }
  for (int64_t j = 0; j < n; ++j) {
    int64_t axis = j, b, e, st = 1;
    if (from_attrs) {
      b = c.attrs.ints("starts")[j];
      e = c.attrs.ints("ends")[j];
      if (c.attrs.has("axes")) axis = c.attrs.ints("axes")[j];
    } else {
      b = read_int(c.in(1), j);
      e = read_int(c.in(2), j);
      if (c.has_input(3)) axis = read_int(c.in(3), j);
      if (c.has_input(4)) st = read_int(c.in(4), j);
    }
    if (axis < 0) axis += x.rank;
    if (axis < 0 || axis >= x.rank || seen[axis]) return KernelStatus::kInvalidValue;
    if (st == 0 || st == std::numeric_limits<int64_t>::min()) return KernelStatus::kInvalidValue;
    seen[axis] = true;
    const int64_t d = x.dims[axis];
    step[axis] = st;
    if (d == 0) continue;  // dims[axis] is already 0
    axis_window(d, b, e, st, &start[axis], &dims[axis]);
    if (dims[axis] <= 1) step[axis] = 1;  // |step| may be huge; with one element it is unused
  }
  int64_t strides[kMaxRank], in_strides[kMaxRank];
  row_major_strides(x, in_strides);
  int64_t base = 0;
  for (int k = 0; k < x.rank; ++k) {
    if (dims[k] != y.dims[k]) return KernelStatus::kInvalidValue;
    base += start[k] * in_strides[k];
    strides[k] = step[k] * in_strides[k];
  }
  strided_copy(c, y.data, x.data, dtype_size(x.dtype), x.rank, dims, strides, base);
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
