#pragma once
// The integer convolution on the quantized GEMM microkernel (simd/qgemm.h), shared by
// ConvInteger and QLinearConv (weights packed per call, qlinear.cc) and
// PackedConvIntegerToFloat (weights packed at export, packed_integer_to_float.cc). Output positions are
// the GEMM's rows, gathered 8 at a time (a window inside the input tap by tap for all 8, any
// other position by position with x's zero point in the padding); one group's output channels
// are its columns; int32 results are stored transposed into a channels-first tile of
// kConvTile positions, each channel's run then handed to the caller.

#include <cstddef>
#include <cstdint>

#include "kernels/kernel.h"
#include "kernels/portable/conv.h"

namespace kiln::kernels {

constexpr int64_t kConvTile = 256;  ///< output positions per tile
constexpr size_t kQgemmMaxK = 8192;  ///< a row of K (padded) bytes per position, 8 on the stack

/// One group's operands for one call.
struct QConvOperands {
  const uint8_t* xg = nullptr;  ///< batch n's input group, as bytes
  uint8_t x_zero = 0;
  bool x_signed = false;
  const uint8_t* panels = nullptr;  ///< ceil(mg / 16) panels of qgemm_k_padded(K) (K = Cg * kernel volume)
  const int32_t* bias = nullptr;    ///< per column (padded to 16): the flip's and zero points' terms
  const int32_t* wz = nullptr;      ///< weight zero points (padded), or null when all are 0
  bool a_unsigned = true;           ///< the weights are int8: activations are the u8 side
  uint8_t a_xor = 0;                ///< 0x80 where the activations' top bit flips
};

/// The per-column constants of a call, from the weights' column sums and zero points (mg of
/// each): bias[j] = -(shift + xz) * colsum[j] + K * xz * wz[j] (int32 arithmetic), wz_out[j] =
/// wz[j], both padded with 0 to whole panels; sets op's signedness, flip and zero point.
void qconv_constants(bool x_signed, bool w_signed, int32_t xz, size_t k, const int32_t* colsum, const int32_t* wz,
                     size_t mg, int32_t* bias, int32_t* wz_out, QConvOperands* op);

/// `emit(ctx, m, acc, p0, count)`: output channel m of the group (0-based), positions
/// [p0, p0 + count), int32 values acc[0, count).
using QConvEmit = void (*)(void* ctx, int64_t m, const int32_t* acc, int64_t p0, int64_t count);

/// Every position of one group of one batch; `tile` holds mg x kConvTile int32.
void qconv_group(const RunCtx& c, const ConvPlanes& cp, const QConvOperands& op, int32_t* tile, QConvEmit emit,
                 void* ctx);

}  // namespace kiln::kernels
