#include "kernels/simd/qgemm.h"

#include "kernels/simd/isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <cmath>
#include <cstring>

namespace kiln::simd {

namespace {

// ---- plain C++: any CPU; the definition the others are tested against ----------------------

uint8_t requantize_one(int64_t dot, size_t r, size_t j, const int32_t* rowsum, const QgemmEpilogue& e) {
  int64_t v = dot + e.bias[j];
  if (e.wz) v -= static_cast<int64_t>(e.wz[j]) * rowsum[r];
  const int32_t acc = static_cast<int32_t>(static_cast<uint32_t>(v));  // the int32 accumulator
  float f = static_cast<float>(acc) * e.ratio[j];
  const float fl = static_cast<float>(e.lo - e.zp), fh = static_cast<float>(e.hi - e.zp);
  f = f < fl ? fl : f > fh ? fh : f;
  return static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(f)) + e.zp);
}

float to_float_one(int64_t dot, size_t r, size_t j, const int32_t* rowsum, const QgemmF32Epilogue& e) {
  int64_t v = dot + e.bias[j];
  if (e.wz) v -= static_cast<int64_t>(e.wz[j]) * rowsum[r];
  const float f = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(v))) * e.scale[j];
  return e.fbias ? f + e.fbias[j] : f;
}

// What an entry writes: bytes (QgemmEpilogue), floats (QgemmF32Epilogue) or int32 transposed
// (QgemmI32Epilogue).
enum Out : int { kBytes = 0, kF32 = 1, kI32T = 2 };

int32_t to_i32_one(int64_t dot, size_t r, size_t j, const int32_t* rowsum, const QgemmI32Epilogue& e) {
  int64_t v = dot + e.bias[j];
  if (e.wz) v -= static_cast<int64_t>(e.wz[j]) * rowsum[r];
  return static_cast<int32_t>(static_cast<uint32_t>(v));
}

template <int kOut>
void qgemm_plain_t(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                   const void* e, void* y, size_t ldy, size_t nc, bool a_unsigned) {
  for (size_t r = 0; r < mr; ++r)
    for (size_t j = 0; j < nc; ++j) {
      int64_t dot = 0;
      for (size_t k = 0; k < kp; ++k) {
        const uint8_t av = a[r * lda + k], bv = panel[qgemm_panel_index(k, j)];
        dot += a_unsigned ? int64_t{av} * static_cast<int8_t>(bv) : int64_t{static_cast<int8_t>(av)} * bv;
      }
      if constexpr (kOut == kF32)
        static_cast<float*>(y)[r * ldy + j] = to_float_one(dot, r, j, rowsum, *static_cast<const QgemmF32Epilogue*>(e));
      else if constexpr (kOut == kI32T)
        static_cast<int32_t*>(y)[j * ldy + r] = to_i32_one(dot, r, j, rowsum, *static_cast<const QgemmI32Epilogue*>(e));
      else
        static_cast<uint8_t*>(y)[r * ldy + j] = requantize_one(dot, r, j, rowsum, *static_cast<const QgemmEpilogue*>(e));
    }
}

void qdw_plain(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed, size_t c,
               const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  for (size_t p = 0; p < npix; ++p)
    for (size_t j = 0; j < c; ++j) {
      int64_t dot = 0;
      const int16_t* wj = w + (j / kQgemmNr) * taps * kQgemmNr + j % kQgemmNr;
      for (size_t t = 0; t < taps; ++t) {
        const uint8_t v = x[t][p * step[t] + j];
        dot += int64_t{x_signed ? static_cast<int8_t>(v) : v} * wj[t * kQgemmNr];
      }
      y[p * c + j] = requantize_one(dot, 0, j, nullptr, e);
    }
}

#if defined(__x86_64__)
// ---- AVX2: operands widened to int16, vpmaddwd (exact; vpmaddubsw would saturate) ----------

#define KILN_AVX2_INT __attribute__((target("avx2")))

// Requantizes 8 channels of int32 (bias and zero-point terms added) to int32 outputs.
KILN_AVX2_INT inline __m256i requantize8(__m256i v, const QgemmEpilogue& e, size_t j0, int32_t rowsum) {
  v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.bias + j0)));
  if (e.wz)
    v = _mm256_sub_epi32(v, _mm256_mullo_epi32(_mm256_set1_epi32(rowsum),
                                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.wz + j0))));
  __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(e.ratio + j0));
  f = _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(static_cast<float>(e.lo - e.zp))),
                    _mm256_set1_ps(static_cast<float>(e.hi - e.zp)));
  return _mm256_add_epi32(_mm256_cvtps_epi32(f), _mm256_set1_epi32(e.zp));
}

// The float epilogue of 16 channels (two vectors of 8) of one row.
KILN_AVX2_INT inline void store_f32_avx2(__m256i lo, __m256i hi, const QgemmF32Epilogue& e, int32_t rowsum, float* y,
                                         size_t nc) {
  __m256 out[2];
  const __m256i v[2] = {lo, hi};
  for (size_t h = 0; h < 2; ++h) {
    __m256i t = _mm256_add_epi32(v[h], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.bias + 8 * h)));
    if (e.wz)
      t = _mm256_sub_epi32(t, _mm256_mullo_epi32(_mm256_set1_epi32(rowsum),
                                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.wz + 8 * h))));
    out[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(t), _mm256_loadu_ps(e.scale + 8 * h));
    if (e.fbias) out[h] = _mm256_add_ps(out[h], _mm256_loadu_ps(e.fbias + 8 * h));
  }
  if (nc == kQgemmNr) {
    _mm256_storeu_ps(y, out[0]);
    _mm256_storeu_ps(y + 8, out[1]);
  } else {
    alignas(32) float tmp[kQgemmNr];
    _mm256_store_ps(tmp, out[0]);
    _mm256_store_ps(tmp + 8, out[1]);
    std::memcpy(y, tmp, nc * sizeof(float));
  }
}

template <size_t MR, bool AU, int kOut>
KILN_AVX2_INT void rows_avx2(size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                             const void* ep, void* yp, size_t ldy, size_t nc) {
  // acc[r][q]: channels 4q..4q+3 of row r, two partial sums each (k pairs 0-1 and 2-3).
  __m256i acc[MR][4];
  for (size_t r = 0; r < MR; ++r)
    for (size_t q = 0; q < 4; ++q) acc[r][q] = _mm256_setzero_si256();
  for (size_t g = 0; g < kp / 4; ++g) {
    __m256i b[4];
    for (size_t q = 0; q < 4; ++q) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + g * 64 + q * 16));
      b[q] = AU ? _mm256_cvtepi8_epi16(raw) : _mm256_cvtepu8_epi16(raw);
    }
    for (size_t r = 0; r < MR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda + g * 4, sizeof(quad));
      const __m128i a8 = _mm_cvtsi32_si128(quad);
      const __m256i av = _mm256_broadcastq_epi64(AU ? _mm_cvtepu8_epi16(a8) : _mm_cvtepi8_epi16(a8));
      for (size_t q = 0; q < 4; ++q) acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(av, b[q]));
    }
  }
  for (size_t r = 0; r < MR; ++r) {
    const __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][0], acc[r][1]), 0xD8);
    const __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[r][2], acc[r][3]), 0xD8);
    if constexpr (kOut == kF32) {
      store_f32_avx2(lo, hi, *static_cast<const QgemmF32Epilogue*>(ep), rowsum[r], static_cast<float*>(yp) + r * ldy, nc);
      continue;
    }
    if constexpr (kOut == kI32T) {  // column j of row r at y[j * ldy + r]
      const QgemmI32Epilogue& e = *static_cast<const QgemmI32Epilogue*>(ep);
      alignas(32) int32_t tmp[kQgemmNr];
      const __m256i v[2] = {lo, hi};
      for (size_t h = 0; h < 2; ++h) {
        __m256i t = _mm256_add_epi32(v[h], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.bias + 8 * h)));
        if (e.wz)
          t = _mm256_sub_epi32(t, _mm256_mullo_epi32(_mm256_set1_epi32(rowsum[r]),
                                                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.wz + 8 * h))));
        _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8 * h), t);
      }
      int32_t* y = static_cast<int32_t*>(yp) + r;
      for (size_t j = 0; j < nc; ++j) y[j * ldy] = tmp[j];
      continue;
    }
    const QgemmEpilogue& e = *static_cast<const QgemmEpilogue*>(ep);
    uint8_t* y = static_cast<uint8_t*>(yp);
    const int32_t rs = e.wz ? rowsum[r] : 0;
    __m256i w16 = _mm256_permute4x64_epi64(
        _mm256_packs_epi32(requantize8(lo, e, 0, rs), requantize8(hi, e, 8, rs)), 0xD8);
    w16 = _mm256_and_si256(w16, _mm256_set1_epi16(0xFF));  // each value's byte (already in range)
    const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
    if (nc == kQgemmNr) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + r * ldy), bytes);
    } else {
      alignas(16) uint8_t tmp[kQgemmNr];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), bytes);
      std::memcpy(y + r * ldy, tmp, nc);
    }
  }
}

template <bool AU, int kOut>
KILN_AVX2_INT void qgemm_avx2_t(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum,
                                const uint8_t* panel, const void* e, void* y, size_t ldy, size_t nc) {
  // Row r's first output: r * ldy elements in (bytes or floats), r elements in (int32 transposed).
  const size_t ysize = kOut == kBytes ? 1 : 4, row = kOut == kI32T ? 1 : ldy;
  auto* yb = static_cast<unsigned char*>(y);
  size_t r = 0;
  for (; r + 3 <= mr; r += 3)
    rows_avx2<3, AU, kOut>(kp, a + r * lda, lda, rowsum + r, panel, e, yb + r * row * ysize, ldy, nc);
  if (mr - r == 2) rows_avx2<2, AU, kOut>(kp, a + r * lda, lda, rowsum + r, panel, e, yb + r * row * ysize, ldy, nc);
  if (mr - r == 1) rows_avx2<1, AU, kOut>(kp, a + r * lda, lda, rowsum + r, panel, e, yb + r * row * ysize, ldy, nc);
}

template <int kOut>
void qgemm_avx2(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                const void* e, void* y, size_t ldy, size_t nc, bool a_unsigned) {
  if (a_unsigned)
    qgemm_avx2_t<true, kOut>(mr, kp, a, lda, rowsum, panel, e, y, ldy, nc);
  else
    qgemm_avx2_t<false, kOut>(mr, kp, a, lda, rowsum, panel, e, y, ldy, nc);
}

// 8 channels of npix pixels: widened x times int16 weights in int32, then requantized.
template <bool XS>
KILN_AVX2_INT void qdw_avx2_t(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, size_t c,
                              const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  for (size_t j0 = 0; j0 < c; j0 += 8) {
    const size_t n = c - j0 < 8 ? c - j0 : 8;
    const int16_t* wb = w + (j0 / kQgemmNr) * taps * kQgemmNr + j0 % kQgemmNr;
    for (size_t p = 0; p < npix; ++p) {
      __m256i acc = _mm256_setzero_si256();
      for (size_t t = 0; t < taps; ++t) {
        const uint8_t* src = x[t] + p * step[t] + j0;
        __m128i x8;
        if (n == 8) {
          x8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
        } else {
          int64_t bytes = 0;
          std::memcpy(&bytes, src, n);
          x8 = _mm_cvtsi64_si128(bytes);
        }
        const __m256i xv = XS ? _mm256_cvtepi8_epi32(x8) : _mm256_cvtepu8_epi32(x8);
        // w zero-extended: each int32 lane holds (w, 0) as int16, so vpmaddwd gives x * w.
        const __m256i wv = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + t * kQgemmNr)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(xv, wv));
      }
      alignas(32) int32_t out[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(out), requantize8(acc, e, j0, 0));
      for (size_t i = 0; i < n; ++i) y[p * c + j0 + i] = static_cast<uint8_t>(out[i]);
    }
  }
}

void qdw_avx2(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed, size_t c,
              const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  if (x_signed)
    qdw_avx2_t<true>(taps, x, step, npix, c, w, e, y);
  else
    qdw_avx2_t<false>(taps, x, step, npix, c, w, e, y);
}

// ---- AVX-512 VNNI: vpdpbusd, 16 channels x up to 8 rows in zmm accumulators ----------------

// GCC 12 warns inside its own AVX-512 headers (their _mm512_undefined_* placeholders) when
// the intrinsics are inlined into a target("avx512...") function: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define KILN_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
// Named accumulators (GCC keeps arrays of vectors on the stack); rows past MR compile away.
#define KILN_QROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

template <size_t MR, bool AU, int kOut>
KILN_VNNI void rows_vnni(size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                         const void* ep, void* yp, size_t ldy, size_t nc) {
#define KILN_INIT(r) __m512i acc##r = _mm512_setzero_si512();
  KILN_QROWS(KILN_INIT)
#undef KILN_INIT
  for (size_t g = 0; g < kp / 4; ++g) {
    const __m512i b = _mm512_loadu_si512(panel + g * 64);
#define KILN_DOT(r)                                                                 \
  if constexpr (MR > r) {                                                           \
    int32_t quad;                                                                   \
    std::memcpy(&quad, a + r * lda + g * 4, sizeof(quad));                          \
    const __m512i av = _mm512_set1_epi32(quad);                                     \
    acc##r = AU ? _mm512_dpbusd_epi32(acc##r, av, b) : _mm512_dpbusd_epi32(acc##r, b, av); \
  }
    KILN_QROWS(KILN_DOT)
#undef KILN_DOT
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << nc) - 1);
  if constexpr (kOut == kI32T) {  // column j of row r at y[j * ldy + r]
    const QgemmI32Epilogue& e = *static_cast<const QgemmI32Epilogue*>(ep);
    const __m512i bias = _mm512_loadu_si512(e.bias);
    const __m512i wz = e.wz ? _mm512_loadu_si512(e.wz) : _mm512_setzero_si512();
    alignas(64) int32_t tmp[MR][kQgemmNr];
#define KILN_STORE_I32(r)                                                                     \
  if constexpr (MR > r) {                                                                     \
    __m512i v = _mm512_add_epi32(acc##r, bias);                                               \
    if (e.wz) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(rowsum[r]), wz));  \
    _mm512_store_si512(tmp[r], v);                                                            \
  }
    KILN_QROWS(KILN_STORE_I32)
#undef KILN_STORE_I32
    int32_t* y = static_cast<int32_t*>(yp);
    for (size_t j = 0; j < nc; ++j)
      for (size_t r = 0; r < MR; ++r) y[j * ldy + r] = tmp[r][j];
    return;
  } else if constexpr (kOut == kF32) {
    const QgemmF32Epilogue& e = *static_cast<const QgemmF32Epilogue*>(ep);
    float* y = static_cast<float*>(yp);
    const __m512i bias = _mm512_loadu_si512(e.bias);
    const __m512i wz = e.wz ? _mm512_loadu_si512(e.wz) : _mm512_setzero_si512();
    const __m512 scale = _mm512_loadu_ps(e.scale);
    const __m512 fbias = e.fbias ? _mm512_loadu_ps(e.fbias) : _mm512_setzero_ps();
    // Explicit rounding: two f32 operations as the unfused graph does them, never one FMA.
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
#define KILN_STORE_F32(r)                                                                     \
  if constexpr (MR > r) {                                                                     \
    __m512i v = _mm512_add_epi32(acc##r, bias);                                               \
    if (e.wz) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(rowsum[r]), wz));  \
    __m512 f = _mm512_mul_round_ps(_mm512_cvtepi32_ps(v), scale, kRound);                     \
    if (e.fbias) f = _mm512_add_round_ps(f, fbias, kRound);                                   \
    _mm512_mask_storeu_ps(y + r * ldy, mask, f);                                              \
  }
    KILN_QROWS(KILN_STORE_F32)
#undef KILN_STORE_F32
    return;
  } else {
  const QgemmEpilogue& e = *static_cast<const QgemmEpilogue*>(ep);
  uint8_t* y = static_cast<uint8_t*>(yp);
  const __m512i bias = _mm512_loadu_si512(e.bias);
  const __m512i wz = e.wz ? _mm512_loadu_si512(e.wz) : _mm512_setzero_si512();
  const __m512 ratio = _mm512_loadu_ps(e.ratio);
  const __m512 flo = _mm512_set1_ps(static_cast<float>(e.lo - e.zp)), fhi = _mm512_set1_ps(static_cast<float>(e.hi - e.zp));
  const __m512i zp = _mm512_set1_epi32(e.zp);
#define KILN_STORE(r)                                                                         \
  if constexpr (MR > r) {                                                                     \
    __m512i v = _mm512_add_epi32(acc##r, bias);                                               \
    if (e.wz) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(rowsum[r]), wz));  \
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), ratio);                                   \
    f = _mm512_min_ps(_mm512_max_ps(f, flo), fhi);                                            \
    const __m128i bytes = _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zp));  \
    _mm_mask_storeu_epi8(y + r * ldy, mask, bytes);                                           \
  }
  KILN_QROWS(KILN_STORE)
#undef KILN_STORE
  }
}
#undef KILN_QROWS

// 16 channels of npix pixels: widened x times int16 weights (vpdpwssd), requantized, stored
// under a mask.
template <bool XS>
KILN_VNNI void qdw_vnni_t(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, size_t c,
                          const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  const __m512 flo = _mm512_set1_ps(static_cast<float>(e.lo - e.zp)), fhi = _mm512_set1_ps(static_cast<float>(e.hi - e.zp));
  const __m512i zp = _mm512_set1_epi32(e.zp);
  for (size_t j0 = 0; j0 < c; j0 += kQgemmNr) {
    const size_t n = c - j0 < kQgemmNr ? c - j0 : kQgemmNr;
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
    const int16_t* wb = w + j0 * taps;
    const __m512i bias = _mm512_loadu_si512(e.bias + j0);
    const __m512 ratio = _mm512_loadu_ps(e.ratio + j0);
    for (size_t p = 0; p < npix; ++p) {
      __m512i acc = bias;
      for (size_t t = 0; t < taps; ++t) {
        const __m128i x8 = _mm_maskz_loadu_epi8(mask, x[t] + p * step[t] + j0);
        const __m512i xv = XS ? _mm512_cvtepi8_epi32(x8) : _mm512_cvtepu8_epi32(x8);
        // w zero-extended: each int32 lane holds (w, 0) as int16, so vpdpwssd adds x * w.
        const __m512i wv = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + t * kQgemmNr)));
        acc = _mm512_dpwssd_epi32(acc, xv, wv);
      }
      __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), ratio);
      f = _mm512_min_ps(_mm512_max_ps(f, flo), fhi);
      _mm_mask_storeu_epi8(y + p * c + j0, mask, _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), zp)));
    }
  }
}

void qdw_vnni(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed, size_t c,
              const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  if (x_signed)
    qdw_vnni_t<true>(taps, x, step, npix, c, w, e, y);
  else
    qdw_vnni_t<false>(taps, x, step, npix, c, w, e, y);
}

using RowsFn = void (*)(size_t, const uint8_t*, size_t, const int32_t*, const uint8_t*, const void*, void*, size_t,
                        size_t);
#define KILN_VNNI_ROWS(AU, F)                                                                                    \
  {                                                                                                              \
    nullptr, rows_vnni<1, AU, F>, rows_vnni<2, AU, F>, rows_vnni<3, AU, F>, rows_vnni<4, AU, F>,                 \
        rows_vnni<5, AU, F>, rows_vnni<6, AU, F>, rows_vnni<7, AU, F>, rows_vnni<8, AU, F>                       \
  }
// [output kind][a_unsigned][rows]
constexpr RowsFn kVnni[3][2][kQgemmMr + 1] = {{KILN_VNNI_ROWS(false, kBytes), KILN_VNNI_ROWS(true, kBytes)},
                                              {KILN_VNNI_ROWS(false, kF32), KILN_VNNI_ROWS(true, kF32)},
                                              {KILN_VNNI_ROWS(false, kI32T), KILN_VNNI_ROWS(true, kI32T)}};
#undef KILN_VNNI_ROWS

template <int kOut>
void qgemm_vnni(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                const void* e, void* y, size_t ldy, size_t nc, bool a_unsigned) {
  kVnni[kOut][a_unsigned][mr](kp, a, lda, rowsum, panel, e, y, ldy, nc);
}

#pragma GCC diagnostic pop

#endif  // __x86_64__


#if defined(__aarch64__)
// ---- arm64 NEON ------------------------------------------------------------------------------
// neondot (ARMv8.2 dot product, sdot: most phone cores since 2017): 16 channels x up to 4 rows
// of int32x4 accumulators per call. sdot multiplies int8 by int8, so the uint8 operand is read
// shifted (x ^ 0x80 = x - 128) and 128 times the other operand's sum is added back, exactly:
// with A unsigned, 128 * the panel's column sums; with B unsigned, 128 * the row's sum.

#define KILN_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

// Requantizes 4 channels (j0..j0+3) of v (bias and zero-point terms still to add) to int32.
inline int32x4_t requantize4_neon(int32x4_t v, const QgemmEpilogue& e, size_t j0, int32_t rowsum) {
  v = vaddq_s32(v, vld1q_s32(e.bias + j0));
  if (e.wz) v = vsubq_s32(v, vmulq_n_s32(vld1q_s32(e.wz + j0), rowsum));
  float32x4_t f = vmulq_f32(vcvtq_f32_s32(v), vld1q_f32(e.ratio + j0));
  f = vminq_f32(vmaxq_f32(f, vdupq_n_f32(static_cast<float>(e.lo - e.zp))), vdupq_n_f32(static_cast<float>(e.hi - e.zp)));
  return vaddq_s32(vcvtnq_s32_f32(f), vdupq_n_s32(e.zp));  // round half to even, as nearbyint
}

// The three epilogues of one row's 16 channels (v[q]: channels 4q..4q+3, exact dot products).
template <int kOut>
inline void store_row_neon(const int32x4_t (&v)[4], size_t r, const int32_t* rowsum, const void* ep, void* yp,
                           size_t ldy, size_t nc) {
  if constexpr (kOut == kBytes) {
    const QgemmEpilogue& e = *static_cast<const QgemmEpilogue*>(ep);
    const int32_t rs = e.wz ? rowsum[r] : 0;
    const int16x8_t lo = vcombine_s16(vmovn_s32(requantize4_neon(v[0], e, 0, rs)), vmovn_s32(requantize4_neon(v[1], e, 4, rs)));
    const int16x8_t hi = vcombine_s16(vmovn_s32(requantize4_neon(v[2], e, 8, rs)), vmovn_s32(requantize4_neon(v[3], e, 12, rs)));
    const uint8x16_t bytes = vreinterpretq_u8_s8(vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)));  // each value's low byte
    uint8_t* y = static_cast<uint8_t*>(yp) + r * ldy;
    if (nc == kQgemmNr) {
      vst1q_u8(y, bytes);
    } else {
      uint8_t tmp[kQgemmNr];
      vst1q_u8(tmp, bytes);
      std::memcpy(y, tmp, nc);
    }
    return;
  }
  int32_t ti[kQgemmNr];
  float tf[kQgemmNr];
  for (size_t q = 0; q < 4; ++q) {
    const int32_t* bias = kOut == kF32 ? static_cast<const QgemmF32Epilogue*>(ep)->bias : static_cast<const QgemmI32Epilogue*>(ep)->bias;
    const int32_t* wz = kOut == kF32 ? static_cast<const QgemmF32Epilogue*>(ep)->wz : static_cast<const QgemmI32Epilogue*>(ep)->wz;
    int32x4_t t = vaddq_s32(v[q], vld1q_s32(bias + 4 * q));
    if (wz) t = vsubq_s32(t, vmulq_n_s32(vld1q_s32(wz + 4 * q), rowsum[r]));
    if constexpr (kOut == kF32) {
      const QgemmF32Epilogue& e = *static_cast<const QgemmF32Epilogue*>(ep);
      float32x4_t f = vmulq_f32(vcvtq_f32_s32(t), vld1q_f32(e.scale + 4 * q));
      asm("" : "+w"(f));  // two roundings, as the unfused graph: never contracted into one fmla
      if (e.fbias) f = vaddq_f32(f, vld1q_f32(e.fbias + 4 * q));
      vst1q_f32(tf + 4 * q, f);
    } else {
      vst1q_s32(ti + 4 * q, t);
    }
  }
  if constexpr (kOut == kF32) {
    std::memcpy(static_cast<float*>(yp) + r * ldy, tf, nc * sizeof(float));
  } else {  // column j of row r at y[j * ldy + r]
    int32_t* y = static_cast<int32_t*>(yp) + r;
    for (size_t j = 0; j < nc; ++j) y[j * ldy] = ti[j];
  }
}

template <size_t MR, bool AU, int kOut>
KILN_DOTPROD void rows_neondot(size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                               const void* ep, void* yp, size_t ldy, size_t nc) {
  int32x4_t acc[MR][4], fix[MR];  // fix: what undoes the shift (per channel or per row)
  int32x4_t colsum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
  for (size_t r = 0; r < MR; ++r) {
    fix[r] = vdupq_n_s32(0);
    for (size_t q = 0; q < 4; ++q) acc[r][q] = vdupq_n_s32(0);
  }
  const int8x16_t ones = vdupq_n_s8(1);
  const uint8x16_t flip = vdupq_n_u8(0x80);
  for (size_t g = 0; g < kp / 4; ++g) {
    int8x16_t b[4];
    for (size_t q = 0; q < 4; ++q) {
      const uint8x16_t raw = vld1q_u8(panel + g * 64 + q * 16);
      b[q] = vreinterpretq_s8_u8(AU ? raw : veorq_u8(raw, flip));
      if constexpr (AU) colsum[q] = vdotq_s32(colsum[q], b[q], ones);
    }
    for (size_t r = 0; r < MR; ++r) {
      uint32_t quad;
      std::memcpy(&quad, a + r * lda + g * 4, sizeof(quad));
      uint8x16_t raw = vreinterpretq_u8_u32(vdupq_n_u32(quad));
      const int8x16_t av = vreinterpretq_s8_u8(AU ? veorq_u8(raw, flip) : raw);
      if constexpr (!AU) fix[r] = vdotq_s32(fix[r], av, ones);  // the row's sum, in every lane
      for (size_t q = 0; q < 4; ++q) acc[r][q] = vdotq_s32(acc[r][q], b[q], av);
    }
  }
  for (size_t r = 0; r < MR; ++r) {
    int32x4_t v[4];
    for (size_t q = 0; q < 4; ++q) v[q] = vaddq_s32(acc[r][q], vshlq_n_s32(AU ? colsum[q] : fix[r], 7));
    store_row_neon<kOut>(v, r, rowsum, ep, yp, ldy, nc);
  }
}

// neon (baseline, any arm64 CPU): vld4 de-interleaves a group's 4 k of 16 channels; each k,
// widened to int16, is multiplied by the row's activation into int32 (vmlal: exact).
template <size_t MR, bool AU, int kOut>
void rows_neon(size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel, const void* ep,
               void* yp, size_t ldy, size_t nc) {
  int32x4_t acc[MR][4];
  for (size_t r = 0; r < MR; ++r)
    for (size_t q = 0; q < 4; ++q) acc[r][q] = vdupq_n_s32(0);
  for (size_t g = 0; g < kp / 4; ++g) {
    const uint8x16x4_t bb = vld4q_u8(panel + g * 64);  // bb.val[k][j]: weight (k, channel j)
    int16x8_t bl[4], bh[4];
    for (size_t k = 0; k < 4; ++k) {
      bl[k] = AU ? vmovl_s8(vget_low_s8(vreinterpretq_s8_u8(bb.val[k]))) : vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(bb.val[k])));
      bh[k] = AU ? vmovl_s8(vget_high_s8(vreinterpretq_s8_u8(bb.val[k]))) : vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(bb.val[k])));
    }
    for (size_t r = 0; r < MR; ++r) {
      const uint8_t* ar = a + r * lda + g * 4;
      for (size_t k = 0; k < 4; ++k) {
        const int16_t av = AU ? int16_t{ar[k]} : int16_t{static_cast<int8_t>(ar[k])};
        acc[r][0] = vmlal_n_s16(acc[r][0], vget_low_s16(bl[k]), av);
        acc[r][1] = vmlal_n_s16(acc[r][1], vget_high_s16(bl[k]), av);
        acc[r][2] = vmlal_n_s16(acc[r][2], vget_low_s16(bh[k]), av);
        acc[r][3] = vmlal_n_s16(acc[r][3], vget_high_s16(bh[k]), av);
      }
    }
  }
  for (size_t r = 0; r < MR; ++r) store_row_neon<kOut>(acc[r], r, rowsum, ep, yp, ldy, nc);
}

template <bool kDot, size_t MR, bool AU, int kOut>
void rows_arm64(size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel, const void* ep,
                void* yp, size_t ldy, size_t nc) {
  if constexpr (kDot)
    rows_neondot<MR, AU, kOut>(kp, a, lda, rowsum, panel, ep, yp, ldy, nc);
  else
    rows_neon<MR, AU, kOut>(kp, a, lda, rowsum, panel, ep, yp, ldy, nc);
}

template <bool kDot, bool AU, int kOut>
void qgemm_arm64_t(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                   const void* e, void* y, size_t ldy, size_t nc) {
  // Row r's first output: r * ldy elements in (bytes or floats), r elements in (int32 transposed).
  const size_t ysize = kOut == kBytes ? 1 : 4, row = kOut == kI32T ? 1 : ldy;
  auto* yb = static_cast<unsigned char*>(y);
  size_t r = 0;
  for (; r + 4 <= mr; r += 4)
    rows_arm64<kDot, 4, AU, kOut>(kp, a + r * lda, lda, rowsum + r, panel, e, yb + r * row * ysize, ldy, nc);
  auto* y0 = yb + r * row * ysize;
  if (mr - r == 3) rows_arm64<kDot, 3, AU, kOut>(kp, a + r * lda, lda, rowsum + r, panel, e, y0, ldy, nc);
  if (mr - r == 2) rows_arm64<kDot, 2, AU, kOut>(kp, a + r * lda, lda, rowsum + r, panel, e, y0, ldy, nc);
  if (mr - r == 1) rows_arm64<kDot, 1, AU, kOut>(kp, a + r * lda, lda, rowsum + r, panel, e, y0, ldy, nc);
}

template <bool kDot, int kOut>
void qgemm_arm64(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                 const void* e, void* y, size_t ldy, size_t nc, bool a_unsigned) {
  if (a_unsigned)
    qgemm_arm64_t<kDot, true, kOut>(mr, kp, a, lda, rowsum, panel, e, y, ldy, nc);
  else
    qgemm_arm64_t<kDot, false, kOut>(mr, kp, a, lda, rowsum, panel, e, y, ldy, nc);
}

// Depthwise (baseline NEON, any arm64): 16 channels of npix pixels, x widened to int16 times the
// int16 weights into int32 (vmlal), then requantized.
template <bool XS>
void qdw_neon_t(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, size_t c, const int16_t* w,
                const QgemmEpilogue& e, uint8_t* y) {
  for (size_t j0 = 0; j0 < c; j0 += kQgemmNr) {
    const size_t n = c - j0 < kQgemmNr ? c - j0 : kQgemmNr;
    const int16_t* wb = w + j0 * taps;
    for (size_t p = 0; p < npix; ++p) {
      int32x4_t acc[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      for (size_t t = 0; t < taps; ++t) {
        uint8_t buf[kQgemmNr] = {};
        const uint8_t* src = x[t] + p * step[t] + j0;
        if (n < kQgemmNr) src = static_cast<const uint8_t*>(std::memcpy(buf, src, n));
        const uint8x16_t raw = vld1q_u8(src);
        const int16x8_t xl = XS ? vmovl_s8(vget_low_s8(vreinterpretq_s8_u8(raw))) : vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(raw)));
        const int16x8_t xh = XS ? vmovl_s8(vget_high_s8(vreinterpretq_s8_u8(raw))) : vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(raw)));
        const int16x8_t wl = vld1q_s16(wb + t * kQgemmNr), wh = vld1q_s16(wb + t * kQgemmNr + 8);
        acc[0] = vmlal_s16(acc[0], vget_low_s16(xl), vget_low_s16(wl));
        acc[1] = vmlal_s16(acc[1], vget_high_s16(xl), vget_high_s16(wl));
        acc[2] = vmlal_s16(acc[2], vget_low_s16(xh), vget_low_s16(wh));
        acc[3] = vmlal_s16(acc[3], vget_high_s16(xh), vget_high_s16(wh));
      }
      uint8_t out[kQgemmNr];
      QgemmEpilogue shifted = e;  // requantize4_neon reads bias/ratio at j0 + 4q
      shifted.bias = e.bias + j0, shifted.ratio = e.ratio + j0, shifted.wz = nullptr;
      for (size_t q = 0; q < 4; ++q) {
        const int32x4_t v = requantize4_neon(acc[q], shifted, 4 * q, 0);
        int32_t lanes[4];
        vst1q_s32(lanes, v);
        for (size_t i = 0; i < 4; ++i) out[4 * q + i] = static_cast<uint8_t>(lanes[i]);
      }
      std::memcpy(y + p * c + j0, out, n);
    }
  }
}

void qdw_neon(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed, size_t c,
              const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  if (x_signed)
    qdw_neon_t<true>(taps, x, step, npix, c, w, e, y);
  else
    qdw_neon_t<false>(taps, x, step, npix, c, w, e, y);
}

#endif  // __aarch64__

// ---- the table (isa.h) -----------------------------------------------------------------------

// e and y: a QgemmEpilogue and bytes, or (the _f32 entries) a QgemmF32Epilogue and floats.
using QgemmFn = void (*)(size_t, size_t, const uint8_t*, size_t, const int32_t*, const uint8_t*, const void*, void*,
                         size_t, size_t, bool);

using QdwFn = void (*)(size_t, const uint8_t* const*, const size_t*, size_t, bool, size_t, const int16_t*,
                       const QgemmEpilogue&, uint8_t*);

struct Impl {
  const char* name;
  bool (*available)();
  QgemmFn run, run_f32, run_i32t;
  QdwFn dw;
};

// Best first; the last runs anywhere.
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx512vnni",
     [] {
       return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
     },
     qgemm_vnni<kBytes>, qgemm_vnni<kF32>, qgemm_vnni<kI32T>, qdw_vnni},
    {"avx2", [] { return __builtin_cpu_supports("avx2") != 0; }, qgemm_avx2<kBytes>, qgemm_avx2<kF32>,
     qgemm_avx2<kI32T>, qdw_avx2},
#endif
#if defined(__aarch64__)
    {"neondot", cpu_has_neon_dotprod, qgemm_arm64<true, kBytes>, qgemm_arm64<true, kF32>, qgemm_arm64<true, kI32T>,
     qdw_neon},
    {"neon", [] { return true; }, qgemm_arm64<false, kBytes>, qgemm_arm64<false, kF32>, qgemm_arm64<false, kI32T>,
     qdw_neon},
#endif
    {"plain", [] { return true; }, qgemm_plain_t<kBytes>, qgemm_plain_t<kF32>, qgemm_plain_t<kI32T>, qdw_plain}};

const Impl& chosen() {
  static const Impl* impl = [] {
    for (const Impl& i : kImpls)
      if (i.available() && isa_allowed(i.name)) return &i;
    return &kImpls[sizeof(kImpls) / sizeof(kImpls[0]) - 1];
  }();
  return *impl;
}

}  // namespace

void qgemm(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
           const QgemmEpilogue& e, uint8_t* y, size_t ldy, size_t nc, bool a_unsigned) {
  if (mr == 0 || nc == 0) return;
  chosen().run(mr, kp, a, lda, rowsum, panel, &e, y, ldy, nc, a_unsigned);
}

void qgemm_f32(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
               const QgemmF32Epilogue& e, float* y, size_t ldy, size_t nc, bool a_unsigned) {
  if (mr == 0 || nc == 0) return;
  chosen().run_f32(mr, kp, a, lda, rowsum, panel, &e, y, ldy, nc, a_unsigned);
}

void qdw_row(size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed, size_t c,
             const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  if (npix > 0 && c > 0) chosen().dw(taps, x, step, npix, x_signed, c, w, e, y);
}

void qgemm_pack_b(const uint8_t* b, size_t k, size_t n, uint8_t* panels) {
  const size_t kp = qgemm_k_padded(k), blocks = (n + kQgemmNr - 1) / kQgemmNr;
  std::memset(panels, 0, blocks * qgemm_panel_bytes(kp));
  for (size_t kk = 0; kk < k; ++kk)
    for (size_t j = 0; j < n; ++j)
      panels[(j / kQgemmNr) * qgemm_panel_bytes(kp) + qgemm_panel_index(kk, j % kQgemmNr)] = b[kk * n + j];
}

const char* qgemm_isa() { return chosen().name; }

bool qdw_row_on(const char* isa, size_t taps, const uint8_t* const* x, const size_t* step, size_t npix, bool x_signed,
                size_t c, const int16_t* w, const QgemmEpilogue& e, uint8_t* y) {
  for (const Impl& i : kImpls)
    if (std::strcmp(i.name, isa) == 0 && i.available()) {
      if (npix > 0 && c > 0) i.dw(taps, x, step, npix, x_signed, c, w, e, y);
      return true;
    }
  return false;
}

bool qgemm_on(const char* isa, size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum,
              const uint8_t* panel, const QgemmEpilogue& e, uint8_t* y, size_t ldy, size_t nc, bool a_unsigned) {
  for (const Impl& i : kImpls)
    if (std::strcmp(i.name, isa) == 0 && i.available()) {
      if (mr > 0 && nc > 0) i.run(mr, kp, a, lda, rowsum, panel, &e, y, ldy, nc, a_unsigned);
      return true;
    }
  return false;
}

void qgemm_i32t(size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum, const uint8_t* panel,
                const QgemmI32Epilogue& e, int32_t* y, size_t ldy, size_t nc, bool a_unsigned) {
  if (mr == 0 || nc == 0) return;
  chosen().run_i32t(mr, kp, a, lda, rowsum, panel, &e, y, ldy, nc, a_unsigned);
}

bool qgemm_i32t_on(const char* isa, size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum,
                   const uint8_t* panel, const QgemmI32Epilogue& e, int32_t* y, size_t ldy, size_t nc, bool a_unsigned) {
  for (const Impl& i : kImpls)
    if (std::strcmp(i.name, isa) == 0 && i.available()) {
      if (mr > 0 && nc > 0) i.run_i32t(mr, kp, a, lda, rowsum, panel, &e, y, ldy, nc, a_unsigned);
      return true;
    }
  return false;
}

bool qgemm_f32_on(const char* isa, size_t mr, size_t kp, const uint8_t* a, size_t lda, const int32_t* rowsum,
                  const uint8_t* panel, const QgemmF32Epilogue& e, float* y, size_t ldy, size_t nc, bool a_unsigned) {
  for (const Impl& i : kImpls)
    if (std::strcmp(i.name, isa) == 0 && i.available()) {
      if (mr > 0 && nc > 0) i.run_f32(mr, kp, a, lda, rowsum, panel, &e, y, ldy, nc, a_unsigned);
      return true;
    }
  return false;
}

}  // namespace kiln::simd
