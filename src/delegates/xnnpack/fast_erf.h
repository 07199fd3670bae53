#pragma once
// erf over f32 buffers for the delegate (GELU in transformers and ConvNeXt): a rational
// approximation, odd numerator of degree 13 over an even denominator of degree 8 on
// [-4, 4] (outside, erf is +-1 in f32), as Eigen and XLA evaluate it; max abs error 4e-7
// against std::erf. AVX2+FMA when the CPU has it, the same formula in scalar code otherwise.

#include <cstddef>

typedef struct pthreadpool* pthreadpool_t;

namespace kiln::delegates::xnnpack {

/// y[i] = erf(x[i]) for i < n. Never allocates; threads over blocks.
void fast_erf(const float* x, float* y, size_t n, pthreadpool_t pool);

}  // namespace kiln::delegates::xnnpack
