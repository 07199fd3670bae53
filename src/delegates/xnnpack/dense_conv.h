#pragma once
// Kiln's own dense NHWC convolution (and fully connected layer, a 1x1 convolution of height
// and width 1) for the delegate, used where it beats the XNNPACK build we link: Debian's
// libXNNPACK 2022 compiles its AVX2/FMA 5x16 GEMM microkernel with an accumulator spilled
// to the stack, which halves its throughput (measured: resnet18 1.4-2x slower than ONNX
// Runtime with every FLOP delegated). Register-blocked 6x16 microkernel, AVX2+FMA, chosen
// at run time; other CPUs keep XNNPACK.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

struct Gate;  // support.h

/// True when this CPU runs the dense kernel (AVX2 and FMA).
bool dense_conv_available();
/// True when a kh x kw kernel fits the kernel's tap table, or, `rows_only` (no padding, SAME
/// included, and dilation_w 1: every tile reads whole kernel rows), when its kh rows do.
bool dense_conv_fits(size_t kh, size_t kw, bool rows_only);

/// Storage on 64-byte (cache line) boundaries: a microkernel's weight rows (16 floats, one zmm)
/// then never straddle two lines.
template <typename T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <typename U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <typename U>
  bool operator==(const LineAligned<U>&) const { return true; }
  template <typename U>
  bool operator!=(const LineAligned<U>&) const { return false; }
};
using AlignedFloats = std::vector<float, LineAligned<float>>;

/// Weights packed at create: output channels in blocks of 16, each block a [KH*KW*C][16]
/// panel (taps in kh, kw, c order), zero-padded past the last channel; bias padded alike.
struct DenseConvWeights {
  size_t out_channels = 0, in_channels = 0, kernel_h = 1, kernel_w = 1;
  AlignedFloats panels;
  AlignedFloats bias;
  std::vector<float> zero;  ///< in_channels zeros: the row a padded tap reads
};

/// Packs ONNX [M, C, KH, KW] weights (or, with `transposed_fc`, a [C, M] matrix and
/// KH = KW = 1) and an optional bias [M].
void pack_dense_conv(const float* w, const float* bias, size_t m, size_t c, size_t kh, size_t kw, bool transposed_fc,
                     DenseConvWeights* out);

/// Geometry of one run (the bound-to shape); input [N, H, W, C], output [N, OH, OW, M].
struct DenseConvGeometry {
  size_t batch = 0, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  size_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;
  size_t in_stride = 0;   ///< floats between input pixels (C unless FC rows are strided)
  size_t out_stride = 0;  ///< floats between output pixels; 0: M (a Concat's slice when larger)
  float out_min = -INFINITY, out_max = INFINITY;
  /// y * act(y) (SiLU, hard swish) applied to each task's output while it is in cache.
  const Gate* gate = nullptr;
};

/// y = clamp(conv(x, w) + bias), then the gate if any. Never allocates; threads over output
/// tiles and channel blocks.
void dense_conv(const DenseConvWeights& w, const DenseConvGeometry& g, const float* x, float* y, pthreadpool_t pool);

/// A grouped convolution (each of `groups` groups dense, none depthwise): w[0..groups), one per
/// group, each C/G inputs to M/G outputs; g.in_stride is C and g.out_stride M (or a Concat's
/// slice). Never allocates; threads over groups and output tiles.
void grouped_dense_conv(const DenseConvWeights* w, size_t groups, const DenseConvGeometry& g, const float* x, float* y,
                        pthreadpool_t pool);

/// The microkernel under dense_conv (this CPU's row of its ISA table), for kernels built on
/// it: y[r][0..nc) = bias + a[r][0..k) x panel (k rows of kDenseBlock floats) for r < rows,
/// rows <= kDenseTileRows. Never allocates.
constexpr size_t kDenseTileRows = 6, kDenseBlock = 16;
void dense_gemm_rows(size_t rows, size_t k, const float* const* a, const float* panel, const float* bias,
                     float* const* y, size_t nc);
/// True when this CPU's row computes two blocks per call (AVX-512: 32 channels, 12 accumulators;
/// one block there is 6 accumulators and as many broadcasts as FMAs, bound by the loads).
bool dense_gemm_has_pairs();
/// Two blocks at once, where dense_gemm_has_pairs(): the second block's panel `panel_stride`
/// floats after the first's, `bias` 2 * kDenseBlock floats, y[r][0..nc) with nc <= 2 * kDenseBlock.
void dense_gemm_rows_pair(size_t rows, size_t k, const float* const* a, const float* panel, size_t panel_stride,
                          const float* bias, float* const* y, size_t nc);

/// True when this CPU's row has the 12-row pair kernel (AVX-512: 12 rows x 32 channels, 24
/// accumulators).
bool dense_gemm_has_pair12();
/// Twelve evenly spaced rows of two blocks, where dense_gemm_has_pair12(): y[r][0..nc) = bias +
/// a[r * lda][0..k) x (panel, the second block's `panel_stride` floats after), y[r] at y + r * ldy,
/// 16 < nc <= 2 * kDenseBlock.
void dense_gemm_rows_pair12(size_t k, const float* a, size_t lda, const float* panel, size_t panel_stride,
                            const float* bias, float* y, size_t ldy, size_t nc);

/// A MatMul whose operands are both computed at run time (attention's Q K^T and A V):
/// y[t] = a[t] @ b[t] over `batches` broadcast batches, a [M, K], b [K, N], y [M, N] row-major.
struct MatMulGeometry {
  size_t m = 0, k = 0, n = 0, batches = 0;
  int batch_rank = 0;
  size_t size[8] = {}, a_stride[8] = {}, b_stride[8] = {};  ///< per batch axis; stride 0 broadcasts
};

/// The geometry of y = a @ b at the actual dims (numpy broadcasting of the batch axes).
MatMulGeometry matmul_geometry(const int64_t* a_dims, int a_rank, const int64_t* b_dims, int b_rank);

/// Runs it on the same microkernel, reading B in place (no packing). Never allocates.
void batch_matmul(const MatMulGeometry& g, const float* a, const float* b, float* y, pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
