#pragma once
// Winograd F(2x2, 3x3) and F(4x4, 3x3) for dense 3x3 stride-1 convolutions (NHWC), on the dense
// kernel's GEMM microkernel. Each T x T block of outputs ("tile", T = 2 or 4) reads a (T+2)^2
// input window; per input channel the window is transformed (V = B^T d B), the weights were
// transformed at create (U = G g G^T), and the (T+2)^2 positions of the transform are as many
// GEMMs V[xi] (tiles x C) times U[xi] (C x M); the outputs are A^T M A. That is 16 multiplies
// per 2x2 outputs and channel pair (F(2x2)) or 36 per 4x4 (F(4x4)) instead of 36 or 144: on a
// layer where the direct kernel already runs at the FMA peak (and ONNX Runtime too), the only
// way to go faster is fewer multiplies. F(4x4)'s transforms (Lavin and Gray's points 0, +-1,
// +-2) scale values by up to 100, so its rounding error is about ten times F(2x2)'s.
//
// Non-finite values keep the direct convolution's classes: a tile whose outputs (in a block of
// 16 channels) come out NaN or Inf is computed again directly from the original weights, so a
// NaN or Inf reaches exactly the outputs whose 3x3 window holds it, as +Inf or NaN as the
// direct sum gives. Finite outputs differ from the direct sum by rounding only.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "delegates/xnnpack/dense_conv.h"

namespace kiln::delegates::xnnpack {


/// True when a convolution of these static attributes runs here: 3x3, stride 1, no dilation,
/// one group, at least 16 channels in and out, 32 where the GEMM takes two blocks per call
/// (AVX-512; below that the transforms cost more than the multiplies they save).
bool winograd_fits(size_t kh, size_t kw, size_t stride_h, size_t stride_w, size_t dilation_h, size_t dilation_w,
                   size_t groups, size_t in_channels, size_t out_channels);

/// Transformed weights: per block of 16 output channels, (tile + 2)^2 panels [C][16] (one per
/// position of the transform), zero past the last channel; the bias padded alike; the original
/// [M, C, 3, 3] weights (not copied: the program's constant, which outlives the Method) for
/// the tiles recomputed directly.
struct WinogradWeights {
  size_t tile = 2;  ///< outputs per tile side: 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))
  size_t out_channels = 0, in_channels = 0;
  AlignedFloats panels;
  AlignedFloats bias;
  std::vector<float> zero;  ///< in_channels zeros: the pixel a padded position reads
  const float* original = nullptr;
};

/// Packs ONNX [M, C, 3, 3] weights and an optional bias [M] for F(tile x tile, 3x3), tile 2 or 4.
void pack_winograd(const float* w, const float* bias, size_t m, size_t c, size_t tile, WinogradWeights* out);

/// True when a run at this geometry has tiles enough for Winograd to beat the direct kernel:
/// with few tiles (a small map at the end of a network, or a small input) the layer is bound
/// by reading its weights, and Winograd's are 16/9 of the direct ones, which also drops the
/// taps that read only padding.
bool winograd_pays(const DenseConvGeometry& g, size_t tile);

/// The tile for a layer of c -> m channels whose largest run (its bound) has geometry `g`:
/// 4 where F(4x4, 3x3) pays there, else 2.
size_t winograd_tile(const DenseConvGeometry& g, size_t c, size_t m);

/// Floats of scratch one worker needs (the transformed inputs and products of its tiles).
size_t winograd_scratch_floats(const WinogradWeights& w);

/// y = clamp(conv(x, w) + bias), then the gate if any; `scratch` holds `slots` workers'
/// scratch (slots >= 1; more than the pool's threads are not used). Never allocates.
void winograd_conv(const WinogradWeights& w, const DenseConvGeometry& g, const float* x, float* y, float* scratch,
                   size_t slots, pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
