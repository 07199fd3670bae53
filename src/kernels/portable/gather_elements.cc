// GatherElements: output[i0, ..., ir-1] = data[i0, ..., indices[i0, ..., ir-1], ..., ir-1],
// the index replacing the coordinate on `axis` (attr, default 0, negative counts from the
// end). indices (i64 or i32) has data's rank and, on every other axis, at most data's size;
// the output has indices' shape and data's dtype. Each index lies in [-size, size) of data's
// axis (negative counts from the end); anything else fails the run. torch writes it for
// torch.gather.
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Copies element by element as the unsigned type of the element's width.
template <typename E, typename I>
void gather_elements_typed(const TensorView& data, const I* idx, const TensorView& y, int axis) {
  const int r = y.rank;
  int64_t ds[kMaxRank];  // data strides (elements)
  int64_t s = 1;
  for (int k = r - 1; k >= 0; --k) {
    ds[k] = s;
    s *= data.dims[k];
  }
  const E* src = static_cast<const E*>(data.data);
  E* dst = static_cast<E*>(y.data);
  const int64_t last = y.dims[r - 1], d = data.dims[axis];
  int64_t coord[kMaxRank] = {};
  int64_t base = 0;  // data offset of coord with the last axis (and `axis`) at 0
  for (int64_t e = 0;;) {
    if (axis == r - 1) {
      for (int64_t j = 0; j < last; ++j, ++e) dst[e] = src[base + (idx[e] < 0 ? idx[e] + d : idx[e])];
    } else {
      const int64_t step = ds[axis];
      for (int64_t j = 0; j < last; ++j, ++e) dst[e] = src[base + j + (idx[e] < 0 ? idx[e] + d : idx[e]) * step];
    }
    int k = r - 2;
    for (; k >= 0; --k) {  // odometer over the outer output axes
      if (k != axis) base += ds[k];
      if (++coord[k] < y.dims[k]) break;
      if (k != axis) base -= coord[k] * ds[k];
      coord[k] = 0;
    }
    if (k < 0) return;
  }
}

template <typename I>
KernelStatus gather_elements_index(const RunCtx& c, int axis) {
  const TensorView& data = c.in(0);
  const TensorView& y = c.out(0);
  const I* idx = c.in(1).as<I>();
  const int64_t n = c.in(1).numel(), d = data.dims[axis];
  for (int64_t j = 0; j < n; ++j)  // validate first: no partial output on bad data
    if (idx[j] < -d || idx[j] >= d) return KernelStatus::kInvalidValue;
  if (n == 0) return KernelStatus::kOk;
  switch (dtype_size(data.dtype)) {
    case 1: gather_elements_typed<uint8_t>(data, idx, y, axis); break;
    case 4: gather_elements_typed<uint32_t>(data, idx, y, axis); break;
    case 8: gather_elements_typed<uint64_t>(data, idx, y, axis); break;
    default: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace

Status gather_elements_shape(ShapeCtx& c) {
  KILN_TRY(expect_gather_operands(c));
  core::ExprPool& p = c.pool;
  const SymTensor& data = c.in(0);
  const SymTensor& idx = c.in(1);
  const int64_t rank = c.rank(0);
  if (c.rank(1) != rank)
    return c.error("indices " + p.shape_to_string(idx.shape) + " must have the rank of data " +
                   p.shape_to_string(data.shape) + " (" + std::to_string(rank) + ")");
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 0), rank));
  const std::string shapes = " of indices " + p.shape_to_string(idx.shape) + " and data " + p.shape_to_string(data.shape);
  for (int64_t a = 0; a < rank; ++a)
    if (a != axis)
      KILN_TRY(c.require_ge(data.shape[a], idx.shape[a], "for axis " + std::to_string(a) + shapes));

  // Constant indices are checked now (or guarded when the axis is symbolic).
  KILN_TRY(require_indices_fit(c, 1, data.shape[axis],
                               " on axis " + std::to_string(axis) + " of " + p.shape_to_string(data.shape)));
  c.out(0).dtype = data.dtype;
  c.out(0).shape = idx.shape;
  return ok_status();
}

KernelStatus gather_elements_run(const RunCtx& c) {
  const TensorView& data = c.in(0);
  const TensorView& idx = c.in(1);
  const TensorView& y = c.out(0);
  const int32_t rank = data.rank;
  int64_t axis = c.attrs.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || idx.rank != rank || y.rank != rank || y.dtype != data.dtype)
    return KernelStatus::kInvalidValue;
  for (int k = 0; k < rank; ++k)  // bind checked these; a kernel never reads past its operands
    if (y.dims[k] != idx.dims[k] || (k != axis && idx.dims[k] > data.dims[k])) return KernelStatus::kInvalidValue;
  switch (idx.dtype) {
    case DType::kI64: return gather_elements_index<int64_t>(c, static_cast<int>(axis));
    case DType::kI32: return gather_elements_index<int32_t>(c, static_cast<int>(axis));
    default: return KernelStatus::kInvalidValue;
  }
}

}  // namespace kiln::kernels
