// ChannelShuffle (a Kiln op; export makes it from the Reshape-Transpose-Reshape that models
// write for a channel shuffle, e.g. shufflenet's x.view(n, g, c/g, h, w).transpose(1, 2)):
// [N, C, ...] -> [N, C, ...] with output channel i * G + g = input channel g * (C / G) + i, for
// groups G (attribute `groups`) and i < C / G. Any dtype: each channel's plane is one copy.
// C must be a multiple of G: checked at export, or a guard when C is symbolic.
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

Status channel_shuffle_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  if (c.rank(0) < 2) return c.error("input " + c.pool.shape_to_string(c.in(0).shape) + " must have rank >= 2 (N, C, ...)");
  const int64_t g = c.attrs.get_int("groups", 0);
  if (g < 1 || g > (int64_t{1} << 24)) return c.error("groups " + std::to_string(g) + " must be in [1, 2^24]");
  const std::vector<ExprId>& x = c.in(0).shape;
  KILN_TRY(c.require_divisible(x[1], g, "(channels of " + c.pool.shape_to_string(x) + " must be a multiple of groups = " +
                                            std::to_string(g) + ")"));
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = x;
  return ok_status();
}

KernelStatus channel_shuffle_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  const int64_t g = c.attrs.get_int("groups", 0);
  if (x.rank < 2 || y.rank != x.rank || g < 1 || x.dims[1] % g != 0) return KernelStatus::kInvalidValue;
  for (int k = 0; k < x.rank; ++k)
    if (y.dims[k] != x.dims[k]) return KernelStatus::kInvalidValue;
  int64_t inner = 1;
  for (int k = 2; k < x.rank; ++k) inner *= x.dims[k];
  const int64_t n = x.dims[0], ch = x.dims[1], per = ch / g;
  const size_t plane = static_cast<size_t>(inner) * dtype_size(x.dtype);
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(y.data);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < per; ++i)
      for (int64_t k = 0; k < g; ++k)
        std::memcpy(dst + static_cast<size_t>((b * ch + i * g + k)) * plane,
                    src + static_cast<size_t>((b * ch + k * per + i)) * plane, plane);
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
