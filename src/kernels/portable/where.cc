// Where: condition ? X : Y per element, the three operands broadcast together (numpy).
// The condition is bool; X and Y share a dtype, which the output takes. Known values fold
// when the condition is known (e.g. Where(Equal(shape, -1), 1, shape) around Expand).
#include "kernels/kernel.h"
#include "kernels/portable/broadcast.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

template <typename Word>
void select(const RunCtx& c) {
  const auto* cond = c.in(0).as<uint8_t>();
  const Word* x = c.in(1).as<Word>();
  const Word* y = c.in(2).as<Word>();
  Word* out = c.out(0).as<Word>();
  BroadcastIter it;
  it.init(c.out(0), c.inputs, 3);
  it.for_each_row([&](int64_t o, int64_t oc, int64_t ox, int64_t oy, int64_t count, int64_t sc, int64_t sx,
                      int64_t sy) {
    // Contiguous rows with one side possibly a broadcast scalar (masked_fill: Where(mask, -inf,
    // scores)) get loops with constant strides, which the compiler vectorizes.
    const uint8_t* cr = cond + oc;
    Word* orow = out + o;
    if (sc == 1 && sx == 1 && sy == 1) {
      const Word* xr = x + ox;
      const Word* yr = y + oy;
      for (int64_t i = 0; i < count; ++i) orow[i] = cr[i] ? xr[i] : yr[i];
    } else if (sc == 1 && sx == 0 && sy == 1) {
      const Word xv = x[ox];
      const Word* yr = y + oy;
      for (int64_t i = 0; i < count; ++i) orow[i] = cr[i] ? xv : yr[i];
    } else if (sc == 1 && sx == 1 && sy == 0) {
      const Word yv = y[oy];
      const Word* xr = x + ox;
      for (int64_t i = 0; i < count; ++i) orow[i] = cr[i] ? xr[i] : yv;
    } else {
      for (int64_t i = 0; i < count; ++i) orow[i] = cond[oc + i * sc] ? x[ox + i * sx] : y[oy + i * sy];
    }
  });
}

}  // namespace

Status where_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(3, 3));
  if (c.in(0).dtype != DType::kBool)
    return c.error(std::string("condition input #0 has dtype ") + dtype_name(c.in(0).dtype) + ", expected bool");
  if (c.in(1).dtype != c.in(2).dtype)
    return c.error(std::string("X and Y have different dtypes ") + dtype_name(c.in(1).dtype) + " and " +
                   dtype_name(c.in(2).dtype));
  KILN_ASSIGN_OR_RETURN(std::vector<ExprId> shape, c.broadcast(c.in(0).shape, c.in(1).shape));
  KILN_ASSIGN_OR_RETURN(shape, c.broadcast(shape, c.in(2).shape));
  c.out(0).dtype = c.in(1).dtype;
  c.out(0).shape = std::move(shape);
  fold_broadcast(c, 3, [&](const std::vector<ExprId>& v) {
    const int t = truth_of(c.pool, v[0]);
    return t < 0 ? core::kNoExpr : t ? v[1] : v[2];  // kNoExpr when the chosen side is unknown
  });
  return ok_status();
}

KernelStatus where_run(const RunCtx& c) {
  for (uint32_t i = 0; i < 3; ++i)
    if (!c.has_input(i) || c.in(i).rank > c.out(0).rank) return KernelStatus::kInvalidValue;
  if (c.in(0).dtype != DType::kBool || c.in(1).dtype != c.out(0).dtype || c.in(2).dtype != c.out(0).dtype)
    return KernelStatus::kInvalidValue;
  switch (dtype_size(c.out(0).dtype)) {
    case 1: select<uint8_t>(c); break;
    case 4: select<uint32_t>(c); break;
    case 8: select<uint64_t>(c); break;
    default: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
