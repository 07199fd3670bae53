#pragma once
// Internal to kernels/simd: the arm64 NEON building blocks of vmath.cc and attention.cc, the
// same formulas and constants as avx2_math.h (its scalar twins are the plain rows), four lanes
// at a time with FMA (every arm64 CPU has it). aarch64 only.

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstddef>

#include "kernels/simd/avx2_math.h"

namespace kiln::simd::detail {

// Clamps to [lo, hi]; NaN passes through (vminq/vmaxq return NaN when either operand is NaN).
inline float32x4_t clamp4(float32x4_t v, float lo, float hi) { return vmaxq_f32(vdupq_n_f32(lo), vminq_f32(vdupq_n_f32(hi), v)); }

// p[0] x^(n-1) + ... + p[n-1] by Horner's rule with FMA.
template <size_t N>
inline float32x4_t horner4(const float (&p)[N], float32x4_t x) {
  float32x4_t y = vdupq_n_f32(p[0]);
  for (size_t k = 1; k < N; ++k) y = vfmaq_f32(vdupq_n_f32(p[k]), y, x);
  return y;
}

inline float32x4_t erf4(float32x4_t a) {
  const float32x4_t v = clamp4(a, -4.f, 4.f), v2 = vmulq_f32(v, v);
  return vdivq_f32(vmulq_f32(v, horner4(kErfP, v2)), horner4(kErfQ, v2));
}

inline float32x4_t tanh4(float32x4_t a) {
  const float32x4_t t = clamp4(a, -kTanhClamp, kTanhClamp), t2 = vmulq_f32(t, t);
  const float32x4_t y = vdivq_f32(vmulq_f32(t, horner4(kTanhP, t2)), horner4(kTanhQ, t2));
  // At and beyond the clamp the rational is 1 - 2.4e-7 evaluated with FMA: there tanh is +-1
  // in f32, as the scalar twin gives it (and sigmoid(+-big) exactly 1 and 0).
  const uint32x4_t sat = vceqq_f32(vabsq_f32(t), vdupq_n_f32(kTanhClamp));
  const float32x4_t one = vbslq_f32(vdupq_n_u32(0x80000000u), t, vdupq_n_f32(1.f));  // 1 with t's sign
  return vbslq_f32(sat, one, y);
}

inline float32x4_t sigmoid4(float32x4_t v) {
  const float32x4_t half = vdupq_n_f32(0.5f);
  return vfmaq_f32(half, half, tanh4(vmulq_f32(half, v)));
}

inline float32x4_t exp4(float32x4_t v) {
  const float32x4_t x = clamp4(v, kExpLo, kExpHi);
  const float32x4_t fx = vrndmq_f32(vfmaq_f32(vdupq_n_f32(0.5f), x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, fx, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, fx, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t y = horner4(kExpP, r);
  y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.f)), vmulq_f32(y, r), r);
  const int32x4_t n = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(fx), vdupq_n_s32(127)), 23);
  // Below the range exp underflows to 0 (a masked score, exp(-inf), contributes nothing).
  const uint32x4_t under = vcltq_f32(v, vdupq_n_f32(kExpLo));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(vmulq_f32(y, vreinterpretq_f32_s32(n))), under));
}

}  // namespace kiln::simd::detail

#endif  // __aarch64__
