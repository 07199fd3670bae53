// NonZero: the indices of the input's nonzero elements, [rank, count] in row-major order of
// the elements. count is a data-dependent dim (attrs: dim, its index in the method's dims;
// see DimSpec::data): bounded by the input's element count (or a lower bound the contract
// sets: more found fails execute, naming it), reserved at that bound, and
// written to RunCtx::produced_dim when the kernel runs; the shapes that read it follow.
#include <cstring>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status nonzero_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_ASSIGN_OR_RETURN(const ExprId count, data_dim_attr(c));
  c.out(0).dtype = DType::kI64;
  c.out(0).shape = {c.pool.constant(c.rank(0)), count};
  return ok_status();
}

KernelStatus nonzero_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  if (!c.produced_dim || y.dtype != DType::kI64 || y.rank != 2 || y.dims[0] != x.rank) return KernelStatus::kInvalidValue;
  const int64_t n = x.numel(), capacity = y.dims[1];  // at the bound: bind takes a data dim at its max
  const size_t size = dtype_size(x.dtype);
  const auto* bytes = static_cast<const uint8_t*>(x.data);
  auto nonzero = [&](int64_t i) {
    if (x.dtype == DType::kF32) return static_cast<const float*>(x.data)[i] != 0.f;  // -0.0 is zero
    for (size_t b = 0; b < size; ++b)
      if (bytes[static_cast<size_t>(i) * size + b]) return true;
    return false;
  };
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += nonzero(i);
  *c.produced_dim = count;  // also when over the bound: the Method names it
  if (count > capacity) return KernelStatus::kInvalidValue;
  int64_t* out = y.as<int64_t>();
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!nonzero(i)) continue;
    int64_t rest = i;
    for (int a = x.rank - 1; a >= 0; --a) {  // row a holds axis a's index, rows count apart
      out[a * count + k] = x.dims[a] ? rest % x.dims[a] : 0;
      rest = x.dims[a] ? rest / x.dims[a] : 0;
    }
    ++k;
  }
  *c.produced_dim = count;
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
