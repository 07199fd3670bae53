#include "delegates/xnnpack/pointwise.h"

#include <immintrin.h>
#include <pthreadpool.h>

#include <algorithm>

#include "delegates/xnnpack/dense_conv.h"

namespace kiln::delegates::xnnpack {

namespace {

// Numerator (odd, x * p(x^2)) and denominator (q(x^2)) coefficients, highest power first.
constexpr float kP[] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                        -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                        -1.60960333262415e-02f};
constexpr float kQ[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                        -7.37332916720468e-03f, -1.42647390514189e-02f};
constexpr size_t kBlock = 4096;

float erf_scalar(float a) {
  const float x = std::max(-4.f, std::min(4.f, a)), x2 = x * x;
  float p = kP[0], q = kQ[0];
  for (size_t k = 1; k < 7; ++k) p = p * x2 + kP[k];
  for (size_t k = 1; k < 5; ++k) q = q * x2 + kQ[k];
  return x * p / q;
}

__attribute__((target("avx2,fma"))) void erf_avx2(const float* x, float* y, size_t n) {
  const __m256 lo = _mm256_set1_ps(-4.f), hi = _mm256_set1_ps(4.f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_loadu_ps(x + i)));
    const __m256 v2 = _mm256_mul_ps(v, v);
    __m256 p = _mm256_set1_ps(kP[0]), q = _mm256_set1_ps(kQ[0]);
    for (size_t k = 1; k < 7; ++k) p = _mm256_fmadd_ps(p, v2, _mm256_set1_ps(kP[k]));
    for (size_t k = 1; k < 5; ++k) q = _mm256_fmadd_ps(q, v2, _mm256_set1_ps(kQ[k]));
    _mm256_storeu_ps(y + i, _mm256_div_ps(_mm256_mul_ps(v, p), q));
  }
  for (; i < n; ++i) y[i] = erf_scalar(x[i]);
}

// Eigen's rational tanh on [-7.905, 7.905] (odd numerator, even denominator).
constexpr float kTanhClamp = 7.90531110763549805f;
constexpr float kTp[] = {-2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f,
                         5.12229709037114e-08f,  1.48572235717979e-05f, 6.37261928875436e-04f,
                         4.89352455891786e-03f};
constexpr float kTq[] = {1.19825839466702e-06f, 1.18534705686654e-04f, 2.26843463243900e-03f,
                         4.89352518554385e-03f};

float sigmoid_scalar(float v) {
  const float x = std::max(-kTanhClamp, std::min(kTanhClamp, 0.5f * v)), x2 = x * x;
  float p = kTp[0], q = kTq[0];
  for (size_t k = 1; k < 7; ++k) p = p * x2 + kTp[k];
  for (size_t k = 1; k < 4; ++k) q = q * x2 + kTq[k];
  return 0.5f + 0.5f * (x * p / q);
}

__attribute__((target("avx2,fma"))) inline __m256 tanh256(__m256 v) {
  const __m256 t = _mm256_max_ps(_mm256_set1_ps(-kTanhClamp), _mm256_min_ps(_mm256_set1_ps(kTanhClamp), v));
  const __m256 t2 = _mm256_mul_ps(t, t);
  __m256 p = _mm256_set1_ps(kTp[0]), q = _mm256_set1_ps(kTq[0]);
  for (size_t k = 1; k < 7; ++k) p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(kTp[k]));
  for (size_t k = 1; k < 4; ++k) q = _mm256_fmadd_ps(q, t2, _mm256_set1_ps(kTq[k]));
  return _mm256_div_ps(_mm256_mul_ps(t, p), q);
}

__attribute__((target("avx2,fma"))) void gate_avx2(const float* x, float* y, size_t n, bool hard, float alpha,
                                                   float beta) {
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), zero = _mm256_setzero_ps(),
               one = _mm256_set1_ps(1.f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 g;
    if (hard) {
      g = _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_fmadd_ps(va, v, vb)));
    } else {
      g = _mm256_fmadd_ps(half, tanh256(_mm256_mul_ps(half, v)), half);  // sigmoid(v) = (1 + tanh(v/2)) / 2
    }
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, g));
  }
  for (; i < n; ++i)
    y[i] = x[i] * (hard ? std::min(1.f, std::max(0.f, alpha * x[i] + beta)) : sigmoid_scalar(x[i]));
}


float tanh_scalar(float v) { return 2.f * sigmoid_scalar(2.f * v) - 1.f; }

__attribute__((target("avx2,fma"))) void tanh_avx2(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, tanh256(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = tanh_scalar(x[i]);
}

// exp as Cephes' expf evaluates it: 2^n * (1 + r + r^2 p(r)), |r| <= ln2 / 2; max relative
// error 8e-8 over [-87, 88]; inputs are clamped to that range (exp(-inf) gives 1e-38, not 0).
constexpr float kExpLo = -87.3365f, kExpHi = 88.3762626647949f;
constexpr float kExpP[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                           4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

float exp_scalar(float v) {
  const float x = std::max(kExpLo, std::min(kExpHi, v)), fx = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - fx * 0.693359375f - fx * -2.12194440e-4f;
  float y = kExpP[0];
  for (size_t k = 1; k < 6; ++k) y = y * r + kExpP[k];
  return std::ldexp(y * r * r + r + 1.f, static_cast<int>(fx));
}

__attribute__((target("avx2,fma"))) inline __m256 exp256(__m256 v) {
  const __m256 x = _mm256_max_ps(_mm256_set1_ps(kExpLo), _mm256_min_ps(_mm256_set1_ps(kExpHi), v));
  const __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(kExpP[0]);
  for (size_t k = 1; k < 6; ++k) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kExpP[k]));
  y = _mm256_fmadd_ps(_mm256_mul_ps(y, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256i n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(n));
}

// One row of a softmax: y = exp(x - max) / sum. A row whose max is -inf (every entry
// masked) gives NaN, as the portable kernel does.
__attribute__((target("avx2,fma"))) void softmax_row_avx2(const float* x, float* y, size_t n) {
  __m256 vm = _mm256_set1_ps(-INFINITY);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vm);
  float m = -INFINITY;
  for (float v : lanes) m = std::max(m, v);
  for (; i < n; ++i) m = std::max(m, x[i]);
  if (m == -INFINITY) {
    for (i = 0; i < n; ++i) y[i] = NAN;
    return;
  }
  const __m256 vmax = _mm256_set1_ps(m);
  __m256 vs = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(y + i, e);
    vs = _mm256_add_ps(vs, e);
  }
  _mm256_store_ps(lanes, vs);
  float sum = 0.f;
  for (float v : lanes) sum += v;
  for (; i < n; ++i) sum += (y[i] = exp_scalar(x[i] - m));
  const __m256 inv = _mm256_set1_ps(1.f / sum);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  for (; i < n; ++i) y[i] *= 1.f / sum;
}

void softmax_row_scalar(const float* x, float* y, size_t n) {
  float m = -INFINITY, sum = 0.f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  for (size_t i = 0; i < n; ++i) sum += (y[i] = m == -INFINITY ? NAN : exp_scalar(x[i] - m));
  for (size_t i = 0; i < n; ++i) y[i] *= 1.f / sum;
}

enum class Kind : uint8_t { kErf, kTanh, kGate, kSoftmax };

// One map over blocks of kBlock elements (softmax: blocks of whole rows of `row` elements).
struct Job {
  Kind kind;
  const float* x;
  float* y;
  size_t n, row;
  bool hard;
  float alpha, beta;
};

void run_block(void* ctx, size_t b) {
  const Job& j = *static_cast<const Job*>(ctx);
  const bool avx2 = dense_conv_available();
  if (j.kind == Kind::kSoftmax) {
    const size_t per = std::max<size_t>(1, kBlock / std::max<size_t>(1, j.row)), rows = j.n / j.row;
    for (size_t r = b * per; r < std::min(rows, (b + 1) * per); ++r)
      (avx2 ? softmax_row_avx2 : softmax_row_scalar)(j.x + r * j.row, j.y + r * j.row, j.row);
    return;
  }
  const size_t first = b * kBlock, count = std::min(kBlock, j.n - first);
  const float* x = j.x + first;
  float* y = j.y + first;
  switch (j.kind) {
    case Kind::kGate:
      if (avx2) return gate_avx2(x, y, count, j.hard, j.alpha, j.beta);
      for (size_t i = 0; i < count; ++i)
        y[i] = x[i] * (j.hard ? std::min(1.f, std::max(0.f, j.alpha * x[i] + j.beta)) : sigmoid_scalar(x[i]));
      return;
    case Kind::kErf:
      if (avx2) return erf_avx2(x, y, count);
      for (size_t i = 0; i < count; ++i) y[i] = erf_scalar(x[i]);
      return;
    case Kind::kTanh:
      if (avx2) return tanh_avx2(x, y, count);
      for (size_t i = 0; i < count; ++i) y[i] = tanh_scalar(x[i]);
      return;
    case Kind::kSoftmax:
      return;
  }
}

void run(const Job& j, pthreadpool_t pool) {
  size_t blocks = (j.n + kBlock - 1) / kBlock;
  if (j.kind == Kind::kSoftmax) {
    const size_t per = std::max<size_t>(1, kBlock / std::max<size_t>(1, j.row));
    blocks = (j.n / std::max<size_t>(1, j.row) + per - 1) / per;
  }
  pthreadpool_parallelize_1d(pool, run_block, const_cast<Job*>(&j), blocks, 0);
}

}  // namespace

void fast_erf(const float* x, float* y, size_t n, pthreadpool_t pool) { run(Job{Kind::kErf, x, y, n, 1, false, 0, 0}, pool); }

void fast_tanh(const float* x, float* y, size_t n, pthreadpool_t pool) { run(Job{Kind::kTanh, x, y, n, 1, false, 0, 0}, pool); }

void gate(const float* x, float* y, size_t n, bool hard, float alpha, float beta, pthreadpool_t pool) {
  run(Job{Kind::kGate, x, y, n, 1, hard, alpha, beta}, pool);
}

void softmax_rows(const float* x, float* y, size_t rows, size_t n, pthreadpool_t pool) {
  if (rows == 0 || n == 0) return;
  run(Job{Kind::kSoftmax, x, y, rows * n, n, false, 0, 0}, pool);
}

}  // namespace kiln::delegates::xnnpack
