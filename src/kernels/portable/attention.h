#pragma once
// FusedAttention's run-time decoding, shared by the portable kernel (attention.cc) and the
// XNNPACK delegate (which splits batch slices and query rows over its pool).

#include "kernels/kernel.h"
#include "kernels/simd/attention.h"

namespace kiln::kernels {

/// Sizes, scale and post-op kinds from `c` (no pointers yet); *batches = product of the batch
/// axes. False when the operands are inconsistent (the shape function rejected such nodes).
bool fused_attention_slices(const RunCtx& c, simd::AttentionSlice* base, int64_t* batches);

/// `base` with the pointers of batch slice b (post tensors broadcast by strides).
void fused_attention_batch(const RunCtx& c, const simd::AttentionSlice& base, int64_t b, simd::AttentionSlice* s);

}  // namespace kiln::kernels
