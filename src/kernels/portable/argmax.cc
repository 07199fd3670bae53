// ArgMax, ArgMin: i64 index of the largest (smallest) element along `axis` (default 0) of
// an f32, i64 or i32 input; keepdims (default 1) keeps the axis as size 1. Ties go to the
// first index, or the last with select_last_index = 1. NaN counts as the largest value for
// ArgMax and as the smallest for ArgMin, i.e. the first (last) NaN wins, as numpy.argmax and
// numpy.argmin. (ONNX Runtime's ArgMin agrees without select_last_index; with it, it skips NaN.)
#include <string>
#include <type_traits>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Whether v should replace the current best m (v seen later along the axis).
template <typename T, bool kMin, bool kLast>
inline bool beats(T v, T m) {
  if constexpr (std::is_floating_point_v<T>) {
    if (m != m) return kLast && v != v;  // a NaN best only yields to a later NaN
    if (v != v) return true;
  }
  if constexpr (kMin) return kLast ? v <= m : v < m;
  return kLast ? v >= m : v > m;
}

/// Works on [outer, n, inner]; the running best index lives in y, so the scan reads x
/// row by row (contiguously) without scratch memory.
template <typename T, bool kMin, bool kLast>
void arg_typed(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    const T* block = x + o * n * inner;
    int64_t* best = y + o * inner;
    for (int64_t i = 0; i < inner; ++i) best[i] = 0;
    for (int64_t j = 1; j < n; ++j) {
      const T* row = block + j * inner;
      for (int64_t i = 0; i < inner; ++i)
        if (beats<T, kMin, kLast>(row[i], block[best[i] * inner + i])) best[i] = j;
    }
  }
}

template <typename T, bool kMin>
void arg_dispatch(const TensorView& x, int64_t* y, bool last, int64_t outer, int64_t n, int64_t inner) {
  if (last) arg_typed<T, kMin, true>(x.as<T>(), y, outer, n, inner);
  else arg_typed<T, kMin, false>(x.as<T>(), y, outer, n, inner);
}

Status arg_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  const DType t = c.in(0).dtype;
  if (t != DType::kF32 && t != DType::kI64 && t != DType::kI32)
    return c.error(std::string("input #0 has dtype ") + dtype_name(t) + ", expected f32, i64 or i32");
  const int64_t rank = c.rank(0);
  if (rank == 0) return c.error("input #0 must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 0), rank));
  const std::vector<ExprId>& in = c.in(0).shape;
  KILN_TRY(c.require_ge(in[axis], c.pool.constant(1),
                        "for axis " + std::to_string(axis) + " of " + c.pool.shape_to_string(in) +
                            " to have an element to pick"));
  c.out(0).dtype = DType::kI64;
  c.out(0).shape = in;
  if (c.attrs.get_int("keepdims", 1) != 0) c.out(0).shape[axis] = c.pool.constant(1);
  else c.out(0).shape.erase(c.out(0).shape.begin() + axis);
  return ok_status();
}

template <bool kMin>
KernelStatus arg_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  int64_t axis = c.attrs.get_int("axis", 0);
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank) return KernelStatus::kInvalidValue;
  int64_t outer = 1, inner = 1, n = x.dims[axis];
  for (int k = 0; k < axis; ++k) outer *= x.dims[k];
  for (int k = static_cast<int>(axis) + 1; k < x.rank; ++k) inner *= x.dims[k];
  if (c.out(0).numel() != outer * inner) return KernelStatus::kInvalidValue;
  if (outer * inner == 0) return KernelStatus::kOk;
  if (n == 0) return KernelStatus::kInvalidValue;
  const bool last = c.attrs.get_int("select_last_index", 0) != 0;
  int64_t* y = c.out(0).as<int64_t>();
  switch (x.dtype) {
    case DType::kF32: arg_dispatch<float, kMin>(x, y, last, outer, n, inner); break;
    case DType::kI64: arg_dispatch<int64_t, kMin>(x, y, last, outer, n, inner); break;
    case DType::kI32: arg_dispatch<int32_t, kMin>(x, y, last, outer, n, inner); break;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace

Status argmax_shape(ShapeCtx& c) { return arg_shape(c); }
Status argmin_shape(ShapeCtx& c) { return arg_shape(c); }

KernelStatus argmax_run(const RunCtx& c) { return arg_run<false>(c); }
KernelStatus argmin_run(const RunCtx& c) { return arg_run<true>(c); }

}  // namespace kiln::kernels
