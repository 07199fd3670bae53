// Expand: input #0 broadcast against the shape held by input #1 (1-D i64 or i32; a constant
// or computed from shapes, so its elements may be symbolic). The broadcast is numpy's and
// bidirectional: a 1 in the shape keeps the input's dim, and the output has the larger rank.
#include <cstring>

#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"
#include "kernels/portable/int_input.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

template <typename Word>
void broadcast_copy(const TensorView& x, TensorView& y) {
  const Word* src = x.as<Word>();
  Word* dst = y.as<Word>();
  const TensorView* ops[1] = {&x};
  BroadcastIter it;
  it.init(y, ops, 1);
  it.for_each_row([&](int64_t o, int64_t ox, int64_t, int64_t, int64_t count, int64_t sx, int64_t, int64_t) {
    if (sx == 1) {
      std::memcpy(dst + o, src + ox, static_cast<size_t>(count) * sizeof(Word));
    } else {
      for (int64_t i = 0; i < count; ++i) dst[o + i] = src[ox + i * sx];
    }
  });
}

/// Element k of an i64 or i32 tensor.
int64_t read_int(const TensorView& t, int64_t k) {
  return t.dtype == DType::kI32 ? t.as<int32_t>()[k] : t.as<int64_t>()[k];
}

}  // namespace

Status expand_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  core::ExprPool& p = c.pool;
  if (c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32)
    return c.error(std::string("shape input #1 has dtype ") + dtype_name(c.in(1).dtype) + ", expected i64");
  if (c.rank(1) != 1) return c.error("shape input #1 must be 1-D, got rank " + std::to_string(c.rank(1)));
  std::vector<ExprId> shape;
  if (!known_ints(c, 1, &shape))
    return c.error("shape input #1 is not known at export; it must be a constant or computed from input shapes");
  for (size_t k = 0; k < shape.size(); ++k)
    KILN_TRY(c.require_at_least(shape[k], 0, "shape " + p.shape_to_string(shape) + " element " + std::to_string(k)));
  KILN_ASSIGN_OR_RETURN(std::vector<ExprId> out, c.broadcast(c.in(0).shape, shape));
  if (out.size() > static_cast<size_t>(kMaxRank))
    return c.error("output rank " + std::to_string(out.size()) + " is above the limit " + std::to_string(kMaxRank));
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = std::move(out);
  fold_broadcast(c, 1, [](const std::vector<ExprId>& v) { return v[0]; });
  return ok_status();
}

KernelStatus expand_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  const TensorView& s = c.in(1);
  TensorView& y = c.out(0);
  // The output must be the broadcast of the actual input and shape, as bind computed it.
  const int64_t ns = s.numel();
  if (x.dtype != y.dtype || y.rank != (x.rank > ns ? x.rank : ns)) return KernelStatus::kInvalidValue;
  for (int k = 0; k < y.rank; ++k) {
    const int kx = k - (y.rank - x.rank);
    const int64_t ks = k - (y.rank - ns);
    const int64_t xd = kx >= 0 ? x.dims[kx] : 1, sd = ks >= 0 ? read_int(s, ks) : 1;
    if (xd != 1 && sd != 1 && xd != sd) return KernelStatus::kInvalidValue;
    if (y.dims[k] != (xd == 1 ? sd : xd)) return KernelStatus::kInvalidValue;
  }
  if (y.numel() == 0) return KernelStatus::kOk;
  switch (dtype_size(y.dtype)) {
    case 1: broadcast_copy<uint8_t>(x, y); break;
    case 4: broadcast_copy<uint32_t>(x, y); break;
    case 8: broadcast_copy<uint64_t>(x, y); break;
    default: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
