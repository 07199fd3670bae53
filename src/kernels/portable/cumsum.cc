// CumSum: running sum of x (f32, i64, i32) along `axis`, a scalar (or 1-element) i64/i32
// input, negative counting from the end. exclusive=1 leaves out the element itself (the first
// output is 0); reverse=1 sums from the end. Integers wrap as the arithmetic kernels do.
// torch writes it for cumsum, e.g. position ids from an attention mask.
#include <type_traits>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// The axis value of input #1 at run time; false when it is not a 1-element integer.
bool read_axis(const TensorView& a, int64_t* out) {
  if (a.numel() != 1) return false;
  if (a.dtype == DType::kI64) *out = a.as<int64_t>()[0];
  else if (a.dtype == DType::kI32) *out = a.as<int32_t>()[0];
  else return false;
  return true;
}

/// The type sums run in: unsigned for integers, so they wrap instead of overflowing.
template <typename T, bool = std::is_integral_v<T>>
struct Accumulator {
  using type = T;
};
template <typename T>
struct Accumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
KernelStatus cumsum_typed(const RunCtx& c, int64_t axis) {
  const TensorView& x = c.in(0);
  const bool exclusive = c.attrs.get_int("exclusive", 0) != 0, reverse = c.attrs.get_int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; ++k) outer *= x.dims[k];
  for (int k = static_cast<int>(axis) + 1; k < x.rank; ++k) inner *= x.dims[k];
  const int64_t n = x.dims[axis];
  const T* in = x.as<T>();
  T* out = c.out(0).as<T>();
  using Acc = typename Accumulator<T>::type;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      Acc sum = 0;
      for (int64_t s = 0; s < n; ++s) {
        const int64_t i = (o * n + (reverse ? n - 1 - s : s)) * inner + r;
        if (exclusive) out[i] = static_cast<T>(sum);
        sum = static_cast<Acc>(sum + static_cast<Acc>(in[i]));
        if (!exclusive) out[i] = static_cast<T>(sum);
      }
    }
  return KernelStatus::kOk;
}

}  // namespace

Status cumsum_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  const DType t = c.in(0).dtype;
  if (t == DType::kBool) return c.error("input #0 has dtype bool, expected f32, i64 or i32");
  const SymTensor& a = c.in(1);
  if (a.dtype != DType::kI64 && a.dtype != DType::kI32)
    return c.error(std::string("axis input #1 has dtype ") + dtype_name(a.dtype) + ", expected i64 or i32");
  if (a.shape.size() > 1 || (a.shape.size() == 1 && !c.pool.is_const_value(a.shape[0], 1)))
    return c.error("axis " + c.pool.shape_to_string(a.shape) + " must be a scalar");
  const int64_t rank = c.rank(0);
  if (rank == 0) return c.error("input #0 must have rank >= 1");
  std::vector<int64_t> axis;
  if (!c.const_ints(1, &axis)) return c.error("axis input #1 must be a constant");
  KILN_ASSIGN_OR_RETURN(const int64_t checked, c.normalize_axis(axis[0], rank));
  (void)checked;
  c.out(0).dtype = t;
  c.out(0).shape = c.in(0).shape;
  return ok_status();
}

KernelStatus cumsum_run(const RunCtx& c) {
  int64_t axis;
  const TensorView& x = c.in(0);
  if (!read_axis(c.in(1), &axis) || axis < -x.rank || axis >= x.rank) return KernelStatus::kInvalidValue;
  if (axis < 0) axis += x.rank;
  switch (x.dtype) {
    case DType::kF32: return cumsum_typed<float>(c, axis);
    case DType::kI64: return cumsum_typed<int64_t>(c, axis);
    case DType::kI32: return cumsum_typed<int32_t>(c, axis);
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
