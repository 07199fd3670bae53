#include "kernels/simd/int8_gemm.h"

#include "kernels/simd/isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstring>

namespace kiln::simd {

namespace {

// ---- plain C++: any CPU ------------------------------------------------------------------

void gemm_plain(const int16_t* a, const int16_t* b, size_t k, size_t n, int32_t* c, size_t ldc, size_t r0, size_t r1) {
  const size_t kp = int8_gemm_k_pairs(k);
  for (size_t r = r0; r < r1; ++r) {
    const int16_t* ar = a + r * 2 * kp;
    for (size_t jb = 0; jb * kInt8GemmCols < n; ++jb) {
      int32_t acc[kInt8GemmCols] = {};
      const int16_t* bb = b + jb * kp * 2 * kInt8GemmCols;
      for (size_t kk = 0; kk < kp; ++kk) {
        const int32_t a0 = ar[2 * kk], a1 = ar[2 * kk + 1];
        const int16_t* bp = bb + kk * 2 * kInt8GemmCols;
        for (size_t j = 0; j < kInt8GemmCols; ++j) acc[j] += a0 * bp[2 * j] + a1 * bp[2 * j + 1];
      }
      const size_t cols = n - jb * kInt8GemmCols < kInt8GemmCols ? n - jb * kInt8GemmCols : kInt8GemmCols;
      std::memcpy(c + r * ldc + jb * kInt8GemmCols, acc, cols * sizeof(int32_t));
    }
  }
}

#if defined(__x86_64__)
// ---- AVX2: vpmaddwd over k pairs, 4 rows x 16 columns per step --------------------------

#define KILN_AVX2_INT __attribute__((target("avx2")))

template <int R>
KILN_AVX2_INT void block_avx2(const int16_t* a, size_t a_stride, const int16_t* bb, size_t kp, int32_t* c, size_t ldc,
                              size_t cols) {
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (size_t kk = 0; kk < kp; ++kk) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bb + kk * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bb + kk * 32 + 16));
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * a_stride + 2 * kk, sizeof(pair));
      const __m256i av = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int r = 0; r < R; ++r) {
    if (cols == kInt8GemmCols) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc), acc[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8), acc[r][1]);
    } else {
      alignas(32) int32_t tmp[kInt8GemmCols];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), acc[r][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), acc[r][1]);
      std::memcpy(c + r * ldc, tmp, cols * sizeof(int32_t));
    }
  }
}

KILN_AVX2_INT void gemm_avx2(const int16_t* a, const int16_t* b, size_t k, size_t n, int32_t* c, size_t ldc, size_t r0,
                             size_t r1) {
  const size_t kp = int8_gemm_k_pairs(k), a_stride = 2 * kp;
  for (size_t jb = 0; jb * kInt8GemmCols < n; ++jb) {
    const int16_t* bb = b + jb * kp * 2 * kInt8GemmCols;
    const size_t cols = n - jb * kInt8GemmCols < kInt8GemmCols ? n - jb * kInt8GemmCols : kInt8GemmCols;
    int32_t* cj = c + jb * kInt8GemmCols;
    size_t r = r0;
    for (; r + 4 <= r1; r += 4) block_avx2<4>(a + r * a_stride, a_stride, bb, kp, cj + r * ldc, ldc, cols);
    switch (r1 - r) {
      case 3: block_avx2<3>(a + r * a_stride, a_stride, bb, kp, cj + r * ldc, ldc, cols); break;
      case 2: block_avx2<2>(a + r * a_stride, a_stride, bb, kp, cj + r * ldc, ldc, cols); break;
      case 1: block_avx2<1>(a + r * a_stride, a_stride, bb, kp, cj + r * ldc, ldc, cols); break;
      default: break;
    }
  }
}

#endif  // __x86_64__

// ---- the table ---------------------------------------------------------------------------

using GemmFn = void (*)(const int16_t*, const int16_t*, size_t, size_t, int32_t*, size_t, size_t, size_t);

struct Impl {
  const char* name;
  bool (*available)();
  GemmFn run;
};

bool always() { return true; }

// Best first; the last runs anywhere.
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx2", [] { return __builtin_cpu_supports("avx2") != 0; }, gemm_avx2},
#endif
    {"plain", always, gemm_plain}};

const Impl& chosen() {
  static const Impl* impl = [] {
    for (const Impl& i : kImpls)
      if (i.available() && isa_allowed(i.name)) return &i;
    return &kImpls[sizeof(kImpls) / sizeof(kImpls[0]) - 1];
  }();
  return *impl;
}

}  // namespace

void int8_gemm(const int16_t* a, const int16_t* b, size_t k, size_t n, int32_t* c, size_t ldc, size_t row_begin,
               size_t row_end) {
  if (row_end <= row_begin || n == 0) return;
  chosen().run(a, b, k, n, c, ldc, row_begin, row_end);
}

const char* int8_gemm_isa() { return chosen().name; }

bool int8_gemm_on(const char* isa, const int16_t* a, const int16_t* b, size_t k, size_t n, int32_t* c, size_t ldc,
                  size_t row_begin, size_t row_end) {
  for (const Impl& i : kImpls)
    if (std::strcmp(i.name, isa) == 0 && i.available()) {
      if (row_end > row_begin && n > 0) i.run(a, b, k, n, c, ldc, row_begin, row_end);
      return true;
    }
  return false;
}

}  // namespace kiln::simd
