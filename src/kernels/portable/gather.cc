// Gather: picks slices of `data` along `axis` by the (i64 or i32) `indices`; negative
// indices count from the end. Output shape: data[:axis] + indices.shape + data[axis+1:].
// Known small integer data (e.g. a Shape result) gathered by constant indices folds.
#include <algorithm>
#include <cstring>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Carries data's known values (sym_values) through constant indices: Shape -> Gather.
void fold_gather(ShapeCtx& c, int64_t axis) {
  core::ExprPool& p = c.pool;
  std::vector<int64_t> out_dims, dims;
  std::vector<ExprId> data, idx;
  if (!can_carry(c, &out_dims) || !const_dims(p, c.in(0).shape, &dims)) return;
  if (!small_values(c, 0, &data) || !small_values(c, 1, &idx)) return;
  if (static_cast<int64_t>(data.size()) != numel_of(dims)) return;
  const int64_t d = dims[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= dims[k];
  for (size_t k = axis + 1; k < dims.size(); ++k) inner *= dims[k];
  std::vector<ExprId> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (ExprId j : idx) {
      if (!p.is_const(j)) return;
      int64_t v = p.const_value(j);
      if (v < -d || v >= d) return;
      if (v < 0) v += d;
      for (int64_t r = 0; r < inner; ++r) out.push_back(data[(o * d + v) * inner + r]);
    }
  }
  if (static_cast<int64_t>(out.size()) == numel_of(out_dims)) c.out(0).sym_values = std::move(out);
}

}  // namespace

Status gather_shape(ShapeCtx& c) {
  KILN_TRY(expect_gather_operands(c));
  core::ExprPool& p = c.pool;
  const SymTensor& data = c.in(0);
  const SymTensor& idx = c.in(1);
  const int64_t rank = c.rank(0);
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 0), rank));
  const int64_t out_rank = rank - 1 + c.rank(1);
  if (out_rank > kMaxRank)
    return c.error("output rank " + std::to_string(out_rank) + " is above the limit " + std::to_string(kMaxRank));

  // Constant indices are checked now (or guarded when the axis is symbolic).
  KILN_TRY(require_indices_fit(c, 1, data.shape[axis],
                               " on axis " + std::to_string(axis) + " of " + p.shape_to_string(data.shape)));

  std::vector<ExprId> out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  c.out(0).dtype = data.dtype;
  c.out(0).shape = std::move(out);
  fold_gather(c, axis);
  return ok_status();
}

namespace {

template <typename I>
KernelStatus gather_typed(const RunCtx& c, int64_t axis) {
  const TensorView& data = c.in(0);
  TensorView& y = c.out(0);
  const I* idx = c.in(1).as<I>();
  const int64_t n = c.in(1).numel(), d = data.dims[axis];
  for (int64_t j = 0; j < n; ++j)  // validate first: no partial output on bad data
    if (idx[j] < -d || idx[j] >= d) return KernelStatus::kIndexOutOfRange;
  int64_t outer = 1, row = static_cast<int64_t>(dtype_size(data.dtype));  // row: bytes per index
  for (int k = 0; k < axis; ++k) outer *= data.dims[k];
  for (int k = static_cast<int>(axis) + 1; k < data.rank; ++k) row *= data.dims[k];
  if (y.nbytes() != static_cast<size_t>(outer * n * row)) return KernelStatus::kInvalidValue;
  if (row == 0) return KernelStatus::kOk;
  const auto* src = static_cast<const unsigned char*>(data.data);
  auto* dst = static_cast<unsigned char*>(y.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t v = idx[j] < 0 ? idx[j] + d : idx[j];
      std::memcpy(dst, src + (o * d + v) * row, static_cast<size_t>(row));
      dst += row;
    }
  }
  return KernelStatus::kOk;
}

}  // namespace

KernelStatus gather_run(const RunCtx& c) {
  const int32_t rank = c.in(0).rank;
  int64_t axis = c.attrs.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return KernelStatus::kInvalidValue;
  switch (c.in(1).dtype) {
    case DType::kI64: return gather_typed<int64_t>(c, axis);
    case DType::kI32: return gather_typed<int32_t>(c, axis);
    default: return KernelStatus::kInvalidValue;
  }
}

}  // namespace kiln::kernels
