// Compress: the slices of `input` along `axis` whose `condition` entry is true (without an
// axis, the elements of the flattened input). `condition` may be shorter than that axis:
// what lies past it is dropped. The number kept is a data-dependent dim (attrs: dim, as
// NonZero's; axis, optional), bounded by the condition's length (or a bound the contract sets),
// reserved at that bound and written to RunCtx::produced_dim when the kernel runs.
#include <cstring>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status compress_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  KILN_ASSIGN_OR_RETURN(const ExprId kept, data_dim_attr(c));
  const SymTensor& x = c.in(0);
  const SymTensor& cond = c.in(1);
  if (cond.shape.size() != 1) return c.error("condition must be 1-D, got " + c.pool.shape_to_string(cond.shape));
  if (cond.dtype != DType::kBool) return c.error(std::string("condition must be bool, got ") + dtype_name(cond.dtype));
  c.out(0).dtype = x.dtype;
  if (!c.attrs.has("axis")) {
    c.out(0).shape = {kept};
    return ok_status();
  }
  const int64_t r = c.rank(0);
  int64_t axis = c.attrs.get_int("axis", 0);
  if (axis < -r || axis >= r) return c.error("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  c.out(0).shape = x.shape;
  c.out(0).shape[static_cast<size_t>(axis)] = kept;
  return ok_status();
}

KernelStatus compress_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  const TensorView& cond = c.in(1);
  TensorView& y = c.out(0);
  if (!c.produced_dim || cond.rank != 1 || cond.dtype != DType::kBool || y.dtype != x.dtype) return KernelStatus::kInvalidValue;
  const bool flat = !c.attrs.has("axis");
  int64_t axis = flat ? 0 : c.attrs.get_int("axis", 0);
  if (axis < 0) axis += x.rank;
  int64_t outer = 1, len = x.numel(), inner = 1;
  if (!flat) {
    if (axis < 0 || axis >= x.rank || y.rank != x.rank) return KernelStatus::kInvalidValue;
    len = x.dims[axis];
    for (int64_t a = 0; a < axis; ++a) outer *= x.dims[a];
    for (int64_t a = axis + 1; a < x.rank; ++a) inner *= x.dims[a];
  }
  const int64_t n = std::min<int64_t>(len, cond.dims[0]);
  const uint8_t* keep = static_cast<const uint8_t*>(cond.data);
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += keep[i] != 0;
  const int64_t capacity = flat ? y.dims[0] : y.dims[axis];  // at the bound: bind takes a data dim at its max
  *c.produced_dim = count;  // also when over the bound: the Method names it
  if (count > capacity) return KernelStatus::kInvalidValue;
  const size_t row = static_cast<size_t>(inner) * dtype_size(x.dtype);
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(y.data);
  for (int64_t o = 0; o < outer; ++o)  // rows `count` apart in the output: its axis holds count, not the bound
    for (int64_t i = 0, k = 0; i < n; ++i) {
      if (!keep[i]) continue;
      if (row) std::memcpy(dst + (static_cast<size_t>(o * count + k)) * row, src + static_cast<size_t>(o * len + i) * row, row);
      ++k;
    }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
