#pragma once
// Pointwise kernels the delegate runs itself, over f32 buffers (any layout):
// - erf (GELU in transformers and ConvNeXt): an odd rational approximation of degree 13/8 on
//   [-4, 4] (outside, erf is +-1 in f32), as Eigen and XLA evaluate it; max abs error 4e-7;
// - tanh, and softmax over rows of a size known only at run time;
// - gates x * sigmoid(x) (Swish/SiLU) and x * hardsigmoid(x) in one pass instead of two
//   (the Sigmoid and the Mul of the graph); sigmoid(x) = (1 + tanh(x/2)) / 2 with Eigen's
//   rational tanh (max abs error 2e-7).
// AVX2+FMA when the CPU has it, the same formulas in scalar code otherwise; threaded in
// blocks of 4096 elements.

#include <cstddef>

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

/// y[i] = erf(x[i]) for i < n. Never allocates.
void fast_erf(const float* x, float* y, size_t n, pthreadpool_t pool);

/// y[i] = tanh(x[i]) (the rational above). Never allocates.
void fast_tanh(const float* x, float* y, size_t n, pthreadpool_t pool);

/// Softmax over each of `rows` contiguous rows of `n` (any n, decided at run time: attention
/// over a dynamic sequence); exp as Cephes' expf (max rel error 8e-8). A row whose entries
/// are all -inf gives NaN, as the portable kernel. Never allocates.
void softmax_rows(const float* x, float* y, size_t rows, size_t n, pthreadpool_t pool);

/// y[i] = x[i] * sigmoid(x[i]) (alpha = 0), or x[i] * clamp(alpha * x[i] + beta, 0, 1)
/// (hard, alpha > 0). Never allocates.
void gate(const float* x, float* y, size_t n, bool hard, float alpha, float beta, pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
