// Trilu: keeps the upper (upper=1, the default) or lower triangle of the last two axes and
// zeroes the rest. Element (i, j) is kept when j - i >= k (upper) or j - i <= k (lower); k is
// the optional scalar i64 input #1 (default 0). Any dtype: zero is all-zero bytes for each.
// torch writes it for torch.triu / torch.tril (causal attention masks).
#include <algorithm>
#include <cstring>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status trilu_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 2));
  if (c.rank(0) < 2)
    return c.error("input " + c.pool.shape_to_string(c.in(0).shape) + " must have rank >= 2");
  if (c.has_input(1)) {
    KILN_TRY(c.expect_dtype(1, DType::kI64));
    const std::vector<ExprId>& ks = c.in(1).shape;
    if (ks.size() > 1 || (ks.size() == 1 && !c.pool.is_const_value(ks[0], 1)))
      return c.error("k " + c.pool.shape_to_string(ks) + " must be a scalar");
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = c.in(0).shape;
  return ok_status();
}

KernelStatus trilu_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  if (x.rank < 2 || y.numel() != x.numel()) return KernelStatus::kInvalidValue;
  const int64_t k = c.has_input(1) ? c.in(1).as<int64_t>()[0] : 0;
  const bool upper = c.attrs.get_int("upper", 1) != 0;
  const int64_t rows = x.dims[x.rank - 2], cols = x.dims[x.rank - 1];
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  const auto* src = static_cast<const unsigned char*>(x.data);
  auto* dst = static_cast<unsigned char*>(y.data);
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t row = (m * rows + i) * cols * es;
      // Columns [lo, hi) are kept: j >= i + k (upper) or j <= i + k (lower), clamped to the row.
      const int64_t edge = upper ? i + k : i + k + 1;  // may lie outside [0, cols]
      const int64_t cut = std::min(cols, std::max<int64_t>(0, edge));
      const int64_t lo = upper ? cut : 0, hi = upper ? cols : cut;
      std::memset(dst + row, 0, static_cast<size_t>(cols * es));
      if (hi > lo) std::memcpy(dst + row + lo * es, src + row + lo * es, static_cast<size_t>((hi - lo) * es));
    }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
