// Unsqueeze (view): inserts size-1 axes at the positions listed by the `axes` attribute
// (before opset 13) or constant input #1 (opset 13); positions index the output.
#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

Status unsqueeze_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 2));
  std::vector<int64_t> axes;
  if (c.attrs.has("axes")) {
    axes.assign(c.attrs.ints("axes"), c.attrs.ints("axes") + c.attrs.ints_size("axes"));
  } else if (c.has_input(1)) {
    if (!known_const_ints(c, 1, &axes)) return c.error("axes input #1 must be a constant");
  } else {
    return c.error("needs axes (the attribute before opset 13, input #1 from opset 13)");
  }
  const int64_t out_rank = c.rank(0) + static_cast<int64_t>(axes.size());
  if (out_rank > kMaxRank)
    return c.error("output rank " + std::to_string(out_rank) + " is above the limit " + std::to_string(kMaxRank));
  std::vector<bool> ones(out_rank, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t k, c.normalize_axis(a, out_rank));
    if (ones[k]) return c.error("axis " + std::to_string(a) + " is listed twice in axes");
    ones[k] = true;
  }
  std::vector<ExprId> out(out_rank);
  size_t next = 0;  // next input dim to place
  for (int64_t k = 0; k < out_rank; ++k) out[k] = ones[k] ? c.pool.constant(1) : c.in(0).shape[next++];
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = std::move(out);
  fold_view(c);  // known values keep their order
  return ok_status();
}

}  // namespace kiln::kernels
