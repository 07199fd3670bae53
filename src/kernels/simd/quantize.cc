#include "kernels/simd/quantize.h"

#include <cmath>
#include <type_traits>

#include "kernels/simd/isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::simd {

namespace {

template <typename T>
void quantize_scalar(const float* x, size_t n, float scale, int32_t zp, int32_t lo, int32_t hi, T* y) {
  const float fl = static_cast<float>(lo - zp), fh = static_cast<float>(hi - zp);
  for (size_t i = 0; i < n; ++i) {
    float v = x[i] / scale;
    v = v < fl ? fl : v > fh ? fh : v;
    y[i] = static_cast<T>(static_cast<int32_t>(std::nearbyint(v)) + zp);
  }
}

template <typename T>
void requantize_scalar(const int32_t* acc, size_t n, int32_t bias, float ratio, int32_t zp, int32_t lo, int32_t hi, T* y) {
  const float fl = static_cast<float>(lo - zp), fh = static_cast<float>(hi - zp);
  for (size_t i = 0; i < n; ++i) {
    float v = static_cast<float>(acc[i] + bias) * ratio;
    v = v < fl ? fl : v > fh ? fh : v;
    y[i] = static_cast<T>(static_cast<int32_t>(std::nearbyint(v)) + zp);
  }
}

void interleave_scalar(const int16_t* r0, const int16_t* r1, size_t n, int16_t* out, size_t block_stride) {
  for (size_t j = 0; j < n; ++j) {
    int16_t* o = out + (j / 16) * block_stride + (j % 16) * 2;
    o[0] = r0[j];
    o[1] = r1[j];
  }
}

template <typename T>
void widen_scalar(const T* x, size_t n, int32_t zp, int16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int16_t>(static_cast<int32_t>(x[i]) - zp);
}

template <typename T>
void dequantize_scalar(const T* x, size_t n, float scale, int32_t zp, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

#if defined(__x86_64__)
#define KILN_AVX2_Q __attribute__((target("avx2")))

template <bool Signed>
KILN_AVX2_Q void dequantize_avx2(const void* in, size_t n, float scale, int32_t zp, float* y) {
  const auto* x = static_cast<const unsigned char*>(in);
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i z = _mm256_set1_epi32(zp);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i w = _mm256_sub_epi32(Signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b), z);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(w), s));
  }
  if (Signed)
    dequantize_scalar(reinterpret_cast<const int8_t*>(x + i), n - i, scale, zp, y + i);
  else
    dequantize_scalar(x + i, n - i, scale, zp, y + i);
}

template <bool Signed>
KILN_AVX2_Q void widen_avx2(const void* in, size_t n, int32_t zp, int16_t* out) {
  const auto* x = static_cast<const unsigned char*>(in);
  const __m256i z = _mm256_set1_epi16(static_cast<int16_t>(zp));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    const __m256i w = Signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_sub_epi16(w, z));
  }
  if (Signed)
    widen_scalar(reinterpret_cast<const int8_t*>(x + i), n - i, zp, out + i);
  else
    widen_scalar(x + i, n - i, zp, out + i);
}

KILN_AVX2_Q void interleave_avx2(const int16_t* r0, const int16_t* r1, size_t n, int16_t* out, size_t block_stride) {
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + j));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + j));
    const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);  // per 128-bit lane
    int16_t* o = out + (j / 16) * block_stride;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
  interleave_scalar(r0 + j, r1 + j, n - j, out + (j / 16) * block_stride, block_stride);
}

KILN_AVX2_Q inline __m256i requantize8(const int32_t* p, __m256i b, __m256 r, __m256 fl, __m256 fh, __m256i z) {
  __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), b)), r);
  v = _mm256_min_ps(_mm256_max_ps(v, fl), fh);
  return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), z);
}

template <bool Signed>
KILN_AVX2_Q void requantize_avx2(const int32_t* acc, size_t n, int32_t bias, float ratio, int32_t zp, int32_t lo, int32_t hi,
                                 void* out) {
  const __m256 r = _mm256_set1_ps(ratio), fl = _mm256_set1_ps(static_cast<float>(lo - zp)),
               fh = _mm256_set1_ps(static_cast<float>(hi - zp));
  const __m256i z = _mm256_set1_epi32(zp), b = _mm256_set1_epi32(bias);
  auto* y = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i ab = _mm256_packs_epi32(requantize8(acc + i, b, r, fl, fh, z), requantize8(acc + i + 8, b, r, fl, fh, z));
    const __m256i cd = _mm256_packs_epi32(requantize8(acc + i + 16, b, r, fl, fh, z), requantize8(acc + i + 24, b, r, fl, fh, z));
    const __m256i bytes = Signed ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  if (Signed)
    requantize_scalar(acc + i, n - i, bias, ratio, zp, lo, hi, reinterpret_cast<int8_t*>(y + i));
  else
    requantize_scalar(acc + i, n - i, bias, ratio, zp, lo, hi, y + i);
}

// 8 values: the quotient clamped to [lo - zp, hi - zp] (integers, so clamping before rounding
// is clamping after), rounded to nearest even, plus zp, as int32.
KILN_AVX2_Q inline __m256i quantize8(const float* x, __m256 scale, __m256 fl, __m256 fh, __m256i zp) {
  __m256 v = _mm256_div_ps(_mm256_loadu_ps(x), scale);
  v = _mm256_min_ps(_mm256_max_ps(v, fl), fh);
  return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), zp);
}

template <bool Signed>
KILN_AVX2_Q void quantize_avx2(const float* x, size_t n, float scale, int32_t zp, int32_t lo, int32_t hi, void* out) {
  const __m256 s = _mm256_set1_ps(scale), fl = _mm256_set1_ps(static_cast<float>(lo - zp)),
               fh = _mm256_set1_ps(static_cast<float>(hi - zp));
  const __m256i z = _mm256_set1_epi32(zp);
  auto* y = static_cast<unsigned char*>(out);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = quantize8(x + i, s, fl, fh, z), b = quantize8(x + i + 8, s, fl, fh, z),
                  c = quantize8(x + i + 16, s, fl, fh, z), d = quantize8(x + i + 24, s, fl, fh, z);
    // The values are already in range: packing saturates nothing; permute undoes the lane split.
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i bytes = Signed ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  if (Signed)
    quantize_scalar(x + i, n - i, scale, zp, lo, hi, reinterpret_cast<int8_t*>(y + i));
  else
    quantize_scalar(x + i, n - i, scale, zp, lo, hi, y + i);
}

KILN_AVX2_Q bool min_max_avx2(const float* x, size_t n, float* lo, float* hi) {
  __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
  const __m256 inf = _mm256_set1_ps(INFINITY);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    // |v| < inf is false for NaN and +-inf.
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), inf, _CMP_NLT_UQ));
    mn = _mm256_min_ps(mn, v);
    mx = _mm256_max_ps(mx, v);
  }
  if (_mm256_movemask_ps(bad) != 0) return false;
  alignas(32) float a[8], b[8];
  _mm256_store_ps(a, mn);
  _mm256_store_ps(b, mx);
  float l = a[0], h = b[0];
  for (int k = 1; k < 8; ++k) l = a[k] < l ? a[k] : l, h = b[k] > h ? b[k] : h;
  for (; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  *lo = l;
  *hi = h;
  return true;
}
#endif

bool min_max_scalar(const float* x, size_t n, float* lo, float* hi) {
  float l = x[0], h = x[0];
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  *lo = l;
  *hi = h;
  return true;
}

// The scalar rows' entries where the tail has its own form.
bool min_max_plain(const float* x, size_t n, float* lo, float* hi) { return min_max_scalar(x, n, lo, hi); }
#if defined(__x86_64__)
// The AVX2 kernels typed as the table's entries.
bool min_max_x86(const float* x, size_t n, float* lo, float* hi) {
  return n >= 8 ? min_max_avx2(x, n, lo, hi) : min_max_scalar(x, n, lo, hi);
}
template <typename T>
void requantize_x86(const int32_t* acc, size_t n, int32_t bias, float ratio, int32_t zp, int32_t lo, int32_t hi, T* y) {
  requantize_avx2<std::is_signed_v<T>>(acc, n, bias, ratio, zp, lo, hi, y);
}
template <typename T>
void dequantize_x86(const T* x, size_t n, float scale, int32_t zp, float* y) {
  dequantize_avx2<std::is_signed_v<T>>(x, n, scale, zp, y);
}
template <typename T>
void widen_x86(const T* x, size_t n, int32_t zp, int16_t* out) {
  widen_avx2<std::is_signed_v<T>>(x, n, zp, out);
}
template <typename T>
void quantize_x86(const float* x, size_t n, float scale, int32_t zp, int32_t lo, int32_t hi, T* y) {
  quantize_avx2<std::is_signed_v<T>>(x, n, scale, zp, lo, hi, y);
}
#endif

// ---- the table (isa.h) -----------------------------------------------------------------------

struct Impl {
  const char* name;
  bool (*available)();
  void (*requantize_u8)(const int32_t*, size_t, int32_t, float, int32_t, int32_t, int32_t, uint8_t*);
  void (*requantize_i8)(const int32_t*, size_t, int32_t, float, int32_t, int32_t, int32_t, int8_t*);
  void (*dequantize_u8)(const uint8_t*, size_t, float, int32_t, float*);
  void (*dequantize_i8)(const int8_t*, size_t, float, int32_t, float*);
  void (*widen_u8)(const uint8_t*, size_t, int32_t, int16_t*);
  void (*widen_i8)(const int8_t*, size_t, int32_t, int16_t*);
  void (*interleave)(const int16_t*, const int16_t*, size_t, int16_t*, size_t);
  bool (*min_max)(const float*, size_t, float*, float*);
  void (*quantize_u8)(const float*, size_t, float, int32_t, int32_t, int32_t, uint8_t*);
  void (*quantize_i8)(const float*, size_t, float, int32_t, int32_t, int32_t, int8_t*);
};

// Best first; the last runs anywhere.
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx2", cpu_has_avx2, requantize_x86<uint8_t>, requantize_x86<int8_t>, dequantize_x86<uint8_t>,
     dequantize_x86<int8_t>, widen_x86<uint8_t>, widen_x86<int8_t>, interleave_avx2, min_max_x86, quantize_x86<uint8_t>,
     quantize_x86<int8_t>},
#endif
    {"plain", [] { return true; }, requantize_scalar<uint8_t>, requantize_scalar<int8_t>, dequantize_scalar<uint8_t>,
     dequantize_scalar<int8_t>, widen_scalar<uint8_t>, widen_scalar<int8_t>, interleave_scalar, min_max_plain,
     quantize_scalar<uint8_t>, quantize_scalar<int8_t>}};

const Impl& chosen() {
  static const Impl* impl = pick_isa(kImpls);
  return *impl;
}

}  // namespace

void requantize_u8(const int32_t* acc, size_t n, int32_t bias, float ratio, int32_t zp, int32_t lo, int32_t hi, uint8_t* y) {
  chosen().requantize_u8(acc, n, bias, ratio, zp, lo, hi, y);
}
void requantize_i8(const int32_t* acc, size_t n, int32_t bias, float ratio, int32_t zp, int32_t lo, int32_t hi, int8_t* y) {
  chosen().requantize_i8(acc, n, bias, ratio, zp, lo, hi, y);
}
void dequantize_u8(const uint8_t* x, size_t n, float scale, int32_t zp, float* y) { chosen().dequantize_u8(x, n, scale, zp, y); }
void dequantize_i8(const int8_t* x, size_t n, float scale, int32_t zp, float* y) { chosen().dequantize_i8(x, n, scale, zp, y); }
void widen_u8(const uint8_t* x, size_t n, int32_t zp, int16_t* out) { chosen().widen_u8(x, n, zp, out); }
void widen_i8(const int8_t* x, size_t n, int32_t zp, int16_t* out) { chosen().widen_i8(x, n, zp, out); }
void interleave_pairs(const int16_t* row0, const int16_t* row1, size_t n, int16_t* out, size_t block_stride) {
  chosen().interleave(row0, row1, n, out, block_stride);
}
bool finite_min_max(const float* x, size_t n, float* lo, float* hi) { return chosen().min_max(x, n, lo, hi); }
void quantize_u8(const float* x, size_t n, float scale, int32_t zp, int32_t lo, int32_t hi, uint8_t* y) {
  chosen().quantize_u8(x, n, scale, zp, lo, hi, y);
}
void quantize_i8(const float* x, size_t n, float scale, int32_t zp, int32_t lo, int32_t hi, int8_t* y) {
  chosen().quantize_i8(x, n, scale, zp, lo, hi, y);
}

}  // namespace kiln::simd
