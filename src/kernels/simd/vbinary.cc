// vbinary.h: one source loop per operation, instantiated for each row of the ISA table under
// that row's target, so the compiler vectorizes it 16, 8 or 4 (SSE2, NEON) lanes wide.
#include "kernels/simd/vbinary.h"

#include <cmath>

#include "kernels/simd/isa.h"

namespace kiln::simd {
namespace {

#define KILN_INLINE inline __attribute__((always_inline))

template <BinaryKind K>
KILN_INLINE float apply(float a, float b) {
  if constexpr (K == BinaryKind::kAdd) return a + b;
  if constexpr (K == BinaryKind::kSub) return a - b;
  if constexpr (K == BinaryKind::kMul) return a * b;
  if constexpr (K == BinaryKind::kDiv) return a / b;
  // NaN in either position wins; otherwise std::max / std::min (their order for +-0).
  if constexpr (K == BinaryKind::kMax) return a != a ? a : (b != b ? b : (a < b ? b : a));
  if constexpr (K == BinaryKind::kMin) return a != a ? a : (b != b ? b : (b < a ? b : a));
  return 0.f;
}

// kernels::clamp_keep_nan: a comparison with NaN is false, so NaN passes both selects.
KILN_INLINE float clamp1(float v, float lo, float hi) {
  const float t = v < lo ? lo : v;
  return t > hi ? hi : t;
}

// One row of n outputs; SA/SB: the operand advances along the row (1) or repeats (0).
template <BinaryKind K, bool SA, bool SB, bool kClamp>
KILN_INLINE void row(const float* __restrict a, const float* __restrict b, float* y, size_t n, float lo, float hi) {
  if (y == a || y == b) {  // in place: the same loop, without the no-alias promise
    for (size_t i = 0; i < n; ++i) {
      const float v = apply<K>(a[SA ? i : 0], b[SB ? i : 0]);
      y[i] = kClamp ? clamp1(v, lo, hi) : v;
    }
    return;
  }
  float* __restrict out = y;
  for (size_t i = 0; i < n; ++i) {
    const float v = apply<K>(a[SA ? i : 0], b[SB ? i : 0]);
    out[i] = kClamp ? clamp1(v, lo, hi) : v;
  }
}

template <BinaryKind K, bool kClamp>
KILN_INLINE void rows_of(const float* a, size_t lda, size_t sa, const float* b, size_t ldb, size_t sb, float* y,
                         size_t ldy, size_t rows, size_t cols, float lo, float hi) {
  for (size_t r = 0; r < rows; ++r, a += lda, b += ldb, y += ldy) {
    if (sa && sb) row<K, true, true, kClamp>(a, b, y, cols, lo, hi);
    else if (sa) row<K, true, false, kClamp>(a, b, y, cols, lo, hi);
    else if (sb) row<K, false, true, kClamp>(a, b, y, cols, lo, hi);
    else row<K, false, false, kClamp>(a, b, y, cols, lo, hi);
  }
}

template <bool kClamp>
KILN_INLINE void rows_op(BinaryKind op, const float* a, size_t lda, size_t sa, const float* b, size_t ldb, size_t sb,
                         float* y, size_t ldy, size_t rows, size_t cols, float lo, float hi) {
  switch (op) {
    case BinaryKind::kAdd: return rows_of<BinaryKind::kAdd, kClamp>(a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
    case BinaryKind::kSub: return rows_of<BinaryKind::kSub, kClamp>(a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
    case BinaryKind::kMul: return rows_of<BinaryKind::kMul, kClamp>(a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
    case BinaryKind::kDiv: return rows_of<BinaryKind::kDiv, kClamp>(a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
    case BinaryKind::kMax: return rows_of<BinaryKind::kMax, kClamp>(a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
    case BinaryKind::kMin: return rows_of<BinaryKind::kMin, kClamp>(a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
  }
}

KILN_INLINE void binary_body(BinaryKind op, const float* a, size_t lda, size_t sa, const float* b, size_t ldb,
                             size_t sb, float* y, size_t ldy, size_t rows, size_t cols, float lo, float hi) {
  if (lo == -INFINITY && hi == INFINITY) rows_op<false>(op, a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
  else rows_op<true>(op, a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
}

KILN_INLINE void clamp_body(const float* x, float* y, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; ++i) y[i] = clamp1(x[i], lo, hi);
}

KILN_INLINE void accumulate_body(const float* x, size_t ld, size_t rows, size_t cols, float* __restrict acc) {
  for (size_t r = 0; r < rows; ++r, x += ld)
    for (size_t k = 0; k < cols; ++k) acc[k] += x[k];
}

// Each row: the same bodies under its target.
#define KILN_VBINARY_ROW(suffix, attr)                                                                             \
  attr void binary_##suffix(BinaryKind op, const float* a, size_t lda, size_t sa, const float* b, size_t ldb,      \
                            size_t sb, float* y, size_t ldy, size_t rows, size_t cols, float lo, float hi) {       \
    binary_body(op, a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);                                           \
  }                                                                                                                \
  attr void clamp_##suffix(const float* x, float* y, size_t n, float lo, float hi) { clamp_body(x, y, n, lo, hi); } \
  attr void accumulate_##suffix(const float* x, size_t ld, size_t rows, size_t cols, float* acc) {                 \
    accumulate_body(x, ld, rows, cols, acc);                                                                       \
  }

#if defined(__x86_64__)
KILN_VBINARY_ROW(avx512, __attribute__((target("avx512f,avx512vl,avx2,fma"))))
KILN_VBINARY_ROW(avx2, __attribute__((target("avx2,fma"))))
#endif
KILN_VBINARY_ROW(plain, )

struct Impl {
  const char* name;
  bool (*available)();
  void (*binary)(BinaryKind, const float*, size_t, size_t, const float*, size_t, size_t, float*, size_t, size_t,
                 size_t, float, float);
  void (*clamp)(const float*, float*, size_t, float, float);
  void (*accumulate)(const float*, size_t, size_t, size_t, float*);
};

const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx512", cpu_has_avx512f, binary_avx512, clamp_avx512, accumulate_avx512},
    {"avx2", cpu_has_avx2, binary_avx2, clamp_avx2, accumulate_avx2},
#endif
    {"plain", [] { return true; }, binary_plain, clamp_plain, accumulate_plain}};

const Impl& chosen() {
  static const Impl* impl = pick_isa(kImpls);
  return *impl;
}

}  // namespace

void binary_rows(BinaryKind op, const float* a, size_t lda, size_t sa, const float* b, size_t ldb, size_t sb,
                 float* y, size_t ldy, size_t rows, size_t cols, float lo, float hi) {
  if (rows > 0 && cols > 0) chosen().binary(op, a, lda, sa, b, ldb, sb, y, ldy, rows, cols, lo, hi);
}

void clamp(const float* x, float* y, size_t n, float lo, float hi) { chosen().clamp(x, y, n, lo, hi); }

void accumulate_rows(const float* x, size_t ld, size_t rows, size_t cols, float* acc) {
  if (rows > 0 && cols > 0) chosen().accumulate(x, ld, rows, cols, acc);
}

const char* vbinary_isa() { return chosen().name; }

}  // namespace kiln::simd
