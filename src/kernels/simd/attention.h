#pragma once
// Scaled dot-product attention over one batch slice, row by row, with an online softmax:
// for query row i, keys are taken in tiles of kAttentionTile; each tile's scores
//   s[j] = (q_i . k_j) * scale, then the post ops in order (add a bias; or replace by `fill`
//   where a condition holds / does not hold)
// live only in that tile (on the stack), and the running max, sum and output row are rescaled
// as tiles come (exp(m_old - m_new)), so no score matrix is ever written. The result equals
// Softmax(scores) x V: a row whose scores are all -inf gives NaN, as the portable Softmax.
// exp is vmath's (max relative error 2e-7); AVX2+FMA when present, the same maths in scalar
// code otherwise. Never allocates.

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

constexpr size_t kAttentionTile = 64;
constexpr int kAttentionMaxPost = 4;

struct AttentionPost {
  enum Kind : uint8_t { kAdd = 1, kFillWhere = 2, kFillUnless = 3 };
  Kind kind = kAdd;
  const void* data = nullptr;  ///< kAdd: f32 bias; kFill*: bool condition; element (i, j) below
  ptrdiff_t row_stride = 0;    ///< elements between query rows (0: broadcast)
  ptrdiff_t col_stride = 0;    ///< elements between keys (0: broadcast)
  float fill = 0.f;
};

struct AttentionSlice {
  const float* q = nullptr;  ///< [lq][d]
  const float* k = nullptr;  ///< [lk][d], or [d][lk] when k_transposed
  const float* v = nullptr;  ///< [lk][dv]
  float* out = nullptr;      ///< [lq][dv]
  size_t lq = 0, lk = 0, d = 0, dv = 0;
  bool k_transposed = false;
  float scale = 1.f;
  AttentionPost post[kAttentionMaxPost];
  int num_post = 0;
};

/// Computes output rows [row_begin, row_end) of `a`.
void attention_rows(const AttentionSlice& a, size_t row_begin, size_t row_end);

}  // namespace kiln::simd
