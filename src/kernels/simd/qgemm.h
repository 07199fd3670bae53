#pragma once
// The quantized GEMM microkernel: up to kQgemmMr rows of 8-bit activations times one packed
// panel of 16 output channels of 8-bit weights, accumulated exactly in int32 and requantized
// to 8-bit outputs (the rounding of kernels/portable/quant.h: the same bytes as the portable
// QLinearConv/QLinearMatMul). The delegate's int8 convolution and fully connected layer
// (delegates/xnnpack/int8_conv.h) pack their operands for it.
//
// One operand is read as uint8 and the other as int8, as vpdpbusd (AVX-512 VNNI) reads them:
// with `a_unsigned`, A (activations) is the u8 side and B (weights) the s8 side, else the
// reverse. The packer makes every dtype mix fit by flipping A's top bit where needed and
// folding the shift into the per-channel constant (int8_conv.cc).
//
// ISA table (isa.h): avx512vnni (vpdpbusd), avx2 (widened to int16, vpmaddwd: exact, no
// vpmaddubsw saturation), plain C++. Never allocates.

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

/// Output channels of one packed panel.
constexpr size_t kQgemmNr = 16;
/// Most rows one call takes.
constexpr size_t kQgemmMr = 8;

/// k rounded up to the groups of 4 that a panel holds (padding weights are 0).
inline size_t qgemm_k_padded(size_t k) { return (k + 3) / 4 * 4; }
/// Bytes of one packed panel: kp/4 groups of 16 channels x 4 k.
inline size_t qgemm_panel_bytes(size_t kp) { return kp * kQgemmNr; }
/// Where weight (k, channel j of the panel) goes inside its panel.
inline size_t qgemm_panel_index(size_t k, size_t j) { return (k / 4) * 4 * kQgemmNr + j * 4 + k % 4; }

/// Packs a [K, N] row-major 8-bit matrix (a MatMul's B) into ceil(N/16) panels of
/// qgemm_panel_bytes(qgemm_k_padded(K)) bytes each, zero padded.
void qgemm_pack_b(const uint8_t* b, size_t k, size_t n, uint8_t* panels);

/// Per channel of the panel (16 entries each, padded): what turns the raw dot product into the
/// requantized output. y[r][j] = clamp(round((dot + bias[j] - wz[j] * rowsum[r]) * ratio[j]) + zp).
struct QgemmEpilogue {
  const int32_t* bias = nullptr;   ///< the bias with every zero-point and shift term folded in
  const int32_t* wz = nullptr;     ///< weight zero points, or null when all are 0
  const float* ratio = nullptr;    ///< x_scale * w_scale / y_scale
  int32_t zp = 0, lo = -128, hi = 127;  ///< output zero point and clamp, within the dtype's range
};

/// rows [0, mr) of A (row r at a + r * lda, kp bytes, kp a multiple of 4) times `panel`;
/// rowsum[r] (read only when e.wz is set) is the sum of row r's activations; writes the first
/// `nc` channels of row r at y + r * ldy (one byte each: int8 or uint8 as the clamp says).
void qgemm(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
           const QgemmEpilogue& e, uint8_t* y, size_t ldy, size_t nc, bool a_unsigned);

/// The float epilogue of a MatMulInteger that export fused with its Cast, scale and bias
/// (PackedMatMulIntegerToFloat): y[r][j] = float(dot + bias[j] - wz[j] * rowsum[r]) * scale[j],
/// plus fbias[j] when set (two f32 operations, as the unfused graph rounds them).
struct QgemmF32Epilogue {
  const int32_t* bias = nullptr;
  const int32_t* wz = nullptr;  ///< null when all are 0
  const float* scale = nullptr;
  const float* fbias = nullptr;  ///< null: no bias
};

/// qgemm with the float epilogue: writes the first nc floats of row r at y + r * ldy.
void qgemm_f32(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
               const QgemmF32Epilogue& e, float* y, size_t ldy, size_t nc, bool a_unsigned);

/// The int32 epilogue, stored transposed (a channels-first result: ConvInteger, QLinearConv
/// on the portable path): y[j * ldy + r] = dot + bias[j] - wz[j] * rowsum[r].
struct QgemmI32Epilogue {
  const int32_t* bias = nullptr;
  const int32_t* wz = nullptr;  ///< null when all are 0
};

/// qgemm with the transposed int32 epilogue: column j of row r at y[j * ldy + r].
void qgemm_i32t(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                const QgemmI32Epilogue& e, int32_t* y, size_t ldy, size_t nc, bool a_unsigned);

/// A depthwise convolution along npix output pixels of a row: for pixel p and each of C
/// channels, acc[j] = bias[j] + sum over taps t of x[t][p * step[t] + j] *
/// w[(j / 16) * taps * 16 + t * 16 + j % 16] (x read as int8 or uint8, w int16 with the weight
/// zero point already subtracted), requantized as qgemm's epilogue (e's arrays cover every
/// channel, padded to 16; e.wz unused) into y[p * C + j]. A padded tap points at C bytes of
/// x's zero point with step 0.
void qdw_row(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed, size_t c,
             const int16_t* w, const QgemmEpilogue& e, uint8_t* y);

/// The implementation qgemm uses: "avx512vnni", "avx2" or "plain".
const char* qgemm_isa();

/// qgemm on implementation `isa`; false (nothing done) when this CPU or build lacks it.
/// qgemm_f32 on implementation `isa`; false when this CPU or build lacks it.
bool qgemm_f32_on(const char* isa, size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum,
                  const uint8_t* panel, const QgemmF32Epilogue& e, float* y, size_t ldy, size_t nc, bool a_unsigned);

/// qgemm_i32t on implementation `isa`; false when this CPU or build lacks it.
bool qgemm_i32t_on(const char* isa, size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum,
                   const uint8_t* panel, const QgemmI32Epilogue& e, int32_t* y, size_t ldy, size_t nc, bool a_unsigned);

/// qdw_row on implementation `isa`; false when this CPU or build lacks it.
bool qdw_row_on(const char* isa, size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed,
                size_t c, const int16_t* w, const QgemmEpilogue& e, uint8_t* y);

bool qgemm_on(const char* isa, size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum,
              const uint8_t* panel, const QgemmEpilogue& e, uint8_t* y, size_t ldy, size_t nc, bool a_unsigned);

}  // namespace kiln::simd
