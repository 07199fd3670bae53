#include "kernels/simd/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/simd/avx2_math.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/neon_math.h"
#include "kernels/simd/vmath.h"

namespace kiln::simd {

namespace {

using namespace detail;  // NOLINT: the building blocks of this file

// Post ops on the scores s of row i against keys [j0, j0 + t).
inline void post_ops(const AttentionSlice& a, size_t i, size_t j0, size_t t, float* s) {
  for (int p = 0; p < a.num_post; ++p) {
    const AttentionPost& op = a.post[p];
    const ptrdiff_t base = static_cast<ptrdiff_t>(i) * op.row_stride + static_cast<ptrdiff_t>(j0) * op.col_stride;
    if (op.kind == AttentionPost::kAdd) {
      const float* b = static_cast<const float*>(op.data) + base;
      if (op.col_stride == 1)
        for (size_t j = 0; j < t; ++j) s[j] += b[j];
      else
        for (size_t j = 0; j < t; ++j) s[j] += b[static_cast<ptrdiff_t>(j) * op.col_stride];
    } else {
      const uint8_t* c = static_cast<const uint8_t*>(op.data) + base;
      const bool when = op.kind == AttentionPost::kFillWhere;
      for (size_t j = 0; j < t; ++j)
        if ((c[static_cast<ptrdiff_t>(j) * op.col_stride] != 0) == when) s[j] = op.fill;
    }
  }
}

// Scores of row i against a key tile given as K^T rows (kt[e * ld + j], j < t), scaled.
void scores_scalar(const AttentionSlice& a, size_t i, const float* kt, size_t ld, size_t t, float* s) {
  const float* q = a.q + i * a.d;
  for (size_t j = 0; j < t; ++j) s[j] = 0.f;
  for (size_t e = 0; e < a.d; ++e)
    for (size_t j = 0; j < t; ++j) s[j] += q[e] * kt[e * ld + j];
  for (size_t j = 0; j < t; ++j) s[j] *= a.scale;
}

float exp_sum_scalar(float* s, size_t t, float m) {
  float sum = 0.f;
  for (size_t j = 0; j < t; ++j) sum += (s[j] = exp_scalar(s[j] - m));
  return sum;
}

void accumulate_scalar(const AttentionSlice& a, size_t j0, size_t t, const float* p, float corr, float* o) {
  for (size_t e = 0; e < a.dv; ++e) {
    float acc = o[e] * corr;
    for (size_t j = 0; j < t; ++j) acc += p[j] * a.v[(j0 + j) * a.dv + e];
    o[e] = acc;
  }
}

// The four steps of a key tile, per ISA: scores of one query row, their max, exp and sum in
// place, and the output row's update.
struct PlainOps {
  static void scores(const AttentionSlice& a, size_t i, const float* kt, size_t ld, size_t t, float* s) {
    scores_scalar(a, i, kt, ld, t, s);
  }
  static float tile_max(const float* s, size_t t) {
    float m = -INFINITY;
    for (size_t j = 0; j < t; ++j) m = std::max(m, s[j]);
    return m;
  }
  static float exp_sum(float* s, size_t t, float m) { return exp_sum_scalar(s, t, m); }
  static void accumulate(const AttentionSlice& a, size_t j0, size_t t, const float* p, float corr, float* o) {
    accumulate_scalar(a, j0, t, p, corr, o);
  }
};

#if defined(__x86_64__)
// ---- AVX2 + FMA ------------------------------------------------------------------------------

// NB keys at once (NB/8 accumulators, independent FMA chains over d).
template <size_t NB>
KILN_AVX2 inline void scores_block(const float* q, size_t d, const float* kt, size_t ld, __m256 scale, float* s) {
  __m256 acc[NB / 8];
  for (size_t b = 0; b < NB / 8; ++b) acc[b] = _mm256_setzero_ps();
  for (size_t e = 0; e < d; ++e, kt += ld) {
    const __m256 qe = _mm256_broadcast_ss(q + e);
    for (size_t b = 0; b < NB / 8; ++b) acc[b] = _mm256_fmadd_ps(qe, _mm256_loadu_ps(kt + 8 * b), acc[b]);
  }
  for (size_t b = 0; b < NB / 8; ++b) _mm256_storeu_ps(s + 8 * b, _mm256_mul_ps(acc[b], scale));
}

KILN_AVX2 void scores_avx2(const AttentionSlice& a, size_t i, const float* kt, size_t ld, size_t t, float* s) {
  const float* q = a.q + i * a.d;
  const __m256 scale = _mm256_set1_ps(a.scale);
  size_t j = 0;
  for (; j + 64 <= t; j += 64) scores_block<64>(q, a.d, kt + j, ld, scale, s + j);
  for (; j + 32 <= t; j += 32) scores_block<32>(q, a.d, kt + j, ld, scale, s + j);
  for (; j + 8 <= t; j += 8) scores_block<8>(q, a.d, kt + j, ld, scale, s + j);
  if (j < t) {  // the last keys: masked loads (no lane past t is read)
    const __m256i tail = tail_mask(t - j);
    __m256 acc = _mm256_setzero_ps();
    const float* kp = kt + j;
    for (size_t e = 0; e < a.d; ++e, kp += ld)
      acc = _mm256_fmadd_ps(_mm256_broadcast_ss(q + e), _mm256_maskload_ps(kp, tail), acc);
    _mm256_maskstore_ps(s + j, tail, _mm256_mul_ps(acc, scale));
  }
}

// p[j] = exp(s[j] - m) for j < t; returns their sum.
KILN_AVX2 float exp_sum_avx2(float* s, size_t t, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 8 <= t; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (j < t) {
    const __m256i tail = tail_mask(t - j);
    const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(s + j, tail), vm)), _mm256_castsi256_ps(tail));
    _mm256_maskstore_ps(s + j, tail, e);
    acc = _mm256_add_ps(acc, e);
  }
  return hsum(acc);
}

// o[0, 8 NB) = o * corr + sum over j < t of p[j] * v_j[0, 8 NB): NB vectors of output columns,
// keys two at a time into separate accumulators (independent FMA chains), summed at the end.
// NB is a constant so the accumulators stay in registers.
template <size_t NB>
KILN_AVX2 inline void accumulate_block(const float* v0, size_t dv, size_t t, const float* p, __m256 vc, float* o) {
  __m256 x[NB], y[NB];
  for (size_t b = 0; b < NB; ++b) x[b] = _mm256_mul_ps(_mm256_loadu_ps(o + 8 * b), vc), y[b] = _mm256_setzero_ps();
  size_t j = 0;
  for (; j + 2 <= t; j += 2) {
    const __m256 p0 = _mm256_broadcast_ss(p + j), p1 = _mm256_broadcast_ss(p + j + 1);
    const float* r0 = v0 + j * dv;
    for (size_t b = 0; b < NB; ++b) {
      x[b] = _mm256_fmadd_ps(p0, _mm256_loadu_ps(r0 + 8 * b), x[b]);
      y[b] = _mm256_fmadd_ps(p1, _mm256_loadu_ps(r0 + dv + 8 * b), y[b]);
    }
  }
  for (; j < t; ++j)
    for (size_t b = 0; b < NB; ++b) x[b] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_loadu_ps(v0 + j * dv + 8 * b), x[b]);
  for (size_t b = 0; b < NB; ++b) _mm256_storeu_ps(o + 8 * b, _mm256_add_ps(x[b], y[b]));
}

KILN_AVX2 void accumulate_avx2(const AttentionSlice& a, size_t j0, size_t t, const float* p, float corr, float* o) {
  const size_t dv = a.dv, body = dv & ~size_t{7};
  const __m256 vc = _mm256_set1_ps(corr);
  const float* v0 = a.v + j0 * dv;
  size_t e = 0;
  for (; e + 32 <= body; e += 32) accumulate_block<4>(v0 + e, dv, t, p, vc, o + e);
  if (e + 16 <= body) accumulate_block<2>(v0 + e, dv, t, p, vc, o + e), e += 16;
  if (e + 8 <= body) accumulate_block<1>(v0 + e, dv, t, p, vc, o + e), e += 8;
  if (body < dv) {
    const __m256i tail = tail_mask(dv - body);
    __m256 x = _mm256_mul_ps(_mm256_maskload_ps(o + body, tail), vc), y = _mm256_setzero_ps();
    size_t j = 0;
    for (; j + 2 <= t; j += 2) {
      x = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_maskload_ps(v0 + j * dv + body, tail), x);
      y = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j + 1), _mm256_maskload_ps(v0 + (j + 1) * dv + body, tail), y);
    }
    for (; j < t; ++j) x = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), _mm256_maskload_ps(v0 + j * dv + body, tail), x);
    _mm256_maskstore_ps(o + body, tail, _mm256_add_ps(x, y));
  }
}

// Max of s[0, t).
KILN_AVX2 float tile_max_avx2(const float* s, size_t t) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  size_t j = 0;
  for (; j + 8 <= t; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
  if (j < t) {
    const __m256i tail = tail_mask(t - j);
    m = _mm256_max_ps(m, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(s + j, tail), _mm256_castsi256_ps(tail)));
  }
  return hmax(m);
}

struct Avx2Ops {
  static void scores(const AttentionSlice& a, size_t i, const float* kt, size_t ld, size_t t, float* s) {
    scores_avx2(a, i, kt, ld, t, s);
  }
  static float tile_max(const float* s, size_t t) { return tile_max_avx2(s, t); }
  static float exp_sum(float* s, size_t t, float m) { return exp_sum_avx2(s, t, m); }
  static void accumulate(const AttentionSlice& a, size_t j0, size_t t, const float* p, float corr, float* o) {
    accumulate_avx2(a, j0, t, p, corr, o);
  }
};

// ---- AVX-512 F -------------------------------------------------------------------------------
// Four query rows at a time: each K and V load serves four rows' FMAs (one row at a time, the
// loads bound the FMAs one to one: transformer_encoder's attention ran at 49 GFLOP/s).
// (GCC 12 warns inside its own AVX-512 headers when they are inlined: a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define KILN_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

KILN_AVX512 inline __m512 exp512(__m512 v) {
  const __m512 x = _mm512_max_ps(_mm512_set1_ps(kExpLo), _mm512_min_ps(_mm512_set1_ps(kExpHi), v));
  const __m512 fx = _mm512_roundscale_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
                                         _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 y = _mm512_set1_ps(kExpP[0]);
  for (size_t k = 1; k < 6; ++k) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kExpP[k]));
  y = _mm512_fmadd_ps(_mm512_mul_ps(y, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  const __m512i n = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(fx), _mm512_set1_epi32(127)), 23);
  // Below the range exp underflows to 0 (a masked score, exp(-inf), contributes nothing).
  const __mmask16 keep = _mm512_cmp_ps_mask(v, _mm512_set1_ps(kExpLo), _CMP_NLT_UQ);  // NaN kept
  return _mm512_maskz_mul_ps(keep, y, _mm512_castsi512_ps(n));
}

// Lanes [0, n - i) of the 16 from i.
KILN_AVX512 inline __mmask16 lanes512(size_t i, size_t n) {
  return i >= n ? __mmask16(0) : n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
}

// Scores of R query rows from q (rows d apart) against keys [0, t) of the tile, 16 NB keys
// (t <= 16 NB; the lanes past t masked), into s (rows ls apart).
template <size_t R, size_t NB>
KILN_AVX512 void scores_rows512(const float* q, size_t d, const float* kt, size_t ld, size_t t, float scale, float* s,
                                size_t ls) {
  __mmask16 mask[NB];
  __m512 acc[R][NB];
#pragma GCC unroll 4
  for (size_t b = 0; b < NB; ++b) mask[b] = lanes512(16 * b, t);
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_ps();
  for (size_t e = 0; e < d; ++e, kt += ld) {
    __m512 k[NB];
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) k[b] = _mm512_maskz_loadu_ps(mask[b], kt + 16 * b);
#pragma GCC unroll 4
    for (size_t r = 0; r < R; ++r) {
      const __m512 qe = _mm512_set1_ps(q[r * d + e]);
#pragma GCC unroll 4
      for (size_t b = 0; b < NB; ++b) acc[r][b] = _mm512_fmadd_ps(qe, k[b], acc[r][b]);
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) _mm512_mask_storeu_ps(s + r * ls + 16 * b, mask[b], _mm512_mul_ps(acc[r][b], vs));
}

// o_r[e0, e0 + 16 NB) = o_r * corr[r] + sum over j < t of p[r * ls + j] * v_j (columns past dv
// masked), for R rows.
template <size_t R, size_t NB>
KILN_AVX512 void accumulate_rows512(const float* v0, size_t dv, size_t e0, size_t t, const float* p, size_t ls,
                                    const float* corr, float* const* o) {
  __mmask16 mask[NB];
  __m512 x[R][NB];
#pragma GCC unroll 4
  for (size_t b = 0; b < NB; ++b) mask[b] = lanes512(e0 + 16 * b, dv);
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b)
      x[r][b] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask[b], o[r] + e0 + 16 * b), _mm512_set1_ps(corr[r]));
  const float* vr = v0 + e0;
  for (size_t j = 0; j < t; ++j, vr += dv) {
    __m512 w[NB];
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) w[b] = _mm512_maskz_loadu_ps(mask[b], vr + 16 * b);
#pragma GCC unroll 4
    for (size_t r = 0; r < R; ++r) {
      const __m512 pj = _mm512_set1_ps(p[r * ls + j]);
#pragma GCC unroll 4
      for (size_t b = 0; b < NB; ++b) x[r][b] = _mm512_fmadd_ps(pj, w[b], x[r][b]);
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) _mm512_mask_storeu_ps(o[r] + e0 + 16 * b, mask[b], x[r][b]);
}

template <size_t R>
KILN_AVX512 void scores_r512(const float* q, size_t d, const float* kt, size_t ld, size_t t, float scale, float* s,
                             size_t ls) {
  switch ((t + 15) / 16) {
    case 1: return scores_rows512<R, 1>(q, d, kt, ld, t, scale, s, ls);
    case 2: return scores_rows512<R, 2>(q, d, kt, ld, t, scale, s, ls);
    case 3: return scores_rows512<R, 3>(q, d, kt, ld, t, scale, s, ls);
    default: return scores_rows512<R, 4>(q, d, kt, ld, t, scale, s, ls);
  }
}

template <size_t R>
KILN_AVX512 void accumulate_r512(const float* v0, size_t dv, size_t t, const float* p, size_t ls, const float* corr,
                                 float* const* o) {
  for (size_t e = 0; e < dv; e += 64) {
    switch (std::min<size_t>(4, (dv - e + 15) / 16)) {
      case 1: accumulate_rows512<R, 1>(v0, dv, e, t, p, ls, corr, o); break;
      case 2: accumulate_rows512<R, 2>(v0, dv, e, t, p, ls, corr, o); break;
      case 3: accumulate_rows512<R, 3>(v0, dv, e, t, p, ls, corr, o); break;
      default: accumulate_rows512<R, 4>(v0, dv, e, t, p, ls, corr, o); break;
    }
  }
}

struct Avx512Ops {
  static constexpr size_t kGroup = 4;
  // Scores of rows [i, i + n) (n <= kGroup) into s (rows kAttentionTile apart).
  static void scores_group(const AttentionSlice& a, size_t i, size_t n, const float* kt, size_t ld, size_t t,
                           float* s) {
    const float* q = a.q + i * a.d;
    switch (n) {
      case 1: return scores_r512<1>(q, a.d, kt, ld, t, a.scale, s, kAttentionTile);
      case 2: return scores_r512<2>(q, a.d, kt, ld, t, a.scale, s, kAttentionTile);
      case 3: return scores_r512<3>(q, a.d, kt, ld, t, a.scale, s, kAttentionTile);
      default: return scores_r512<4>(q, a.d, kt, ld, t, a.scale, s, kAttentionTile);
    }
  }
  // Max of s[0, t); a NaN score is passed over (it reaches exp and the sum, making the row NaN).
  KILN_AVX512 static float tile_max(const float* s, size_t t) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (size_t j = 0; j < t; j += 16) m = _mm512_max_ps(_mm512_mask_loadu_ps(m, lanes512(j, t), s + j), m);
    return _mm512_reduce_max_ps(m);
  }
  KILN_AVX512 static float exp_sum(float* s, size_t t, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 acc = _mm512_setzero_ps();
    for (size_t j = 0; j < t; j += 16) {
      const __mmask16 k = lanes512(j, t);
      const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vm));
      _mm512_mask_storeu_ps(s + j, k, e);
      acc = _mm512_mask_add_ps(acc, k, acc, e);
    }
    return _mm512_reduce_add_ps(acc);
  }
  // Output rows o[0, n) updated with the probabilities p (rows kAttentionTile apart).
  static void accumulate_group(const AttentionSlice& a, size_t j0, size_t t, const float* p, size_t n,
                               const float* corr, float* const* o) {
    const float* v0 = a.v + j0 * a.dv;
    switch (n) {
      case 1: return accumulate_r512<1>(v0, a.dv, t, p, kAttentionTile, corr, o);
      case 2: return accumulate_r512<2>(v0, a.dv, t, p, kAttentionTile, corr, o);
      case 3: return accumulate_r512<3>(v0, a.dv, t, p, kAttentionTile, corr, o);
      default: return accumulate_r512<4>(v0, a.dv, t, p, kAttentionTile, corr, o);
    }
  }
};
#undef KILN_AVX512
#pragma GCC diagnostic pop

#endif  // __x86_64__

#if defined(__aarch64__)
// ---- arm64 NEON (with FMA) -------------------------------------------------------------------

struct NeonOps {
  // Keys in blocks of 16 (four accumulators over d), then 4, then one.
  static void scores(const AttentionSlice& a, size_t i, const float* kt, size_t ld, size_t t, float* s) {
    const float* q = a.q + i * a.d;
    size_t j = 0;
    for (; j + 16 <= t; j += 16) {
      float32x4_t c0 = vdupq_n_f32(0.f), c1 = c0, c2 = c0, c3 = c0;
      const float* kp = kt + j;
      for (size_t e = 0; e < a.d; ++e, kp += ld) {
        c0 = vfmaq_n_f32(c0, vld1q_f32(kp), q[e]);
        c1 = vfmaq_n_f32(c1, vld1q_f32(kp + 4), q[e]);
        c2 = vfmaq_n_f32(c2, vld1q_f32(kp + 8), q[e]);
        c3 = vfmaq_n_f32(c3, vld1q_f32(kp + 12), q[e]);
      }
      vst1q_f32(s + j, vmulq_n_f32(c0, a.scale));
      vst1q_f32(s + j + 4, vmulq_n_f32(c1, a.scale));
      vst1q_f32(s + j + 8, vmulq_n_f32(c2, a.scale));
      vst1q_f32(s + j + 12, vmulq_n_f32(c3, a.scale));
    }
    for (; j + 4 <= t; j += 4) {
      float32x4_t c = vdupq_n_f32(0.f);
      const float* kp = kt + j;
      for (size_t e = 0; e < a.d; ++e, kp += ld) c = vfmaq_n_f32(c, vld1q_f32(kp), q[e]);
      vst1q_f32(s + j, vmulq_n_f32(c, a.scale));
    }
    for (; j < t; ++j) {
      float c = 0.f;
      for (size_t e = 0; e < a.d; ++e) c += q[e] * kt[e * ld + j];
      s[j] = c * a.scale;
    }
  }
  // maxNum (vmaxnmq): a NaN score is passed over here, as the plain row's std::max does, so it
  // reaches exp and the sum and makes the row NaN (never a skipped tile).
  static float tile_max(const float* s, size_t t) {
    float32x4_t m4 = vdupq_n_f32(-INFINITY);
    size_t j = 0;
    for (; j + 4 <= t; j += 4) m4 = vmaxnmq_f32(m4, vld1q_f32(s + j));
    float m = vmaxnmvq_f32(m4);
    for (; j < t; ++j) m = std::max(m, s[j]);
    return m;
  }
  static float exp_sum(float* s, size_t t, float m) {
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t acc = vdupq_n_f32(0.f);
    size_t j = 0;
    for (; j + 4 <= t; j += 4) {
      const float32x4_t e = exp4(vsubq_f32(vld1q_f32(s + j), vm));
      vst1q_f32(s + j, e);
      acc = vaddq_f32(acc, e);
    }
    float sum = vaddvq_f32(acc);
    for (; j < t; ++j) sum += (s[j] = exp_scalar(s[j] - m));
    return sum;
  }
  // Output columns in blocks of 16, then 4, then one.
  static void accumulate(const AttentionSlice& a, size_t j0, size_t t, const float* p, float corr, float* o) {
    const size_t dv = a.dv;
    const float* v0 = a.v + j0 * dv;
    size_t e = 0;
    for (; e + 16 <= dv; e += 16) {
      float32x4_t x0 = vmulq_n_f32(vld1q_f32(o + e), corr), x1 = vmulq_n_f32(vld1q_f32(o + e + 4), corr),
                  x2 = vmulq_n_f32(vld1q_f32(o + e + 8), corr), x3 = vmulq_n_f32(vld1q_f32(o + e + 12), corr);
      for (size_t j = 0; j < t; ++j) {
        const float* vr = v0 + j * dv + e;
        x0 = vfmaq_n_f32(x0, vld1q_f32(vr), p[j]);
        x1 = vfmaq_n_f32(x1, vld1q_f32(vr + 4), p[j]);
        x2 = vfmaq_n_f32(x2, vld1q_f32(vr + 8), p[j]);
        x3 = vfmaq_n_f32(x3, vld1q_f32(vr + 12), p[j]);
      }
      vst1q_f32(o + e, x0);
      vst1q_f32(o + e + 4, x1);
      vst1q_f32(o + e + 8, x2);
      vst1q_f32(o + e + 12, x3);
    }
    for (; e + 4 <= dv; e += 4) {
      float32x4_t x = vmulq_n_f32(vld1q_f32(o + e), corr);
      for (size_t j = 0; j < t; ++j) x = vfmaq_n_f32(x, vld1q_f32(v0 + j * dv + e), p[j]);
      vst1q_f32(o + e, x);
    }
    for (; e < dv; ++e) {
      float acc = o[e] * corr;
      for (size_t j = 0; j < t; ++j) acc += p[j] * v0[j * dv + e];
      o[e] = acc;
    }
  }
};

#endif  // __aarch64__

// Query rows are taken in blocks of kRowBlock, key tiles in the outer loop, so a tile of K
// (transposed into `kt` when K is stored by rows) is read once per block; each row keeps its
// running max m, sum l and output row (rescaled as tiles come).
constexpr size_t kRowBlock = 16;
constexpr size_t kMaxTileD = 128;  // K stored by rows with a larger D is read key by key

// The one-row ops (plain, AVX2, NEON) in the group contract, a group being one row.
template <typename Ops>
struct OneRow : Ops {
  static constexpr size_t kGroup = 1;
  static void scores_group(const AttentionSlice& a, size_t i, size_t, const float* kt, size_t ld, size_t t, float* s) {
    Ops::scores(a, i, kt, ld, t, s);
  }
  static void accumulate_group(const AttentionSlice& a, size_t j0, size_t t, const float* p, size_t,
                               const float* corr, float* const* o) {
    Ops::accumulate(a, j0, t, p, corr[0], o[0]);
  }
};

template <typename Ops>
void rows(const AttentionSlice& a, size_t row_begin, size_t row_end) {
  constexpr size_t G = Ops::kGroup;  // query rows whose scores and updates run together
  float s[G][kAttentionTile];
  float m[kRowBlock], l[kRowBlock];
  static thread_local float kt_buf[kMaxTileD * kAttentionTile];  // one per thread, 32 KiB, no heap in execute
  for (size_t r0 = row_begin; r0 < row_end; r0 += kRowBlock) {
    const size_t rn = std::min(kRowBlock, row_end - r0);
    for (size_t r = 0; r < rn; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.f;
      std::memset(a.out + (r0 + r) * a.dv, 0, a.dv * sizeof(float));
    }
    for (size_t j0 = 0; j0 < a.lk; j0 += kAttentionTile) {
      const size_t t = std::min(kAttentionTile, a.lk - j0);
      const float* kt = a.k + j0;  // K^T rows, `ld` apart
      size_t ld = a.lk;
      if (!a.k_transposed) {
        if (a.d <= kMaxTileD) {
          for (size_t j = 0; j < t; ++j)
            for (size_t e = 0; e < a.d; ++e) kt_buf[e * kAttentionTile + j] = a.k[(j0 + j) * a.d + e];
          kt = kt_buf;
          ld = kAttentionTile;
        }
      }
      for (size_t g0 = 0; g0 < rn; g0 += G) {
        const size_t gn = std::min(G, rn - g0);
        if (a.k_transposed || a.d <= kMaxTileD) {
          Ops::scores_group(a, r0 + g0, gn, kt, ld, t, s[0]);
        } else {
          for (size_t r = 0; r < gn; ++r)
            for (size_t j = 0; j < t; ++j) {
              float acc = 0.f;
              const size_t i = r0 + g0 + r;
              for (size_t e = 0; e < a.d; ++e) acc += a.q[i * a.d + e] * a.k[(j0 + j) * a.d + e];
              s[r][j] = acc * a.scale;
            }
        }
        float corr[G];
        float* out[G];
        bool live[G];
        size_t n_live = 0;
        for (size_t r = 0; r < gn; ++r) {
          const size_t i = r0 + g0 + r, k = g0 + r;
          post_ops(a, i, j0, t, s[r]);
          const float m_new = std::max(m[k], Ops::tile_max(s[r], t));
          out[r] = a.out + i * a.dv;
          live[r] = m_new != -INFINITY;  // every score so far -inf: nothing to add yet
          if (!live[r]) continue;
          corr[r] = m[k] == -INFINITY ? 0.f : exp_scalar(m[k] - m_new);
          l[k] = l[k] * corr[r] + Ops::exp_sum(s[r], t, m_new);
          m[k] = m_new;
          ++n_live;
        }
        if (n_live == gn) {
          Ops::accumulate_group(a, j0, t, s[0], gn, corr, out);
        } else {
          for (size_t r = 0; r < gn; ++r)
            if (live[r]) Ops::accumulate_group(a, j0, t, s[r], 1, corr + r, out + r);
        }
      }
    }
    for (size_t r = 0; r < rn; ++r) {
      const float inv = a.lk == 0 ? 0.f : m[r] == -INFINITY ? NAN : 1.f / l[r];  // all -inf: NaN, as Softmax
      float* o = a.out + (r0 + r) * a.dv;
      for (size_t e = 0; e < a.dv; ++e) o[e] *= inv;
    }
  }
}

// ---- the table (isa.h) -----------------------------------------------------------------------

struct Impl {
  const char* name;
  bool (*available)();
  void (*rows)(const AttentionSlice&, size_t, size_t);
};

// Best first; the last runs anywhere.
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx512", cpu_has_avx512f, rows<Avx512Ops>},
    {"avx2", cpu_has_avx2, rows<OneRow<Avx2Ops>>},
#endif
#if defined(__aarch64__)
    {"neon", [] { return true; }, rows<OneRow<NeonOps>>},
#endif
    {"plain", [] { return true; }, rows<OneRow<PlainOps>>}};

}  // namespace

void attention_rows(const AttentionSlice& a, size_t row_begin, size_t row_end) {
  if (a.dv == 0) return;
  static const Impl* impl = pick_isa(kImpls);
  // Fewer query rows than a group (a decode step's one) run the AVX2 row: nothing to share,
  // and the 512-bit warm-up of a short burst cost gpt_kv_step 1.12x at 2 threads.
  static const Impl* narrow = find_isa(kImpls, "avx2");
  const bool few = row_end - row_begin < 4 && std::string(impl->name) == "avx512" && narrow && narrow->available();
  (few ? narrow : impl)->rows(a, row_begin, row_end);
}

}  // namespace kiln::simd
