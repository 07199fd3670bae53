#pragma once
// Internal to kernels/simd: the AVX2+FMA building blocks (and their scalar twins) of
// vmath.cc and attention.cc. Functions marked KILN_AVX2 (x86-64 only) may only run after
// cpu_has_avx2().

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kiln::simd::detail {


// erf: numerator (odd, x * p(x^2)) and denominator (q(x^2)) coefficients, highest power first.
constexpr float kErfP[] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                           -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                           -1.60960333262415e-02f};
constexpr float kErfQ[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                           -7.37332916720468e-03f, -1.42647390514189e-02f};

// Eigen's rational tanh on [-7.905, 7.905] (odd numerator, even denominator).
constexpr float kTanhClamp = 7.90531110763549805f;
constexpr float kTanhP[] = {-2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f,
                            5.12229709037114e-08f,  1.48572235717979e-05f, 6.37261928875436e-04f,
                            4.89352455891786e-03f};
constexpr float kTanhQ[] = {1.19825839466702e-06f, 1.18534705686654e-04f, 2.26843463243900e-03f,
                            4.89352518554385e-03f};

// Cephes' expf.
constexpr float kExpLo = -87.3365f, kExpHi = 88.3762626647949f;
constexpr float kExpP[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                           4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// Clamps to [lo, hi]; NaN passes through (as the vector code's min/max with x second do).
inline float clamp_nan(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

inline float erf_scalar(float a) {
  const float x = clamp_nan(a, -4.f, 4.f), x2 = x * x;
  float p = kErfP[0], q = kErfQ[0];
  for (size_t k = 1; k < 7; ++k) p = p * x2 + kErfP[k];
  for (size_t k = 1; k < 5; ++k) q = q * x2 + kErfQ[k];
  return x * p / q;
}

inline float tanh_scalar(float v) {
  const float x = clamp_nan(v, -kTanhClamp, kTanhClamp), x2 = x * x;
  float p = kTanhP[0], q = kTanhQ[0];
  for (size_t k = 1; k < 7; ++k) p = p * x2 + kTanhP[k];
  for (size_t k = 1; k < 4; ++k) q = q * x2 + kTanhQ[k];
  return x * p / q;
}

inline float sigmoid_scalar(float v) { return 0.5f + 0.5f * tanh_scalar(0.5f * v); }

inline float exp_scalar(float v) {
  const float x = clamp_nan(v, kExpLo, kExpHi), fx = std::floor(x * 1.44269504088896341f + 0.5f);
  if (x != x) return x;
  if (v < kExpLo) return 0.f;  // underflow, as the vector code
  const float r = x - fx * 0.693359375f - fx * -2.12194440e-4f;
  float y = kExpP[0];
  for (size_t k = 1; k < 6; ++k) y = y * r + kExpP[k];
  return std::ldexp(y * r * r + r + 1.f, static_cast<int>(fx));
}

#if defined(__x86_64__)
#define KILN_AVX2 __attribute__((target("avx2,fma")))

KILN_AVX2 inline __m256 erf256(__m256 a) {
  const __m256 v = _mm256_max_ps(_mm256_set1_ps(-4.f), _mm256_min_ps(_mm256_set1_ps(4.f), a));
  const __m256 v2 = _mm256_mul_ps(v, v);
  __m256 p = _mm256_set1_ps(kErfP[0]), q = _mm256_set1_ps(kErfQ[0]);
  for (size_t k = 1; k < 7; ++k) p = _mm256_fmadd_ps(p, v2, _mm256_set1_ps(kErfP[k]));
  for (size_t k = 1; k < 5; ++k) q = _mm256_fmadd_ps(q, v2, _mm256_set1_ps(kErfQ[k]));
  return _mm256_div_ps(_mm256_mul_ps(v, p), q);
}

KILN_AVX2 inline __m256 tanh256(__m256 v) {
  const __m256 t = _mm256_max_ps(_mm256_set1_ps(-kTanhClamp), _mm256_min_ps(_mm256_set1_ps(kTanhClamp), v));
  const __m256 t2 = _mm256_mul_ps(t, t);
  __m256 p = _mm256_set1_ps(kTanhP[0]), q = _mm256_set1_ps(kTanhQ[0]);
  for (size_t k = 1; k < 7; ++k) p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(kTanhP[k]));
  for (size_t k = 1; k < 4; ++k) q = _mm256_fmadd_ps(q, t2, _mm256_set1_ps(kTanhQ[k]));
  // At and beyond the clamp the rational is 1 - 2.4e-7 evaluated with FMA: there tanh is +-1
  // in f32, as the scalar twin gives it (and sigmoid(+-big) exactly 1 and 0).
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 sat = _mm256_cmp_ps(_mm256_andnot_ps(sign, t), _mm256_set1_ps(kTanhClamp), _CMP_EQ_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(sign, t), _mm256_set1_ps(1.f));
  return _mm256_blendv_ps(_mm256_div_ps(_mm256_mul_ps(t, p), q), one, sat);
}

KILN_AVX2 inline __m256 sigmoid256(__m256 v) {
  const __m256 half = _mm256_set1_ps(0.5f);
  return _mm256_fmadd_ps(half, tanh256(_mm256_mul_ps(half, v)), half);
}

KILN_AVX2 inline __m256 exp256(__m256 v) {
  const __m256 x = _mm256_max_ps(_mm256_set1_ps(kExpLo), _mm256_min_ps(_mm256_set1_ps(kExpHi), v));
  const __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(kExpP[0]);
  for (size_t k = 1; k < 6; ++k) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kExpP[k]));
  y = _mm256_fmadd_ps(_mm256_mul_ps(y, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  const __m256i n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  // Below the range exp underflows to 0 (a masked score, exp(-inf), contributes nothing).
  const __m256 under = _mm256_cmp_ps(v, _mm256_set1_ps(kExpLo), _CMP_LT_OQ);
  return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(n)));
}

// Lanes [0, rem) of a vector (rem < 8): a mask for maskload/maskstore and blends, so a row's
// tail runs in the same vector code as its body.
KILN_AVX2 inline __m256i tail_mask(size_t rem) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rem)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

KILN_AVX2 inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

KILN_AVX2 inline float hsum(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

#endif  // __x86_64__

}  // namespace kiln::simd::detail
