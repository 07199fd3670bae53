#include "kernels/simd/vmath.h"

#include "kernels/simd/avx2_math.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/neon_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace kiln::simd {

namespace {

using namespace detail;  // NOLINT: the building blocks of this file

float gate_scalar(float v, bool hard, float alpha, float beta) {
  return v * (hard ? clamp_nan(alpha * v + beta, 0.f, 1.f) : sigmoid_scalar(v));
}

void layer_norm_row_scalar(const float* x, float* y, size_t n, const float* gamma, const float* beta, float eps) {
  float sum = 0.f, sq = 0.f;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  for (size_t i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const float rstd = 1.f / std::sqrt(sq / static_cast<float>(n) + eps);
  for (size_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + (beta ? beta[i] : 0.f);
}

// GELU: x/2 (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3)) for erf.
constexpr float kRsqrt2 = 0.70710678118654752f, kTanhGeluA = 0.7978845608028654f, kTanhGeluB = 0.044715f;

float gelu_scalar(float x, bool tanh_form) {
  const float inner = tanh_form ? tanh_scalar(kTanhGeluA * (x + kTanhGeluB * x * x * x)) : erf_scalar(x * kRsqrt2);
  return 0.5f * x * (1.f + inner);
}

// The sum in 8 interleaved partial sums, as the vector code adds them (a sequential f32 sum of
// a long row drifts by ~1e-6).
void softmax_row_scalar(const float* x, float* y, size_t n) {
  float m = -INFINITY, part[8] = {};
  for (size_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  for (size_t i = 0; i < n; ++i) part[i % 8] += (y[i] = m == -INFINITY ? NAN : exp_scalar(x[i] - m));
  const float sum = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
  for (size_t i = 0; i < n; ++i) y[i] *= 1.f / sum;
}

// One hidden unit of gru_row: z, r from their sums, the candidate c = tanh(xh + r.ah), and
// h = (1 - z).c + z.h written as c + z.(h - c).
inline float gru_unit(float xz, float az, float xr, float ar, float xh, float ah, float h) {
  const float z = sigmoid_scalar(xz + az), r = sigmoid_scalar(xr + ar), c = tanh_scalar(xh + r * ah);
  return c + z * (h - c);
}

void gru_row_plain(const float* x, const float* a, float* h, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = h[i] = gru_unit(x[i], a[i], x[n + i], a[n + i], x[2 * n + i], a[2 * n + i], h[i]);
}

#if defined(__x86_64__)
// ---- AVX2 + FMA ------------------------------------------------------------------------------

// y[i] = f(x[i]) with f256 on blocks of 8 and f1 on the tail.
template <typename F256, typename F1>
KILN_AVX2 inline void map_avx2(const float* x, float* y, size_t n, F256 f256, F1 f1) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f256(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = f1(x[i]);
}

KILN_AVX2 void erf_avx2(const float* x, float* y, size_t n) { map_avx2(x, y, n, erf256, erf_scalar); }
KILN_AVX2 void tanh_avx2(const float* x, float* y, size_t n) { map_avx2(x, y, n, tanh256, tanh_scalar); }
KILN_AVX2 void sigmoid_avx2(const float* x, float* y, size_t n) { map_avx2(x, y, n, sigmoid256, sigmoid_scalar); }

KILN_AVX2 void gate_avx2(const float* x, float* y, size_t n, bool hard, float alpha, float beta) {
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), zero = _mm256_setzero_ps(),
               one = _mm256_set1_ps(1.f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 g = hard ? _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_fmadd_ps(va, v, vb))) : sigmoid256(v);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, g));
  }
  for (; i < n; ++i) y[i] = gate_scalar(x[i], hard, alpha, beta);
}

KILN_AVX2 void softmax_row_avx2(const float* x, float* y, size_t n) {
  const size_t body = n & ~size_t{7}, rem = n - body;
  const __m256i tail = tail_mask(rem);
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  __m256 vm = ninf;
  for (size_t i = 0; i < body; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
  if (rem) vm = _mm256_max_ps(vm, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + body, tail), _mm256_castsi256_ps(tail)));
  const float m = hmax(vm);
  if (m == -INFINITY) {
    for (size_t i = 0; i < n; ++i) y[i] = NAN;
    return;
  }
  const __m256 vmax = _mm256_set1_ps(m);
  __m256 vs = _mm256_setzero_ps();
  for (size_t i = 0; i < body; i += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(y + i, e);
    vs = _mm256_add_ps(vs, e);
  }
  __m256 et = _mm256_setzero_ps();
  if (rem) {
    et = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(x + body, tail), vmax)), _mm256_castsi256_ps(tail));
    vs = _mm256_add_ps(vs, et);
  }
  const __m256 inv = _mm256_set1_ps(1.f / hsum(vs));
  for (size_t i = 0; i < body; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  if (rem) _mm256_maskstore_ps(y + body, tail, _mm256_mul_ps(et, inv));
}

// LayerNorm of one row: two passes for the moments (as the decomposed graph computes them:
// mean, then the mean of squared deviations), one to write.
KILN_AVX2 void layer_norm_row_avx2(const float* x, float* y, size_t n, const float* gamma, const float* beta, float eps) {
  const size_t body = n & ~size_t{7}, rem = n - body;
  const __m256i tail = tail_mask(rem);
  __m256 vs = _mm256_setzero_ps();
  for (size_t i = 0; i < body; i += 8) vs = _mm256_add_ps(vs, _mm256_loadu_ps(x + i));
  if (rem) vs = _mm256_add_ps(vs, _mm256_maskload_ps(x + body, tail));
  const __m256 mean = _mm256_set1_ps(hsum(vs) / static_cast<float>(n));
  __m256 vq = _mm256_setzero_ps();
  for (size_t i = 0; i < body; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), mean);
    vq = _mm256_fmadd_ps(d, d, vq);
  }
  if (rem) {
    const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + body, tail), mean), _mm256_castsi256_ps(tail));
    vq = _mm256_fmadd_ps(d, d, vq);
  }
  const __m256 rstd = _mm256_set1_ps(1.f / std::sqrt(hsum(vq) / static_cast<float>(n) + eps));
  for (size_t i = 0; i < body; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mean), rstd);
    const __m256 b = beta ? _mm256_loadu_ps(beta + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(v, _mm256_loadu_ps(gamma + i), b));
  }
  if (rem) {
    const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + body, tail), mean), rstd);
    const __m256 b = beta ? _mm256_maskload_ps(beta + body, tail) : _mm256_setzero_ps();
    _mm256_maskstore_ps(y + body, tail, _mm256_fmadd_ps(v, _mm256_maskload_ps(gamma + body, tail), b));
  }
}

KILN_AVX2 void gelu_avx2(const float* x, float* y, size_t n, bool tanh_form) {
  const __m256 half = _mm256_set1_ps(0.5f), a = _mm256_set1_ps(kTanhGeluA), b = _mm256_set1_ps(kTanhGeluB),
               r2 = _mm256_set1_ps(kRsqrt2);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 inner;
    if (tanh_form) {
      const __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
      inner = tanh256(_mm256_mul_ps(a, _mm256_fmadd_ps(b, v3, v)));
    } else {
      inner = erf256(_mm256_mul_ps(v, r2));
    }
    const __m256 hv = _mm256_mul_ps(half, v);
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(hv, inner, hv));
  }
  for (; i < n; ++i) y[i] = gelu_scalar(x[i], tanh_form);
}

// R vectors (R <= 4) times columns [j, j + 8 NB) of the matrix: 4 x 3 accumulators, 3 weight
// vectors and a broadcast fit the 16 ymm registers; each weight load serves R vectors.
template <size_t R, size_t NB>
KILN_AVX2 inline void vecmat_block(const float* mt, size_t ld, size_t cols, const float* v, size_t ldv,
                                   const float* init, size_t ldi, float* out, size_t ldo, size_t j) {
  __m256 acc[R][NB];
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) acc[r][b] = _mm256_loadu_ps(init + r * ldi + j + 8 * b);
  const float* m = mt + j;
  for (size_t k = 0; k < cols; ++k, m += ld) {
    __m256 w[NB];
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) w[b] = _mm256_loadu_ps(m + 8 * b);
#pragma GCC unroll 4
    for (size_t r = 0; r < R; ++r) {
      const __m256 vk = _mm256_broadcast_ss(v + r * ldv + k);
#pragma GCC unroll 4
      for (size_t b = 0; b < NB; ++b) acc[r][b] = _mm256_fmadd_ps(vk, w[b], acc[r][b]);
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) _mm256_storeu_ps(out + r * ldo + j + 8 * b, acc[r][b]);
}

// Columns in blocks of 24, then 8, then one at a time, for R vectors at once.
template <size_t R>
KILN_AVX2 void vecmat_rows_avx2(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv,
                                const float* init, size_t ldi, float* out, size_t ldo) {
  size_t j = 0;
  for (; j + 24 <= rows; j += 24) vecmat_block<R, 3>(mt, ld, cols, v, ldv, init, ldi, out, ldo, j);
  for (; j + 8 <= rows; j += 8) vecmat_block<R, 1>(mt, ld, cols, v, ldv, init, ldi, out, ldo, j);
  for (; j < rows; ++j)
    for (size_t r = 0; r < R; ++r) {
      float a = init[r * ldi + j];
      for (size_t k = 0; k < cols; ++k) a += v[r * ldv + k] * mt[k * ld + j];
      out[r * ldo + j] = a;
    }
}

KILN_AVX2 void vecmat_avx2(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv,
                           const float* init, size_t ldi, float* out, size_t ldo, size_t nv) {
  size_t r = 0;
  for (; r + 4 <= nv; r += 4) vecmat_rows_avx2<4>(mt, ld, rows, cols, v + r * ldv, ldv, init + r * ldi, ldi, out + r * ldo, ldo);
  const float* vr = v + r * ldv;
  const float* irow = init + r * ldi;
  float* orow = out + r * ldo;
  if (nv - r == 3) vecmat_rows_avx2<3>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
  if (nv - r == 2) vecmat_rows_avx2<2>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
  if (nv - r == 1) vecmat_rows_avx2<1>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
}

KILN_AVX2 void gru_row_avx2(const float* x, const float* a, float* h, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 z = sigmoid256(_mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(a + i)));
    const __m256 r = sigmoid256(_mm256_add_ps(_mm256_loadu_ps(x + n + i), _mm256_loadu_ps(a + n + i)));
    const __m256 c = tanh256(_mm256_fmadd_ps(r, _mm256_loadu_ps(a + 2 * n + i), _mm256_loadu_ps(x + 2 * n + i)));
    const __m256 hn = _mm256_fmadd_ps(z, _mm256_sub_ps(_mm256_loadu_ps(h + i), c), c);
    _mm256_storeu_ps(h + i, hn);
    _mm256_storeu_ps(y + i, hn);
  }
  for (; i < n; ++i) y[i] = h[i] = gru_unit(x[i], a[i], x[n + i], a[n + i], x[2 * n + i], a[2 * n + i], h[i]);
}

// ---- AVX-512 F ----------------------------------------------------------------------------
// tanh, sigmoid, the gates and vecmat 16 lanes wide; the quotient p/q from rcp14(q) and one residual
// correction, not a division: the division unit passes no more floats per cycle at 512 bits than
// at 256 (efficientnet_b0 at 4x3x320x320 spent 17% of its time in the AVX2 gate). The rest of
// the row is the AVX2 functions.
// (GCC 12 warns inside its own AVX-512 headers when they are inlined: a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define KILN_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

KILN_AVX512 inline __m512 tanh512(__m512 v) {
  const __m512 t = _mm512_max_ps(_mm512_set1_ps(-kTanhClamp), _mm512_min_ps(_mm512_set1_ps(kTanhClamp), v));
  const __m512 t2 = _mm512_mul_ps(t, t);
  __m512 p = _mm512_set1_ps(kTanhP[0]), q = _mm512_set1_ps(kTanhQ[0]);
  for (size_t k = 1; k < 7; ++k) p = _mm512_fmadd_ps(p, t2, _mm512_set1_ps(kTanhP[k]));
  for (size_t k = 1; k < 4; ++k) q = _mm512_fmadd_ps(q, t2, _mm512_set1_ps(kTanhQ[k]));
  // n / q: the estimate n * rcp14(q), then one correction with its residual n - y0 q (fused):
  // within a rounding of the quotient. q >= 4.9e-3 on the clamped range (never 0 or denormal).
  const __m512 n = _mm512_mul_ps(t, p), r = _mm512_rcp14_ps(q), y0 = _mm512_mul_ps(n, r);
  const __m512 y = _mm512_fmadd_ps(_mm512_fnmadd_ps(y0, q, n), r, y0);
  // At and beyond the clamp the rational is 1 - 2.4e-7 evaluated with FMA: there tanh is +-1
  // in f32, as the scalar twin gives it (and sigmoid(+-big) exactly 1 and 0).
  const __mmask16 sat = _mm512_cmp_ps_mask(_mm512_abs_ps(t), _mm512_set1_ps(kTanhClamp), _CMP_EQ_OQ);
  return _mm512_mask_blend_ps(sat, y, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_LT_OQ),
                                                            _mm512_set1_ps(1.f), _mm512_set1_ps(-1.f)));
}

KILN_AVX512 inline __m512 sigmoid512(__m512 v) {
  const __m512 half = _mm512_set1_ps(0.5f);
  return _mm512_fmadd_ps(half, tanh512(_mm512_mul_ps(half, v)), half);
}

// The lanes [0, n - i) of a block of 16 from i: the tail runs masked in the same vector code.
KILN_AVX512 inline __mmask16 lanes_from(size_t i, size_t n) {
  return n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
}

// Below this many elements (or matrix elements, vecmat: whatever the number of vectors, so
// every nv gives the same bits) the AVX-512 row runs its AVX2 functions: a model whose only
// 512-bit work is a few tiny calls (gru_seq at 1x1x16: one GRU step of 32 units) paid the
// cores' 512-bit warm-up, 6.4 -> 8.9 us per run on Intel.
constexpr size_t kMin512 = 256, kMin512Matrix = size_t{1} << 13;

KILN_AVX512 void tanh_avx512(const float* x, float* y, size_t n) {
  if (n < kMin512) return tanh_avx2(x, y, n);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_from(i, n);
    _mm512_mask_storeu_ps(y + i, m, tanh512(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

KILN_AVX512 void sigmoid_avx512(const float* x, float* y, size_t n) {
  if (n < kMin512) return sigmoid_avx2(x, y, n);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_from(i, n);
    _mm512_mask_storeu_ps(y + i, m, sigmoid512(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

KILN_AVX512 void gate_avx512(const float* x, float* y, size_t n, bool hard, float alpha, float beta) {
  if (n < kMin512) return gate_avx2(x, y, n, hard, alpha, beta);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta), zero = _mm512_setzero_ps(),
               one = _mm512_set1_ps(1.f);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_from(i, n);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 g = hard ? _mm512_min_ps(one, _mm512_max_ps(zero, _mm512_fmadd_ps(va, v, vb))) : sigmoid512(v);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, g));
  }
}

// R vectors (R <= 8) times columns [j, j + 16 NB) of the matrix (lanes past `rows` masked
// off): up to 8 x 3 accumulators, 3 weight vectors and a broadcast of the 32 zmm registers. A
// GRU step at H = 128 and batch 4 (two 384-column passes) spent 59% of conv_gru_long in the
// AVX2 block. Blocks of 8 vectors (the input projections of a whole sequence) halve the weight
// loads per FMA.
template <size_t R, size_t NB>
KILN_AVX512 inline void vecmat_block512(const float* mt, size_t ld, size_t rows, size_t cols, const float* v,
                                        size_t ldv, const float* init, size_t ldi, float* out, size_t ldo, size_t j) {
  __mmask16 mask[NB];
  __m512 acc[R][NB];
#pragma GCC unroll 4
  for (size_t b = 0; b < NB; ++b) mask[b] = j + 16 * b < rows ? lanes_from(j + 16 * b, rows) : __mmask16(0);
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) acc[r][b] = _mm512_maskz_loadu_ps(mask[b], init + r * ldi + j + 16 * b);
  const float* m = mt + j;
  for (size_t k = 0; k < cols; ++k, m += ld) {
    __m512 w[NB];
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) w[b] = _mm512_maskz_loadu_ps(mask[b], m + 16 * b);
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) {
      const __m512 vk = _mm512_set1_ps(v[r * ldv + k]);
#pragma GCC unroll 4
      for (size_t b = 0; b < NB; ++b) acc[r][b] = _mm512_fmadd_ps(vk, w[b], acc[r][b]);
    }
  }
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (size_t b = 0; b < NB; ++b) _mm512_mask_storeu_ps(out + r * ldo + j + 16 * b, mask[b], acc[r][b]);
}

// Columns in blocks of 48, then 16 (the last one masked), for R vectors at once.
template <size_t R>
KILN_AVX512 void vecmat_rows_avx512(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv,
                                    const float* init, size_t ldi, float* out, size_t ldo) {
  size_t j = 0;
  for (; j + 48 <= rows; j += 48) vecmat_block512<R, 3>(mt, ld, rows, cols, v, ldv, init, ldi, out, ldo, j);
  for (; j < rows; j += 16) vecmat_block512<R, 1>(mt, ld, rows, cols, v, ldv, init, ldi, out, ldo, j);
}

KILN_AVX512 void vecmat_avx512(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv,
                               const float* init, size_t ldi, float* out, size_t ldo, size_t nv) {
  if (rows * cols < kMin512Matrix) return vecmat_avx2(mt, ld, rows, cols, v, ldv, init, ldi, out, ldo, nv);
  size_t r = 0;
  for (; r + 8 <= nv; r += 8)
    vecmat_rows_avx512<8>(mt, ld, rows, cols, v + r * ldv, ldv, init + r * ldi, ldi, out + r * ldo, ldo);
  for (; r + 4 <= nv; r += 4)
    vecmat_rows_avx512<4>(mt, ld, rows, cols, v + r * ldv, ldv, init + r * ldi, ldi, out + r * ldo, ldo);
  const float* vr = v + r * ldv;
  const float* irow = init + r * ldi;
  float* orow = out + r * ldo;
  if (nv - r == 3) vecmat_rows_avx512<3>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
  if (nv - r == 2) vecmat_rows_avx512<2>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
  if (nv - r == 1) vecmat_rows_avx512<1>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
}
// The three gates of n units: 3n elements decide the 512-bit row, as for tanh.
KILN_AVX512 void gru_row_avx512(const float* x, const float* a, float* h, float* y, size_t n) {
  if (3 * n < kMin512) return gru_row_avx2(x, a, h, y, n);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = lanes_from(i, n);
    const __m512 z = sigmoid512(_mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, a + i)));
    const __m512 r =
        sigmoid512(_mm512_add_ps(_mm512_maskz_loadu_ps(m, x + n + i), _mm512_maskz_loadu_ps(m, a + n + i)));
    const __m512 c = tanh512(
        _mm512_fmadd_ps(r, _mm512_maskz_loadu_ps(m, a + 2 * n + i), _mm512_maskz_loadu_ps(m, x + 2 * n + i)));
    const __m512 hn = _mm512_fmadd_ps(z, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, h + i), c), c);
    _mm512_mask_storeu_ps(h + i, m, hn);
    _mm512_mask_storeu_ps(y + i, m, hn);
  }
}

#undef KILN_AVX512
#pragma GCC diagnostic pop

#endif  // __x86_64__

#if defined(__aarch64__)
// ---- arm64 NEON (with FMA: every arm64 CPU) ---------------------------------------------------

// y[i] = f(x[i]) with f4 on blocks of 4 and f1 on the tail.
template <typename F4, typename F1>
inline void map_neon(const float* x, float* y, size_t n, F4 f4, F1 f1) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f4(vld1q_f32(x + i)));
  for (; i < n; ++i) y[i] = f1(x[i]);
}

void erf_neon(const float* x, float* y, size_t n) { map_neon(x, y, n, erf4, erf_scalar); }
void tanh_neon(const float* x, float* y, size_t n) { map_neon(x, y, n, tanh4, tanh_scalar); }
void sigmoid_neon(const float* x, float* y, size_t n) { map_neon(x, y, n, sigmoid4, sigmoid_scalar); }

void gate_neon(const float* x, float* y, size_t n, bool hard, float alpha, float beta) {
  const float32x4_t va = vdupq_n_f32(alpha), vb = vdupq_n_f32(beta);
  map_neon(x, y, n,
           [&](float32x4_t v) {
             return vmulq_f32(v, hard ? vminq_f32(vdupq_n_f32(1.f), vmaxq_f32(vdupq_n_f32(0.f), vfmaq_f32(vb, va, v)))
                                      : sigmoid4(v));
           },
           [&](float v) { return gate_scalar(v, hard, alpha, beta); });
}

void gelu_neon(const float* x, float* y, size_t n, bool tanh_form) {
  const float32x4_t half = vdupq_n_f32(0.5f);
  map_neon(x, y, n,
           [&](float32x4_t v) {
             const float32x4_t inner =
                 tanh_form ? tanh4(vmulq_f32(vdupq_n_f32(kTanhGeluA),
                                             vfmaq_f32(v, vdupq_n_f32(kTanhGeluB), vmulq_f32(vmulq_f32(v, v), v))))
                           : erf4(vmulq_f32(v, vdupq_n_f32(kRsqrt2)));
             const float32x4_t hv = vmulq_f32(half, v);
             return vfmaq_f32(hv, hv, inner);
           },
           [&](float v) { return gelu_scalar(v, tanh_form); });
}

// The sum in 8 interleaved partial sums (two vectors of 4), as the plain row and AVX2 add them.
void softmax_row_neon(const float* x, float* y, size_t n) {
  const size_t body = n & ~size_t{7};
  float32x4_t m4 = vdupq_n_f32(-INFINITY);
  for (size_t i = 0; i < body; i += 4) m4 = vmaxq_f32(m4, vld1q_f32(x + i));
  float m = vmaxvq_f32(m4);
  for (size_t i = body; i < n; ++i) m = std::max(m, x[i]);
  if (!(m > -INFINITY)) {  // every entry -inf (or a NaN): NaN, as the portable Softmax
    for (size_t i = 0; i < n; ++i) y[i] = NAN;
    return;
  }
  const float32x4_t vm = vdupq_n_f32(m);
  float32x4_t s0 = vdupq_n_f32(0.f), s1 = vdupq_n_f32(0.f);
  for (size_t i = 0; i < body; i += 8) {
    const float32x4_t e0 = exp4(vsubq_f32(vld1q_f32(x + i), vm)), e1 = exp4(vsubq_f32(vld1q_f32(x + i + 4), vm));
    vst1q_f32(y + i, e0);
    vst1q_f32(y + i + 4, e1);
    s0 = vaddq_f32(s0, e0), s1 = vaddq_f32(s1, e1);
  }
  float part[8];
  vst1q_f32(part, s0);
  vst1q_f32(part + 4, s1);
  for (size_t i = body; i < n; ++i) part[i % 8] += (y[i] = exp_scalar(x[i] - m));
  const float sum = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
  const float32x4_t inv = vdupq_n_f32(1.f / sum);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), inv));
  for (; i < n; ++i) y[i] *= 1.f / sum;
}

// LayerNorm of one row: two passes for the moments, as the AVX2 row, four lanes at a time.
void layer_norm_row_neon(const float* x, float* y, size_t n, const float* gamma, const float* beta, float eps) {
  const size_t body = n & ~size_t{3};
  float32x4_t vs = vdupq_n_f32(0.f);
  for (size_t i = 0; i < body; i += 4) vs = vaddq_f32(vs, vld1q_f32(x + i));
  float sum = vaddvq_f32(vs);
  for (size_t i = body; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  const float32x4_t vmean = vdupq_n_f32(mean);
  float32x4_t vq = vdupq_n_f32(0.f);
  for (size_t i = 0; i < body; i += 4) {
    const float32x4_t d = vsubq_f32(vld1q_f32(x + i), vmean);
    vq = vfmaq_f32(vq, d, d);
  }
  float sq = vaddvq_f32(vq);
  for (size_t i = body; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const float rstd = 1.f / std::sqrt(sq / static_cast<float>(n) + eps);
  const float32x4_t vr = vdupq_n_f32(rstd);
  for (size_t i = 0; i < body; i += 4) {
    const float32x4_t v = vmulq_f32(vsubq_f32(vld1q_f32(x + i), vmean), vr);
    vst1q_f32(y + i, vfmaq_f32(beta ? vld1q_f32(beta + i) : vdupq_n_f32(0.f), v, vld1q_f32(gamma + i)));
  }
  for (size_t i = body; i < n; ++i) y[i] = (x[i] - mean) * rstd * gamma[i] + (beta ? beta[i] : 0.f);
}

// R vectors (R <= 4) times 16 columns: 16 accumulators and 4 weight vectors in registers.
template <size_t R>
inline void vecmat_block_neon(const float* mt, size_t ld, size_t cols, const float* v, size_t ldv, const float* init,
                              size_t ldi, float* out, size_t ldo, size_t j) {
  float32x4_t acc[R][4];
  for (size_t r = 0; r < R; ++r)
    for (size_t q = 0; q < 4; ++q) acc[r][q] = vld1q_f32(init + r * ldi + j + 4 * q);
  const float* m = mt + j;
  for (size_t k = 0; k < cols; ++k, m += ld) {
    const float32x4_t w0 = vld1q_f32(m), w1 = vld1q_f32(m + 4), w2 = vld1q_f32(m + 8), w3 = vld1q_f32(m + 12);
    for (size_t r = 0; r < R; ++r) {
      const float vk = v[r * ldv + k];
      acc[r][0] = vfmaq_n_f32(acc[r][0], w0, vk);
      acc[r][1] = vfmaq_n_f32(acc[r][1], w1, vk);
      acc[r][2] = vfmaq_n_f32(acc[r][2], w2, vk);
      acc[r][3] = vfmaq_n_f32(acc[r][3], w3, vk);
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t q = 0; q < 4; ++q) vst1q_f32(out + r * ldo + j + 4 * q, acc[r][q]);
}

template <size_t R>
void vecmat_rows_neon(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv,
                      const float* init, size_t ldi, float* out, size_t ldo) {
  size_t j = 0;
  for (; j + 16 <= rows; j += 16) vecmat_block_neon<R>(mt, ld, cols, v, ldv, init, ldi, out, ldo, j);
  for (; j < rows; ++j)
    for (size_t r = 0; r < R; ++r) {
      float a = init[r * ldi + j];
      for (size_t k = 0; k < cols; ++k) a += v[r * ldv + k] * mt[k * ld + j];
      out[r * ldo + j] = a;
    }
}

void vecmat_neon(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv,
                 const float* init, size_t ldi, float* out, size_t ldo, size_t nv) {
  size_t r = 0;
  for (; r + 4 <= nv; r += 4) vecmat_rows_neon<4>(mt, ld, rows, cols, v + r * ldv, ldv, init + r * ldi, ldi, out + r * ldo, ldo);
  const float* vr = v + r * ldv;
  const float* irow = init + r * ldi;
  float* orow = out + r * ldo;
  if (nv - r == 3) vecmat_rows_neon<3>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
  if (nv - r == 2) vecmat_rows_neon<2>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
  if (nv - r == 1) vecmat_rows_neon<1>(mt, ld, rows, cols, vr, ldv, irow, ldi, orow, ldo);
}

void gru_row_neon(const float* x, const float* a, float* h, float* y, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t z = sigmoid4(vaddq_f32(vld1q_f32(x + i), vld1q_f32(a + i)));
    const float32x4_t r = sigmoid4(vaddq_f32(vld1q_f32(x + n + i), vld1q_f32(a + n + i)));
    const float32x4_t c = tanh4(vfmaq_f32(vld1q_f32(x + 2 * n + i), r, vld1q_f32(a + 2 * n + i)));
    const float32x4_t hn = vfmaq_f32(c, z, vsubq_f32(vld1q_f32(h + i), c));
    vst1q_f32(h + i, hn);
    vst1q_f32(y + i, hn);
  }
  for (; i < n; ++i) y[i] = h[i] = gru_unit(x[i], a[i], x[n + i], a[n + i], x[2 * n + i], a[2 * n + i], h[i]);
}

#endif  // __aarch64__

// Each function on every element, the scalar twins of the AVX2 code (the same formulas).
void erf_plain(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = erf_scalar(x[i]);
}
void tanh_plain(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = tanh_scalar(x[i]);
}
void sigmoid_plain(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = sigmoid_scalar(x[i]);
}
void gate_plain(const float* x, float* y, size_t n, bool hard, float alpha, float beta) {
  for (size_t i = 0; i < n; ++i) y[i] = gate_scalar(x[i], hard, alpha, beta);
}
void gelu_plain(const float* x, float* y, size_t n, bool tanh_form) {
  for (size_t i = 0; i < n; ++i) y[i] = gelu_scalar(x[i], tanh_form);
}
void vecmat_plain(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv, const float* init,
                  size_t ldi, float* out, size_t ldo, size_t nv) {
  for (size_t r = 0; r < nv; ++r) {
    if (init + r * ldi != out + r * ldo) std::memmove(out + r * ldo, init + r * ldi, rows * sizeof(float));
    for (size_t k = 0; k < cols; ++k) {
      const float vk = v[r * ldv + k];
      const float* row = mt + k * ld;
      float* o = out + r * ldo;
      for (size_t j = 0; j < rows; ++j) o[j] += vk * row[j];
    }
  }
}

// ---- the table (isa.h) -----------------------------------------------------------------------

struct Impl {
  const char* name;
  bool (*available)();
  void (*erf)(const float*, float*, size_t);
  void (*tanh)(const float*, float*, size_t);
  void (*sigmoid)(const float*, float*, size_t);
  void (*gate)(const float*, float*, size_t, bool, float, float);
  void (*softmax_row)(const float*, float*, size_t);
  void (*gelu)(const float*, float*, size_t, bool);
  void (*layer_norm_row)(const float*, float*, size_t, const float*, const float*, float);
  void (*vecmat)(const float*, size_t, size_t, size_t, const float*, size_t, const float*, size_t, float*, size_t, size_t);
  void (*gru_row)(const float*, const float*, float*, float*, size_t);
};

// Best first; the last runs anywhere.
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx512", cpu_has_avx512f, erf_avx2, tanh_avx512, sigmoid_avx512, gate_avx512, softmax_row_avx2, gelu_avx2,
     layer_norm_row_avx2, vecmat_avx512, gru_row_avx512},
    {"avx2", cpu_has_avx2, erf_avx2, tanh_avx2, sigmoid_avx2, gate_avx2, softmax_row_avx2, gelu_avx2,
     layer_norm_row_avx2, vecmat_avx2, gru_row_avx2},
#endif
#if defined(__aarch64__)
    {"neon", [] { return true; }, erf_neon, tanh_neon, sigmoid_neon, gate_neon, softmax_row_neon, gelu_neon,
     layer_norm_row_neon, vecmat_neon, gru_row_neon},
#endif
    {"plain", [] { return true; }, erf_plain, tanh_plain, sigmoid_plain, gate_plain, softmax_row_scalar, gelu_plain,
     layer_norm_row_scalar, vecmat_plain, gru_row_plain}};

const Impl& chosen() {
  static const Impl* impl = pick_isa(kImpls);
  return *impl;
}

}  // namespace

bool has_avx2() {
  const std::string isa = chosen().name;
  return isa == "avx2" || isa == "avx512";
}
const char* vmath_isa() { return chosen().name; }

void erf(const float* x, float* y, size_t n) { chosen().erf(x, y, n); }
void tanh(const float* x, float* y, size_t n) { chosen().tanh(x, y, n); }
void sigmoid(const float* x, float* y, size_t n) { chosen().sigmoid(x, y, n); }
void gate(const float* x, float* y, size_t n, bool hard, float alpha, float beta) { chosen().gate(x, y, n, hard, alpha, beta); }
void softmax_row(const float* x, float* y, size_t n) { chosen().softmax_row(x, y, n); }
void gelu(const float* x, float* y, size_t n, bool tanh_form) { chosen().gelu(x, y, n, tanh_form); }

void layer_norm_row(const float* x, float* y, size_t n, const float* gamma, const float* beta, float eps) {
  if (n == 0) return;
  chosen().layer_norm_row(x, y, n, gamma, beta, eps);
}

void vecmat(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv, const float* init,
            size_t ldi, float* out, size_t ldo, size_t nv) {
  if (nv > 0 && rows > 0) chosen().vecmat(mt, ld, rows, cols, v, ldv, init, ldi, out, ldo, nv);
}

void gru_row(const float* x, const float* a, float* h, float* y, size_t n) {
  if (n > 0) chosen().gru_row(x, a, h, y, n);
}

}  // namespace kiln::simd
