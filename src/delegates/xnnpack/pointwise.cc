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

__attribute__((target("avx2,fma"))) void gate_avx2(const float* x, float* y, size_t n, bool hard, float alpha,
                                                   float beta) {
  const __m256 half = _mm256_set1_ps(0.5f), lo = _mm256_set1_ps(-kTanhClamp), hi = _mm256_set1_ps(kTanhClamp);
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), zero = _mm256_setzero_ps(),
               one = _mm256_set1_ps(1.f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 g;
    if (hard) {
      g = _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_fmadd_ps(va, v, vb)));
    } else {
      const __m256 t = _mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_mul_ps(half, v)));
      const __m256 t2 = _mm256_mul_ps(t, t);
      __m256 p = _mm256_set1_ps(kTp[0]), q = _mm256_set1_ps(kTq[0]);
      for (size_t k = 1; k < 7; ++k) p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(kTp[k]));
      for (size_t k = 1; k < 4; ++k) q = _mm256_fmadd_ps(q, t2, _mm256_set1_ps(kTq[k]));
      g = _mm256_fmadd_ps(half, _mm256_div_ps(_mm256_mul_ps(t, p), q), half);
    }
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, g));
  }
  for (; i < n; ++i)
    y[i] = x[i] * (hard ? std::min(1.f, std::max(0.f, alpha * x[i] + beta)) : sigmoid_scalar(x[i]));
}

// One pointwise map over blocks of kBlock elements.
struct Job {
  const float* x;
  float* y;
  size_t n;
  bool gate, hard;
  float alpha, beta;
};

void run_block(void* ctx, size_t b) {
  const Job& j = *static_cast<const Job*>(ctx);
  const size_t first = b * kBlock, count = std::min(kBlock, j.n - first);
  const float* x = j.x + first;
  float* y = j.y + first;
  if (j.gate) {
    if (dense_conv_available()) {
      gate_avx2(x, y, count, j.hard, j.alpha, j.beta);
      return;
    }
    for (size_t i = 0; i < count; ++i)
      y[i] = x[i] * (j.hard ? std::min(1.f, std::max(0.f, j.alpha * x[i] + j.beta)) : sigmoid_scalar(x[i]));
    return;
  }
  if (dense_conv_available()) {
    erf_avx2(x, y, count);
    return;
  }
  for (size_t i = 0; i < count; ++i) y[i] = erf_scalar(x[i]);
}

void run(const Job& j, pthreadpool_t pool) {
  pthreadpool_parallelize_1d(pool, run_block, const_cast<Job*>(&j), (j.n + kBlock - 1) / kBlock, 0);
}

}  // namespace

void fast_erf(const float* x, float* y, size_t n, pthreadpool_t pool) { run(Job{x, y, n, false, false, 0, 0}, pool); }

void gate(const float* x, float* y, size_t n, bool hard, float alpha, float beta, pthreadpool_t pool) {
  run(Job{x, y, n, true, hard, alpha, beta}, pool);
}

}  // namespace kiln::delegates::xnnpack
