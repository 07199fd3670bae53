// ScatterND: output = data, then for each index tuple (the last axis of `indices`, k
// entries) the slice data[i0, ..., ik-1, :] is replaced by (reduction none) or combined with
// (add, mul, max, min) the matching slice of `updates`, in order. updates' shape is
// indices.shape[:-1] + data.shape[k:]. Indices are i64 in [-size, size) of their axis
// (negative counts from the end); anything else fails the run. torch writes it for slice
// assignment (`mask[a:b, c:d] = v`), e.g. Swin's shifted-window attention mask.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/scatter_reduce.h"
#include "kernels/portable/index_tuple.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

template <typename T>
void combine(Reduce r, T* dst, const T* src, int64_t n) {
  if (r == Reduce::kNone) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  for (int64_t i = 0; i < n; ++i) reduce_into(r, dst + i, src[i]);
}

template <typename T>
KernelStatus scatter_typed(const RunCtx& c, Reduce r) {
  const TensorView& data = c.in(0);
  const TensorView& idx = c.in(1);
  TensorView& y = c.out(0);
  const int64_t k = idx.dims[idx.rank - 1];
  if (k < 1 || k > data.rank || y.numel() != data.numel()) return KernelStatus::kInvalidValue;
  if (y.data != data.data) std::memcpy(y.data, data.data, static_cast<size_t>(data.nbytes()));
  int64_t slice = 1;
  for (int a = static_cast<int>(k); a < data.rank; ++a) slice *= data.dims[a];
  const int64_t tuples = idx.numel() / k;
  if (c.in(2).numel() != tuples * slice) return KernelStatus::kInvalidValue;
  const int64_t* ix = idx.as<int64_t>();
  const T* up = c.in(2).as<T>();
  T* out = y.as<T>();
  for (int64_t t = 0; t < tuples; ++t) {
    const int64_t offset = tuple_offset(ix + t * k, data.dims, k);
    if (offset < 0) return KernelStatus::kInvalidValue;
    combine(r, out + offset * slice, up + t * slice, slice);
  }
  return KernelStatus::kOk;
}

}  // namespace

Status scatter_nd_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  core::ExprPool& p = c.pool;
  const SymTensor& data = c.in(0);
  const SymTensor& idx = c.in(1);
  const SymTensor& upd = c.in(2);
  KILN_TRY(c.expect_dtype(1, DType::kI64));
  if (upd.dtype != data.dtype)
    return c.error(std::string("updates have dtype ") + dtype_name(upd.dtype) + " but data has " +
                   dtype_name(data.dtype));
  Reduce r;
  if (!read_reduction(c.attrs, &r))
    return c.error(std::string("reduction '") + c.attrs.get_str("reduction", "") +
                   "' is not supported (none, add, mul, max, min)");
  if (data.dtype == DType::kBool && r != Reduce::kNone) return c.error("bool data supports reduction none only");
  const int64_t rank = c.rank(0), q = c.rank(1);
  if (rank < 1) return c.error("data must have rank >= 1");
  if (q < 1) return c.error("indices must have rank >= 1");
  const ExprId last = idx.shape[q - 1];
  if (!p.is_const(last))
    return c.error("the last axis of indices " + p.shape_to_string(idx.shape) + " must have a fixed size");
  const int64_t k = p.const_value(last);
  if (k < 1 || k > rank)
    return c.error("indices " + p.shape_to_string(idx.shape) + " address " + std::to_string(k) +
                   " axes of data " + p.shape_to_string(data.shape) + ", expected 1.." + std::to_string(rank));
  std::vector<ExprId> want(idx.shape.begin(), idx.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + k, data.shape.end());
  const std::string rule = "updates " + p.shape_to_string(upd.shape) + " must be " + p.shape_to_string(want) +
                           " (indices.shape[:-1] + data.shape[" + std::to_string(k) + ":])";
  if (upd.shape.size() != want.size()) return c.error(rule);
  for (size_t a = 0; a < want.size(); ++a) KILN_TRY(c.require_eq(upd.shape[a], want[a], "(" + rule + ")"));
  c.out(0).dtype = data.dtype;
  c.out(0).shape = data.shape;
  return ok_status();
}

KernelStatus scatter_nd_run(const RunCtx& c) {
  Reduce r;
  if (!read_reduction(c.attrs, &r)) return KernelStatus::kInvalidValue;
  switch (c.in(0).dtype) {
    case DType::kF32: return scatter_typed<float>(c, r);
    case DType::kI64: return scatter_typed<int64_t>(c, r);
    case DType::kI32: return scatter_typed<int32_t>(c, r);
    case DType::kBool: return scatter_typed<uint8_t>(c, r);
    case DType::kI8: return scatter_typed<int8_t>(c, r);
    case DType::kU8: return scatter_typed<uint8_t>(c, r);
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
