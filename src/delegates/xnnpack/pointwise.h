#pragma once
// Pointwise kernels the delegate runs itself, over f32 buffers (any layout): the math of
// kernels/simd/vmath.h (error bounds there), split over the delegate's thread pool in blocks
// of 4096 elements (softmax: of whole rows).
// - erf (GELU in transformers and ConvNeXt), tanh, softmax over rows of a size known only at
//   run time;
// - gates x * sigmoid(x) (Swish/SiLU) and x * hardsigmoid(x) in one pass instead of two
//   (the Sigmoid and the Mul of the graph).

#include <cstddef>

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

/// y[i] = erf(x[i]) for i < n. Never allocates.
void fast_erf(const float* x, float* y, size_t n, pthreadpool_t pool);

/// y[i] = tanh(x[i]) (the rational above). Never allocates.
void fast_tanh(const float* x, float* y, size_t n, pthreadpool_t pool);

/// y[i] = clamp(x[i], lo, hi) with NaN kept (simd::clamp: Relu, Relu6, Clip). Never allocates.
void fast_clamp(const float* x, float* y, size_t n, float lo, float hi, pthreadpool_t pool);

/// GELU (pointwise.h's erf or tanh form). Never allocates.
void fast_gelu(const float* x, float* y, size_t n, bool tanh_form, pthreadpool_t pool);

/// LayerNorm over each of `rows` contiguous rows of `n` with gamma[n] and beta[n] (beta may be
/// null). Never allocates.
void layer_norm_rows(const float* x, float* y, size_t rows, size_t n, const float* gamma, const float* beta, float eps,
                     pthreadpool_t pool);

/// Softmax over each of `rows` contiguous rows of `n` (any n, decided at run time: attention
/// over a dynamic sequence); exp as Cephes' expf (max rel error 8e-8). A row whose entries
/// are all -inf gives NaN, as the portable kernel. Never allocates.
void softmax_rows(const float* x, float* y, size_t rows, size_t n, pthreadpool_t pool);

/// y[i] = x[i] * sigmoid(x[i]) (alpha = 0), or x[i] * clamp(alpha * x[i] + beta, 0, 1)
/// (hard, alpha > 0). Never allocates.
void gate(const float* x, float* y, size_t n, bool hard, float alpha, float beta, pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
