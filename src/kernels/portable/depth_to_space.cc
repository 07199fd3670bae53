// DepthToSpace and SpaceToDepth (NCHW, attribute blocksize b): channel blocks become b x b
// spatial tiles and back; each is one strided copy.
//   DepthToSpace: [N, C, H, W] -> [N, C/b^2, H*b, W*b]; input channel of output (c, by, bx) is
//     (by*b + bx)*C/b^2 + c in mode DCR (the default) and c*b^2 + by*b + bx in mode CRD.
//   SpaceToDepth: [N, C, H, W] -> [N, C*b^2, H/b, W/b]; output channel (by*b + bx)*C + c.
// C must be a multiple of b^2 (resp. H and W of b): checked at export, or a guard when the
// size is symbolic (e.g. a dynamic H fed to SpaceToDepth needs H % b == 0).
#include <string>
#include <string_view>

#include "kernels/kernel.h"
#include "kernels/portable/strided_copy.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Reads and checks blocksize (and DepthToSpace's mode); *crd is set for mode CRD.
Status read_block(ShapeCtx& c, bool with_mode, int64_t* b, bool* crd) {
  KILN_TRY(c.expect_inputs(1, 1));
  if (c.rank(0) != 4)
    return c.error("input " + c.pool.shape_to_string(c.in(0).shape) + " must have rank 4 (NCHW)");
  if (!c.attrs.has("blocksize")) return c.error("missing required attribute 'blocksize'");
  *b = c.attrs.get_int("blocksize", 0);
  if (*b < 1 || *b > 1024) return c.error("blocksize " + std::to_string(*b) + " must be in [1, 1024]");
  *crd = false;
  if (with_mode) {
    const std::string_view mode = c.attrs.get_str("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      return c.error("mode '" + std::string(mode) + "' must be DCR or CRD");
    *crd = mode == "CRD";
  }
  return ok_status();
}

}  // namespace

Status depth_to_space_shape(ShapeCtx& c) {
  int64_t b;
  bool crd;
  KILN_TRY(read_block(c, true, &b, &crd));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  KILN_TRY(c.require_divisible(x[1], b * b,
                               "(channels of " + p.shape_to_string(x) + " must be a multiple of blocksize^2 = " +
                                   std::to_string(b * b) + ")"));
  const ExprId bb = p.constant(b);
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = {x[0], p.floordiv(x[1], p.constant(b * b)), p.mul(x[2], bb), p.mul(x[3], bb)};
  return ok_status();
}

Status space_to_depth_shape(ShapeCtx& c) {
  int64_t b;
  bool crd;
  KILN_TRY(read_block(c, false, &b, &crd));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& x = c.in(0).shape;
  for (int axis : {2, 3})
    KILN_TRY(c.require_divisible(x[axis], b,
                                 "(" + std::string(axis == 2 ? "height" : "width") + " of " + p.shape_to_string(x) +
                                     " must be a multiple of blocksize " + std::to_string(b) + ")"));
  const ExprId bb = p.constant(b);
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = {x[0], p.mul(x[1], p.constant(b * b)), p.floordiv(x[2], bb), p.floordiv(x[3], bb)};
  return ok_status();
}

KernelStatus depth_to_space_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  const int64_t b = c.attrs.get_int("blocksize", 0);
  if (x.rank != 4 || y.rank != 4 || b < 1 || x.dims[1] % (b * b) != 0) return KernelStatus::kInvalidValue;
  const int64_t n = x.dims[0], cc = x.dims[1] / (b * b), h = x.dims[2], w = x.dims[3];
  if (y.dims[0] != n || y.dims[1] != cc || y.dims[2] != h * b || y.dims[3] != w * b) return KernelStatus::kInvalidValue;
  const int64_t plane = h * w;
  const bool crd = c.attrs.str_equals("mode", "CRD");
  // Output order [n, c, h, by, w, bx]; the input element each one reads:
  const int64_t dims[6] = {n, cc, h, b, w, b};
  const int64_t strides[6] = {cc * b * b * plane, (crd ? b * b : 1) * plane, w,
                              (crd ? b : b * cc) * plane, 1, (crd ? 1 : cc) * plane};
  strided_copy(y.data, x.data, dtype_size(x.dtype), 6, dims, strides, 0);
  return KernelStatus::kOk;
}

KernelStatus space_to_depth_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  const int64_t b = c.attrs.get_int("blocksize", 0);
  if (x.rank != 4 || y.rank != 4 || b < 1 || x.dims[2] % b != 0 || x.dims[3] % b != 0)
    return KernelStatus::kInvalidValue;
  const int64_t n = x.dims[0], cc = x.dims[1], h = x.dims[2], w = x.dims[3];
  if (y.dims[0] != n || y.dims[1] != cc * b * b || y.dims[2] != h / b || y.dims[3] != w / b)
    return KernelStatus::kInvalidValue;
  // Output order [n, by, bx, c, h', w']; input element x[n][c][h'*b + by][w'*b + bx].
  const int64_t dims[6] = {n, b, b, cc, h / b, w / b};
  const int64_t strides[6] = {cc * h * w, w, 1, h * w, b * w, b};
  strided_copy(y.data, x.data, dtype_size(x.dtype), 6, dims, strides, 0);
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
