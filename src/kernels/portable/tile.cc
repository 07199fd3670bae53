// Tile: input #0 repeated repeats[k] times along each axis k; repeats (input #1, 1-D i64
// or i32, one per axis) is a constant or computed from shapes, so it may be symbolic.
#include <cstring>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Carries the input's known values (sym_values) into the tiled output.
void fold_tile(ShapeCtx& c) {
  std::vector<int64_t> out_dims, dims;
  std::vector<ExprId> values;
  if (!can_carry(c, &out_dims) || !const_dims(c.pool, c.in(0).shape, &dims) || !small_values(c, 0, &values)) return;
  if (static_cast<int64_t>(values.size()) != numel_of(dims)) return;
  std::vector<ExprId> out;
  for (int64_t e = 0; e < numel_of(out_dims); ++e) {
    int64_t rest = e, src = 0, stride = 1;
    for (size_t k = dims.size(); k-- > 0;) {
      src += rest % out_dims[k] % dims[k] * stride;
      rest /= out_dims[k];
      stride *= dims[k];
    }
    out.push_back(values[src]);
  }
  c.out(0).sym_values = std::move(out);
}

/// Element k of an i64 or i32 tensor.
int64_t read_int(const TensorView& t, int64_t k) {
  return t.dtype == DType::kI32 ? t.as<int32_t>()[k] : t.as<int64_t>()[k];
}

}  // namespace

Status tile_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  core::ExprPool& p = c.pool;
  if (c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32)
    return c.error(std::string("repeats input #1 has dtype ") + dtype_name(c.in(1).dtype) + ", expected i64");
  std::vector<ExprId> repeats;
  if (c.rank(1) != 1 || !known_ints(c, 1, &repeats))
    return c.error("repeats input #1 must be a 1-D constant or computed from input shapes");
  const std::vector<ExprId>& in = c.in(0).shape;
  if (repeats.size() != in.size())
    return c.error("repeats " + p.shape_to_string(repeats) + " has " + std::to_string(repeats.size()) +
                   " elements but the input " + p.shape_to_string(in) + " has rank " + std::to_string(in.size()) +
                   "; there must be one per axis");
  std::vector<ExprId> out(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    KILN_TRY(c.require_at_least(repeats[k], 0, "repeats " + p.shape_to_string(repeats) + " element " + std::to_string(k)));
    out[k] = p.mul(in[k], repeats[k]);
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = std::move(out);
  fold_tile(c);
  return ok_status();
}

KernelStatus tile_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  if (x.dtype != y.dtype || x.rank != y.rank || c.in(1).numel() != x.rank) return KernelStatus::kInvalidValue;
  for (int k = 0; k < x.rank; ++k)  // bind fixed the output; check it is the actual tiling
    if (y.dims[k] != x.dims[k] * read_int(c.in(1), k)) return KernelStatus::kInvalidValue;
  const auto es = static_cast<int64_t>(dtype_size(x.dtype));
  const auto* src = static_cast<const unsigned char*>(x.data);
  auto* dst = static_cast<unsigned char*>(y.data);
  if (x.rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(es));
    return KernelStatus::kOk;
  }
  if (y.numel() == 0) return KernelStatus::kOk;
  // One output row (innermost axis) at a time: the input row it repeats, copied whole.
  const int r = x.rank;
  const int64_t row = x.dims[r - 1] * es, times = y.dims[r - 1] / x.dims[r - 1];
  int64_t in_strides[kMaxRank], idx[kMaxRank] = {};
  int64_t s = x.dims[r - 1];
  for (int k = r - 2; k >= 0; --k) {
    in_strides[k] = s;
    s *= x.dims[k];
  }
  int64_t off = 0;  // input row offset (elements) of output row idx
  for (;;) {
    for (int64_t t = 0; t < times; ++t, dst += row) std::memcpy(dst, src + off * es, static_cast<size_t>(row));
    int k = r - 2;
    for (; k >= 0; --k) {  // odometer over the outer output axes; the input index wraps
      ++idx[k];
      if (idx[k] % x.dims[k] == 0) {
        off -= (x.dims[k] - 1) * in_strides[k];
      } else {
        off += in_strides[k];
      }
      if (idx[k] < y.dims[k]) break;
      idx[k] = 0;
    }
    if (k < 0) return KernelStatus::kOk;
  }
}

}  // namespace kiln::kernels
