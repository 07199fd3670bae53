// ReduceMean, ReduceSum, ReduceMax over a set of axes. Axes come from attribute `axes`
// (opset < 13, or < 18 for Mean/Max) or from the optional constant input #1 (ReduceSum
// opset >= 13, all three from opset 18). Empty axes reduce every axis, unless
// noop_with_empty_axes = 1, which makes the op an identity. keepdims (default 1) keeps the
// reduced axes as size 1.
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/kernel.h"

namespace kiln::kernels {

namespace {

enum class Red { kSum, kMean, kMax };

/// Axes requested by the node as written (not normalized); false if input #1 is not constant.
bool requested_axes(ShapeCtx& c, std::vector<int64_t>* axes) {
  axes->clear();
  if (c.has_input(1)) {
    for (ExprId d : c.in(1).shape)
      if (c.pool.is_const_value(d, 0)) return true;  // an empty tensor may carry no data pointer
    return c.const_ints(1, axes);
  }
  const int64_t* p = c.attrs.ints("axes");
  axes->assign(p, p + c.attrs.ints_size("axes"));
  return true;
}

Status reduce_shape(ShapeCtx& c, bool ints_ok) {
  KILN_TRY(c.expect_inputs(1, 2));
  DType t = c.in(0).dtype;
  if (t != DType::kF32 && !(ints_ok && (t == DType::kI64 || t == DType::kI32)))
    return c.error(std::string("input #0 has dtype ") + dtype_name(t) +
                   (ints_ok ? ", expected f32, i64 or i32" : ", expected f32"));
  if (c.has_input(1)) {
    if (c.attrs.has("axes")) return c.error("axes given both as attribute and as input #1; keep one");
    if (c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32)
      return c.error(std::string("axes (input #1) has dtype ") + dtype_name(c.in(1).dtype) + ", expected i64");
  }
  std::vector<int64_t> axes;
  if (!requested_axes(c, &axes))
    return c.error("axes (input #1) must be a constant known at export; make the axes a constant initializer");
  int64_t rank = c.rank(0);
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return c.error("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    int64_t k = a < 0 ? a + rank : a;
    if (reduced[k]) return c.error("axis " + std::to_string(a) + " is listed twice");
    reduced[k] = true;
  }
  c.out(0).dtype = t;
  if (axes.empty() && c.attrs.get_int("noop_with_empty_axes", 0) != 0) {
    c.out(0).shape = c.in(0).shape;
    return ok_status();
  }
  bool keep = c.attrs.get_int("keepdims", 1) != 0;
  c.out(0).shape.clear();
  for (int64_t k = 0; k < rank; ++k) {
    if (!reduced[k]) {
      c.out(0).shape.push_back(c.in(0).shape[k]);
    } else if (keep) {
      c.out(0).shape.push_back(c.pool.constant(1));
    }
  }
  return ok_status();
}

/// The input's actual dims with size-1 axes dropped and neighbours of the same kind (kept
/// or reduced) merged, plus each merged axis's stride in the output (0 when reduced).
struct ReducePlan {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  int64_t out_strides[kMaxRank] = {};
  int64_t count = 1;  ///< input elements folded into each output element
  bool noop = false;
};

/// Builds the plan from the node's axes; false on an axis that the shape check would reject.
bool make_plan(const RunCtx& c, ReducePlan* p) {
  const TensorView& in = c.in(0);
  bool mask[kMaxRank] = {};
  int64_t n = 0;
  const int64_t* a64 = nullptr;
  const int32_t* a32 = nullptr;
  if (c.has_input(1)) {
    n = c.in(1).numel();
    if (c.in(1).dtype == DType::kI64) a64 = c.in(1).as<int64_t>();
    else a32 = c.in(1).as<int32_t>();
  } else {
    n = c.attrs.ints_size("axes");
    a64 = c.attrs.ints("axes");
  }
  if (n == 0 && c.attrs.get_int("noop_with_empty_axes", 0) != 0) {
    p->noop = true;
    return true;
  }
  for (int k = 0; k < in.rank; ++k) mask[k] = n == 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t a = a64 ? a64[i] : a32[i];
    if (a < 0) a += in.rank;
    if (a < 0 || a >= in.rank) return false;
    mask[a] = true;
  }
  for (int k = 0; k < in.rank; ++k) {
    if (mask[k]) p->count *= in.dims[k];
    if (in.dims[k] == 1) continue;
    if (p->rank > 0 && p->reduced[p->rank - 1] == mask[k]) {
      p->dims[p->rank - 1] *= in.dims[k];
    } else {
      p->dims[p->rank] = in.dims[k];
      p->reduced[p->rank] = mask[k];
      ++p->rank;
    }
  }
  int64_t s = 1;
  for (int k = p->rank - 1; k >= 0; --k) {
    p->out_strides[k] = p->reduced[k] ? 0 : s;
    if (!p->reduced[k]) s *= p->dims[k];
  }
  return true;
}

template <Red op, typename T>
inline T combine(T acc, T v) {
  if constexpr (op == Red::kMax) {
    if constexpr (std::is_floating_point_v<T>) {
      return v > acc || v != v ? v : acc;  // NaN wins and then stays
    } else {
      return v > acc ? v : acc;
    }
  } else {
    return acc + v;
  }
}

template <Red op, typename T>
KernelStatus reduce_typed(const RunCtx& c) {
  ReducePlan p;
  if (!make_plan(c, &p)) return KernelStatus::kInvalidValue;
  const T* x = c.in(0).as<T>();
  T* y = c.out(0).as<T>();
  int64_t n_out = c.out(0).numel();
  if (p.noop) {
    std::memcpy(y, x, c.in(0).nbytes());
    return KernelStatus::kOk;
  }
  T init = T(0);
  if constexpr (op == Red::kMax)
    init = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  for (int64_t i = 0; i < n_out; ++i) y[i] = init;
  int64_t n_in = c.in(0).numel();
  if (p.rank == 0 && n_in == 1) y[0] = combine<op>(init, x[0]);  // every axis had size 1
  if (p.rank > 0 && n_in > 0) {
    // Odometer over the outer merged axes; the innermost one is a contiguous run of the input.
    int last = p.rank - 1;
    int64_t run = p.dims[last], outer = n_in / run;
    int64_t idx[kMaxRank] = {};
    int64_t o = 0;
    for (int64_t r = 0; r < outer; ++r) {
      const T* row = x + r * run;
      if (p.reduced[last]) {
        T acc = row[0];
        for (int64_t i = 1; i < run; ++i) acc = combine<op>(acc, row[i]);
        y[o] = combine<op>(y[o], acc);
      } else {
        for (int64_t i = 0; i < run; ++i) y[o + i] = combine<op>(y[o + i], row[i]);
      }
      for (int k = last - 1; k >= 0; --k) {
        o += p.out_strides[k];
        if (++idx[k] < p.dims[k]) break;
        o -= p.out_strides[k] * p.dims[k];
        idx[k] = 0;
      }
    }
  }
  if constexpr (op == Red::kMean)
    for (int64_t i = 0; i < n_out; ++i) y[i] = y[i] / static_cast<T>(p.count);  // count 0 gives NaN
  return KernelStatus::kOk;
}

template <Red op>
KernelStatus reduce_run(const RunCtx& c) {
  DType t = c.in(0).dtype;
  if (t == DType::kF32) return reduce_typed<op, float>(c);
  if constexpr (op != Red::kMean) {
    if (t == DType::kI64) return reduce_typed<op, int64_t>(c);
    if (t == DType::kI32) return reduce_typed<op, int32_t>(c);
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace

Status reduce_sum_shape(ShapeCtx& c) { return reduce_shape(c, true); }
Status reduce_mean_shape(ShapeCtx& c) { return reduce_shape(c, false); }
Status reduce_max_shape(ShapeCtx& c) { return reduce_shape(c, true); }

KernelStatus reduce_sum_run(const RunCtx& c) { return reduce_run<Red::kSum>(c); }
KernelStatus reduce_mean_run(const RunCtx& c) { return reduce_run<Red::kMean>(c); }
KernelStatus reduce_max_run(const RunCtx& c) { return reduce_run<Red::kMax>(c); }

}  // namespace kiln::kernels
