// ScatterElements: a copy of data, then for every element of indices (i64 or i32, data's
// rank, on every other axis at most data's size) the element of updates (indices' shape,
// data's dtype) written where its coordinates point with the index replacing the coordinate
// on `axis` (attr, default 0; negative indices count from the end). reduction (opset 16/18):
// none (default; a later duplicate index overwrites an earlier one, in row-major order of
// indices, as ONNX Runtime does), add, mul, max, min (not for bool). Each index lies in
// [-size, size) of data's axis; anything else fails the run. torch writes it for
// tensor[idx] = v and scatter_ (torchvision's MultiScaleRoIAlign).
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/scatter_reduce.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Index e of indices (i64 or i32), negative ones counted from the end of an axis of size d.
inline int64_t index_at(const TensorView& idx, int64_t e, int64_t d) {
  const int64_t v = idx.dtype == DType::kI64 ? idx.as<int64_t>()[e] : idx.as<int32_t>()[e];
  return v < 0 ? v + d : v;
}

// One instantiation per element type (the index type is read per element: this op is rare
// and small, its code size is not).
template <typename T>
void scatter_typed(const TensorView& idx, const TensorView& upd, TensorView& y, int axis, Reduce r) {
  const int rank = y.rank;
  int64_t ys[kMaxRank];  // output strides
  for (int64_t k = rank - 1, s = 1; k >= 0; --k) ys[k] = s, s *= y.dims[k];
  const T* u = upd.as<T>();
  T* out = y.as<T>();
  const int64_t d = y.dims[axis], n = idx.numel();
  int64_t coord[kMaxRank] = {};
  for (int64_t e = 0; e < n; ++e) {
    int64_t at = 0;
    for (int k = 0; k < rank; ++k) at += (k == axis ? index_at(idx, e, d) : coord[k]) * ys[k];
    reduce_into(r, out + at, u[e]);
    for (int k = rank - 1; k >= 0; --k) {  // odometer over indices' coordinates
      if (++coord[k] < idx.dims[k]) break;
      coord[k] = 0;
    }
  }
}

KernelStatus scatter(const RunCtx& c, int axis, Reduce r) {
  const TensorView& idx = c.in(1);
  TensorView& y = c.out(0);
  const int64_t n = idx.numel(), d = y.dims[axis];
  for (int64_t j = 0; j < n; ++j) {  // validate first: no partial output on bad data
    const int64_t v = index_at(idx, j, d);
    if (v < 0 || v >= d) return KernelStatus::kInvalidValue;
  }
  if (y.numel() > 0 && y.data != c.in(0).data) std::memcpy(y.data, c.in(0).data, y.nbytes());
  if (n == 0) return KernelStatus::kOk;
  switch (y.dtype) {
    case DType::kF32: scatter_typed<float>(idx, c.in(2), y, axis, r); break;
    case DType::kI64: scatter_typed<int64_t>(idx, c.in(2), y, axis, r); break;
    case DType::kI32: scatter_typed<int32_t>(idx, c.in(2), y, axis, r); break;
    case DType::kI8: scatter_typed<int8_t>(idx, c.in(2), y, axis, r); break;
    case DType::kU8: scatter_typed<uint8_t>(idx, c.in(2), y, axis, r); break;
    case DType::kBool:
      if (r != Reduce::kNone) return KernelStatus::kInvalidValue;
      scatter_typed<uint8_t>(idx, c.in(2), y, axis, r);
      break;
  }
  return KernelStatus::kOk;
}

}  // namespace

Status scatter_elements_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  if (c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32)
    return c.error(std::string("indices input #1 has dtype ") + dtype_name(c.in(1).dtype) + ", expected i64 or i32");
  if (c.rank(0) == 0) return c.error("cannot scatter into a scalar (rank 0)");
  core::ExprPool& p = c.pool;
  const SymTensor& data = c.in(0);
  const SymTensor& idx = c.in(1);
  const SymTensor& upd = c.in(2);
  const int64_t rank = c.rank(0);
  if (c.rank(1) != rank)
    return c.error("indices " + p.shape_to_string(idx.shape) + " must have the rank of data " +
                   p.shape_to_string(data.shape) + " (" + std::to_string(rank) + ")");
  if (upd.dtype != data.dtype)
    return c.error(std::string("updates have dtype ") + dtype_name(upd.dtype) + ", data " + dtype_name(data.dtype));
  if (c.rank(2) != rank)
    return c.error("updates " + p.shape_to_string(upd.shape) + " must have the shape of indices " + p.shape_to_string(idx.shape));
  Reduce r;
  if (!read_reduction(c.attrs, &r)) return c.error("reduction must be none, add, mul, max or min");
  if (r != Reduce::kNone && data.dtype == DType::kBool) return c.error("a reduction over bool data is not defined");
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 0), rank));
  const std::string shapes = " of indices " + p.shape_to_string(idx.shape) + " and data " + p.shape_to_string(data.shape);
  for (int64_t a = 0; a < rank; ++a) {
    KILN_TRY(c.require_eq(upd.shape[a], idx.shape[a], "(updates and indices, axis " + std::to_string(a) + ")"));
    if (a != axis) KILN_TRY(c.require_ge(data.shape[a], idx.shape[a], "for axis " + std::to_string(a) + shapes));
  }
  KILN_TRY(require_indices_fit(c, 1, data.shape[axis],
                               " on axis " + std::to_string(axis) + " of " + p.shape_to_string(data.shape)));
  c.out(0).dtype = data.dtype;
  c.out(0).shape = data.shape;
  return ok_status();
}

KernelStatus scatter_elements_run(const RunCtx& c) {
  const TensorView& data = c.in(0);
  const TensorView& idx = c.in(1);
  const TensorView& upd = c.in(2);
  TensorView& y = c.out(0);
  const int32_t rank = data.rank;
  int64_t axis = c.attrs.get_int("axis", 0);
  if (axis < 0) axis += rank;
  Reduce r;
  if (!read_reduction(c.attrs, &r) || axis < 0 || axis >= rank || idx.rank != rank || upd.rank != rank || y.rank != rank ||
      y.dtype != data.dtype || upd.dtype != data.dtype)
    return KernelStatus::kInvalidValue;
  for (int k = 0; k < rank; ++k)  // bind checked these; a kernel never writes past its output
    if (y.dims[k] != data.dims[k] || upd.dims[k] != idx.dims[k] || (k != axis && idx.dims[k] > data.dims[k]))
      return KernelStatus::kInvalidValue;
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32) return KernelStatus::kInvalidValue;
  return scatter(c, static_cast<int>(axis), r);
}

}  // namespace kiln::kernels
