#include "delegates/xnnpack/fast_erf.h"

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

struct Job {
  const float* x;
  float* y;
  size_t n;
};

void run_block(void* ctx, size_t b) {
  const Job& j = *static_cast<const Job*>(ctx);
  const size_t first = b * kBlock, count = std::min(kBlock, j.n - first);
  if (dense_conv_available()) {
    erf_avx2(j.x + first, j.y + first, count);
    return;
  }
  for (size_t i = first; i < first + count; ++i) j.y[i] = erf_scalar(j.x[i]);
}

}  // namespace

void fast_erf(const float* x, float* y, size_t n, pthreadpool_t pool) {
  Job j{x, y, n};
  pthreadpool_parallelize_1d(pool, run_block, &j, (n + kBlock - 1) / kBlock, 0);
}

}  // namespace kiln::delegates::xnnpack
