// GatherND: slices of `data` addressed by the last axis of `indices` (i64 or i32), each tuple
// k indices into data's axes after the first `batch_dims`; negative indices count from the
// end. Output shape: indices.shape[:-1] + data.shape[batch_dims + k:]. torch exports
// x[mask] as NonZero -> Transpose -> GatherND, the count data-dependent.
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/index_tuple.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

Status gather_nd_shape(ShapeCtx& c) {
  KILN_TRY(expect_gather_operands(c));
  const SymTensor& data = c.in(0);
  const SymTensor& idx = c.in(1);
  const int64_t r = c.rank(0), q = c.rank(1), b = c.attrs.get_int("batch_dims", 0);
  if (q < 1) return c.error("indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) return c.error("batch_dims " + std::to_string(b) + " must be below both ranks");
  const ExprId last = idx.shape[static_cast<size_t>(q - 1)];
  if (!c.pool.is_const(last))
    return c.error("the index tuples' length (indices' last axis " + c.pool.to_string(last) + ") must be static");
  const int64_t k = c.pool.const_value(last);
  if (k < 1 || k > r - b)
    return c.error("index tuples of " + std::to_string(k) + " cannot address data of rank " + std::to_string(r) + " after " +
                   std::to_string(b) + " batch axes");
  for (int64_t a = 0; a < b; ++a)
    KILN_TRY(c.require_eq(data.shape[static_cast<size_t>(a)], idx.shape[static_cast<size_t>(a)],
                          "(batch axis " + std::to_string(a) + " of data and indices)"));
  std::vector<ExprId> out(idx.shape.begin(), idx.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + b + k, data.shape.end());
  if (static_cast<int64_t>(out.size()) > kMaxRank) return c.error("output rank is above the limit " + std::to_string(kMaxRank));
  c.out(0).dtype = data.dtype;
  c.out(0).shape = std::move(out);
  return ok_status();
}

namespace {

template <typename I>
KernelStatus gather_nd_typed(const RunCtx& c, int64_t b) {
  const TensorView& data = c.in(0);
  const TensorView& idx = c.in(1);
  TensorView& y = c.out(0);
  const int64_t k = idx.dims[idx.rank - 1];
  if (k < 1 || k > data.rank - b) return KernelStatus::kInvalidValue;
  int64_t batch = 1, tuples = 1, slice = static_cast<int64_t>(dtype_size(data.dtype)), batch_stride = 1;
  for (int64_t a = 0; a < b; ++a) batch *= data.dims[a];
  for (int64_t a = b; a < idx.rank - 1; ++a) tuples *= idx.dims[a];
  for (int64_t a = b + k; a < data.rank; ++a) slice *= data.dims[a];
  for (int64_t a = b; a < data.rank; ++a) batch_stride *= data.dims[a];
  if (y.nbytes() != static_cast<size_t>(batch * tuples * slice)) return KernelStatus::kInvalidValue;
  const I* ix = idx.as<I>();
  for (int64_t t = 0; t < batch * tuples; ++t)  // validate first: no partial output on bad data
    if (tuple_offset(ix + t * k, data.dims + b, k) < 0) return KernelStatus::kIndexOutOfRange;
  if (slice == 0) return KernelStatus::kOk;
  const auto* src = static_cast<const unsigned char*>(data.data);
  auto* dst = static_cast<unsigned char*>(y.data);
  const size_t elem = dtype_size(data.dtype);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      // Elements within this batch's block.
      const int64_t off = tuple_offset(ix + (bi * tuples + t) * k, data.dims + b, k) * (slice / static_cast<int64_t>(elem));
      std::memcpy(dst, src + static_cast<size_t>(bi * batch_stride + off) * elem, static_cast<size_t>(slice));
      dst += slice;
    }
  return KernelStatus::kOk;
}

}  // namespace

KernelStatus gather_nd_run(const RunCtx& c) {
  const int64_t b = c.attrs.get_int("batch_dims", 0);
  if (b < 0 || b >= c.in(0).rank || b >= c.in(1).rank) return KernelStatus::kInvalidValue;
  switch (c.in(1).dtype) {
    case DType::kI64: return gather_nd_typed<int64_t>(c, b);
    case DType::kI32: return gather_nd_typed<int32_t>(c, b);
    default: return KernelStatus::kInvalidValue;
  }
}

}  // namespace kiln::kernels
