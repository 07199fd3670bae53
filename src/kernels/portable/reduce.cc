// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum, ReduceLogSumExp over a set of axes: one implementation,
// each op a (start value, per-element map, combine, finish) recipe. Axes come from attribute
// `axes` (opset < 13, or < 18 for the others) or from the optional constant input #1
// (ReduceSum opset >= 13, all of them from opset 18). Empty axes reduce every axis, unless
// noop_with_empty_axes = 1, which reduces over no axis: each element alone, so the output is
// the input passed through the op's map and finish (|x| for L1 and L2, x*x for SumSquare,
// log x for LogSum, x for the others), as ONNX Runtime does. keepdims (default 1) keeps the
// reduced axes as size 1. Sum, Max, Min, Prod, L1 and SumSquare take f32, i64 or i32
// (integers wrap, two's complement); Mean, L2, LogSum and LogSumExp take f32. A reduction
// over zero elements gives the start value, then finish: 0 for Sum, L1, L2 and SumSquare,
// 1 for Prod, -inf for Max, LogSum and LogSumExp, +inf for Min, NaN for Mean.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

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

/// Value an output starts from: the identity of `combine`.
template <Red op, typename T>
constexpr T start_value() {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  if constexpr (op == Red::kMax || op == Red::kLogSumExp)
    return kFloat ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  if constexpr (op == Red::kMin) return kFloat ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  if constexpr (op == Red::kProd) return T(1);
  return T(0);
}

/// What each input element contributes (before combining).
template <Red op, typename T>
inline T map(T v) {
  using U = std::make_unsigned_t<std::conditional_t<std::is_integral_v<T>, T, int>>;
  if constexpr (op == Red::kL1) {
    if constexpr (std::is_integral_v<T>) return v < 0 ? static_cast<T>(U{0} - static_cast<U>(v)) : v;
    else return std::fabs(v);
  } else if constexpr (op == Red::kL2 || op == Red::kSumSquare) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U>(v) * static_cast<U>(v));
    else return v * v;
  } else {
    return v;
  }
}

template <Red op, typename T>
inline T combine(T acc, T v) {
  if constexpr (op == Red::kMax || op == Red::kMin) {
    bool better = op == Red::kMax ? v > acc : v < acc;
    if constexpr (std::is_floating_point_v<T>) better = better || v != v;  // NaN wins and then stays
    return better ? v : acc;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (op == Red::kProd) return static_cast<T>(static_cast<U>(acc) * static_cast<U>(v));
    else return static_cast<T>(static_cast<U>(acc) + static_cast<U>(v));
  } else if constexpr (op == Red::kProd) {
    return acc * v;
  } else {
    return acc + v;
  }
}

/// The output from the combined value of `count` elements.
template <Red op, typename T>
inline T finish(T acc, int64_t count) {
  if constexpr (op == Red::kMean) return acc / static_cast<T>(count);  // count 0 gives NaN
  if constexpr (op == Red::kL2) return std::sqrt(acc);
  if constexpr (op == Red::kLogSum) return std::log(acc);
  return acc;
}

/// Stable log-sum-exp: max + log(sum(exp(x - max))). It needs two passes over each output's
/// elements (the max, then the sum), so instead of scattering input rows into the outputs it
/// walks each output's elements in turn (contiguous when the innermost axis is reduced).
/// An infinite or NaN max is the result (all -inf, or an empty set: -inf).
template <typename T>
void log_sum_exp(const ReducePlan& p, const T* x, T* y, int64_t n_out) {
  // Kept and reduced merged axes, innermost first, with their strides in the input.
  int64_t kept_dims[kMaxRank], kept_strides[kMaxRank], red_dims[kMaxRank], red_strides[kMaxRank];
  int n_kept = 0, n_red = 0;
  int64_t s = 1;
  for (int k = p.rank - 1; k >= 0; --k) {
    if (p.reduced[k]) {
      red_dims[n_red] = p.dims[k];
      red_strides[n_red++] = s;
    } else {
      kept_dims[n_kept] = p.dims[k];
      kept_strides[n_kept++] = s;
    }
    s *= p.dims[k];
  }
  auto step = [](int64_t* idx, const int64_t* dims, const int64_t* strides, int n, int64_t* off) {
    for (int k = 0; k < n; ++k) {
      *off += strides[k];
      if (++idx[k] < dims[k]) return;
      *off -= strides[k] * dims[k];
      idx[k] = 0;
    }
  };
  int64_t kept_idx[kMaxRank] = {}, base = 0;
  for (int64_t o = 0; o < n_out; ++o) {
    T m = start_value<Red::kMax, T>();
    int64_t idx[kMaxRank] = {}, off = 0;
    for (int64_t i = 0; i < p.count; ++i, step(idx, red_dims, red_strides, n_red, &off))
      m = combine<Red::kMax>(m, x[base + off]);
    if (std::isfinite(m)) {  // p.count steps brought idx and off back to the first element
      T sum = 0;
      for (int64_t i = 0; i < p.count; ++i, step(idx, red_dims, red_strides, n_red, &off))
        sum += std::exp(x[base + off] - m);
      m += std::log(sum);
    }
    y[o] = m;
    step(kept_idx, kept_dims, kept_strides, n_kept, &base);
  }
}

template <Red op, typename T>
KernelStatus reduce_typed(const RunCtx& c) {
  ReducePlan p;
  if (!make_plan(c, &p)) return KernelStatus::kInvalidValue;
  const T* x = c.in(0).as<T>();
  T* y = c.out(0).as<T>();
  int64_t n_out = c.out(0).numel();
  if (p.noop) {  // each element reduced alone
    for (int64_t i = 0; i < n_out; ++i) y[i] = finish<op>(map<op>(x[i]), 1);
    return KernelStatus::kOk;
  }
  if constexpr (op == Red::kLogSumExp) {
    log_sum_exp(p, x, y, n_out);
    return KernelStatus::kOk;
  }
  const T init = start_value<op, T>();
  for (int64_t i = 0; i < n_out; ++i) y[i] = init;
  int64_t n_in = c.in(0).numel();
  if (p.rank == 0 && n_in == 1) y[0] = combine<op>(init, map<op>(x[0]));  // every axis had size 1
  if (p.rank > 0 && n_in > 0) {
    // Odometer over the outer merged axes; the innermost one is a contiguous run of the input.
    int last = p.rank - 1;
    int64_t run = p.dims[last], outer = n_in / run;
    int64_t idx[kMaxRank] = {};
    int64_t o = 0;
    for (int64_t r = 0; r < outer; ++r) {
      const T* row = x + r * run;
      if (p.reduced[last]) {
        T acc = map<op>(row[0]);
        for (int64_t i = 1; i < run; ++i) acc = combine<op>(acc, map<op>(row[i]));
        y[o] = combine<op>(y[o], acc);
      } else {
        for (int64_t i = 0; i < run; ++i) y[o + i] = combine<op>(y[o + i], map<op>(row[i]));
      }
      for (int k = last - 1; k >= 0; --k) {
        o += p.out_strides[k];
        if (++idx[k] < p.dims[k]) break;
        o -= p.out_strides[k] * p.dims[k];
        idx[k] = 0;
      }
    }
  }
  if constexpr (op == Red::kMean || op == Red::kL2 || op == Red::kLogSum)
    for (int64_t i = 0; i < n_out; ++i) y[i] = finish<op>(y[i], p.count);
  return KernelStatus::kOk;
}

/// Whether the op's result is integral for integer inputs (the others take f32 only).
constexpr bool takes_ints(Red op) {
  return op != Red::kMean && op != Red::kL2 && op != Red::kLogSum && op != Red::kLogSumExp;
}

template <Red op>
KernelStatus reduce_run(const RunCtx& c) {
  DType t = c.in(0).dtype;
  if (t == DType::kF32) return reduce_typed<op, float>(c);
  if constexpr (takes_ints(op)) {
    if (t == DType::kI64) return reduce_typed<op, int64_t>(c);
    if (t == DType::kI32) return reduce_typed<op, int32_t>(c);
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace

namespace {

// Export-time contents (sym_values.h): Sum, Max, Min and Prod of a small tensor whose values
// are known fold into expressions, so that torchvision's K = ReduceMin(Concat([1000],
// Shape(scores)[0])) sizes TopK's outputs as min(1000, n) with n a data-dependent count.
void fold_reduce_values(ShapeCtx& c, IntOp op) {
  std::vector<ExprId> vals;
  std::vector<int64_t> in_dims, out_dims, axes;
  if (!small_values(c, 0, &vals) || vals.empty() || !const_dims(c.pool, c.in(0).shape, &in_dims) ||
      !can_carry(c, &out_dims) || !requested_axes(c, &axes))
    return;
  const size_t rank = in_dims.size();
  const bool noop = axes.empty() && c.attrs.get_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, axes.empty() && !noop);
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a)] = true;
  // Output element of input element i: its index over the kept axes (keepdims' 1s add none).
  std::vector<int64_t> out_stride(rank, 0);
  for (int64_t k = static_cast<int64_t>(rank) - 1, s = 1; k >= 0; --k)
    if (!reduced[static_cast<size_t>(k)]) out_stride[static_cast<size_t>(k)] = s, s *= in_dims[static_cast<size_t>(k)];
  std::vector<ExprId> acc(static_cast<size_t>(numel_of(out_dims)), core::kNoExpr);
  std::vector<bool> seen(acc.size(), false);
  for (size_t i = 0; i < vals.size(); ++i) {
    int64_t rest = static_cast<int64_t>(i), o = 0;
    for (size_t k = rank; k-- > 0;) {
      o += rest % in_dims[k] * out_stride[k];
      rest /= in_dims[k];
    }
    const size_t at = static_cast<size_t>(o);
    acc[at] = seen[at] ? fold_int_op(c.pool, op, c.in(0).dtype, acc[at], vals[i]) : vals[i];
    seen[at] = true;
    if (acc[at] == core::kNoExpr) return;
  }
  for (bool s : seen)
    if (!s) return;  // a reduction over no elements: its start value is no integer expression
  c.out(0).sym_values = std::move(acc);
}

Status reduce_folding(ShapeCtx& c, Red r, IntOp op) {
  KILN_TRY(reduce_shape(c, takes_ints(r)));
  fold_reduce_values(c, op);
  return ok_status();
}

}  // namespace

Status reduce_sum_shape(ShapeCtx& c) { return reduce_folding(c, Red::kSum, IntOp::kAdd); }
Status reduce_mean_shape(ShapeCtx& c) { return reduce_shape(c, takes_ints(Red::kMean)); }
Status reduce_max_shape(ShapeCtx& c) { return reduce_folding(c, Red::kMax, IntOp::kMax); }
Status reduce_min_shape(ShapeCtx& c) { return reduce_folding(c, Red::kMin, IntOp::kMin); }
Status reduce_prod_shape(ShapeCtx& c) { return reduce_folding(c, Red::kProd, IntOp::kMul); }
Status reduce_l1_shape(ShapeCtx& c) { return reduce_shape(c, takes_ints(Red::kL1)); }
Status reduce_l2_shape(ShapeCtx& c) { return reduce_shape(c, takes_ints(Red::kL2)); }
Status reduce_sum_square_shape(ShapeCtx& c) { return reduce_shape(c, takes_ints(Red::kSumSquare)); }
Status reduce_log_sum_shape(ShapeCtx& c) { return reduce_shape(c, takes_ints(Red::kLogSum)); }
Status reduce_log_sum_exp_shape(ShapeCtx& c) { return reduce_shape(c, takes_ints(Red::kLogSumExp)); }

KernelStatus reduce_sum_run(const RunCtx& c) { return reduce_run<Red::kSum>(c); }
KernelStatus reduce_mean_run(const RunCtx& c) { return reduce_run<Red::kMean>(c); }
KernelStatus reduce_max_run(const RunCtx& c) { return reduce_run<Red::kMax>(c); }
KernelStatus reduce_min_run(const RunCtx& c) { return reduce_run<Red::kMin>(c); }
KernelStatus reduce_prod_run(const RunCtx& c) { return reduce_run<Red::kProd>(c); }
KernelStatus reduce_l1_run(const RunCtx& c) { return reduce_run<Red::kL1>(c); }
KernelStatus reduce_l2_run(const RunCtx& c) { return reduce_run<Red::kL2>(c); }
KernelStatus reduce_sum_square_run(const RunCtx& c) { return reduce_run<Red::kSumSquare>(c); }
KernelStatus reduce_log_sum_run(const RunCtx& c) { return reduce_run<Red::kLogSum>(c); }
KernelStatus reduce_log_sum_exp_run(const RunCtx& c) { return reduce_run<Red::kLogSumExp>(c); }

}  // namespace kiln::kernels
