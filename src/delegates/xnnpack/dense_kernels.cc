#include "delegates/xnnpack/dense_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln::delegates::xnnpack::dense_kernels {

// The same contract in plain C++ (any CPU; the compiler vectorizes the column loop): what
// batched MatMuls run where AVX2 is missing (convolutions go to XNNPACK there).
template <size_t MR, bool kMaskedB>
void microkernel_plain(size_t taps, const uint16_t* tap_ids, size_t c, const float* const* a, size_t a_step,
                       const float* panel, size_t ldb, const float* bias, float* const* y, size_t nc, float lo, float hi) {
  float acc[MR][kNr];
  for (size_t r = 0; r < MR; ++r)
    for (size_t j = 0; j < kNr; ++j) acc[r][j] = bias[j];
  const size_t cols = kMaskedB ? nc : kNr;  // a masked panel is read no further than its columns
  for (size_t t = 0; t < taps; ++t) {
    const float* w = panel + (tap_ids ? tap_ids[t] : t) * c * ldb;
    for (size_t k = 0; k < c; ++k, w += ldb)
      for (size_t r = 0; r < MR; ++r) {
        const float v = a_step ? a[r][t * a_step + k] : a[t * MR + r][k];
        for (size_t j = 0; j < cols; ++j) acc[r][j] += v * w[j];
      }
  }
  for (size_t r = 0; r < MR; ++r)
    for (size_t j = 0; j < nc; ++j) y[r][j] = std::isnan(acc[r][j]) ? acc[r][j] : std::min(hi, std::max(lo, acc[r][j]));
}

// [masked B][rows]
const Microkernel kPlainKernels[2][kMr + 1] = {
    {nullptr, microkernel_plain<1, false>, microkernel_plain<2, false>, microkernel_plain<3, false>,
     microkernel_plain<4, false>, microkernel_plain<5, false>, microkernel_plain<6, false>},
    {nullptr, microkernel_plain<1, true>, microkernel_plain<2, true>, microkernel_plain<3, true>,
     microkernel_plain<4, true>, microkernel_plain<5, true>, microkernel_plain<6, true>}};

#if defined(__x86_64__)
// acc[r] (16 output channels of pixel r) += sum over taps and channels of a[tap][r][k] *
// panel[tap*c + k][0..16); then bias, clamp, store the first `nc` channels. 2*MR
// accumulators + 2 weight vectors + 1 broadcast stay in the 16 ymm registers.
// Named accumulators (not arrays: GCC keeps arrays of vectors on the stack and stores them
// every iteration); rows past MR compile away.
#define KILN_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

// kMaskedB: the panel is the raw right operand of a MatMul (row stride ldb) and this block
// has nc < 16 columns, so its loads are masked (never past the operand's end). NH = 1: the
// block's first 8 channels only (nc <= 8: a layer of 8 or fewer output channels), half the FMAs
// of a full block. NH = 3: a block and the next one's first 8 channels (its panel
// `panel_stride` floats after, 16 < nc <= 24: the last 24 channels of a layer of 24, 40, 72,
// 88, ...), 12 accumulators at MR <= 4.
template <size_t MR, bool kMaskedB, size_t NH>
__attribute__((target("avx2,fma"), always_inline)) inline void tile256(size_t taps, const uint16_t* tap_ids, size_t c,
                                                                       const float* const* a, size_t a_step,
                                                                       const float* panel, size_t ldb,
                                                                       size_t panel_stride, const float* bias,
                                                                       float* const* y, size_t nc, float lo, float hi) {
  static_assert(NH >= 1 && NH <= 3 && MR * NH <= 2 * kMr && !(kMaskedB && NH == 3));
  const __m256 b0 = _mm256_loadu_ps(bias), b1 = _mm256_loadu_ps(bias + 8);
  const __m256 b2 = NH == 3 ? _mm256_loadu_ps(bias + 16) : b0;
  alignas(32) static const int32_t kBits[24] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                0,  0,  0,  0,  0,  0,  0,  0};
  const __m256i m0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 16 - std::min<size_t>(nc, 8)));
  const __m256i m1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 16 - (nc > 8 ? nc - 8 : 0)));
  const __m256i m2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kBits + 16 - (nc > 16 ? nc - 16 : 0)));
#define KILN_INIT(r) __m256 lo##r = b0, hi##r = b1, th##r = b2;
  KILN_ROWS(KILN_INIT)
#undef KILN_INIT
  for (size_t t = 0; t < taps; ++t) {
    const float* w = panel + (tap_ids ? tap_ids[t] : t) * c * ldb;  // taps may skip (see run_task)
    const float* const* at = a_step ? a : a + t * MR;
    const size_t shift = t * a_step;
#define KILN_PTR(r) const float* a##r = MR > r ? at[r] + shift : nullptr;
    KILN_ROWS(KILN_PTR)
#undef KILN_PTR
#pragma GCC unroll 4
    for (size_t k = 0; k < c; ++k) {
      const __m256 w0 = kMaskedB ? _mm256_maskload_ps(w, m0) : _mm256_loadu_ps(w);
      __m256 w1 = w0, w2 = w0;
      if constexpr (NH >= 2) w1 = kMaskedB ? _mm256_maskload_ps(w + 8, m1) : _mm256_loadu_ps(w + 8);
      if constexpr (NH == 3) w2 = _mm256_loadu_ps(w + panel_stride);
      w += ldb;
#define KILN_FMA(r)                                               \
  if constexpr (MR > r) {                                         \
    const __m256 v = _mm256_broadcast_ss(a##r + k);               \
    lo##r = _mm256_fmadd_ps(v, w0, lo##r);                        \
    if constexpr (NH >= 2) hi##r = _mm256_fmadd_ps(v, w1, hi##r); \
    if constexpr (NH == 3) th##r = _mm256_fmadd_ps(v, w2, th##r); \
  }
      KILN_ROWS(KILN_FMA)
#undef KILN_FMA
    }
  }
  // min(hi, max(lo, v)) with v second: maxps/minps return the second operand when either is
  // NaN, so a NaN accumulator stays NaN through the fused clamp.
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
#define KILN_CLAMP(v) _mm256_min_ps(vhi, _mm256_max_ps(vlo, v))
#define KILN_STORE(r)                                                         \
  if constexpr (MR > r) {                                                    \
    if (nc == NH * 8) {                                                      \
      _mm256_storeu_ps(y[r], KILN_CLAMP(lo##r));                             \
      if constexpr (NH >= 2) _mm256_storeu_ps(y[r] + 8, KILN_CLAMP(hi##r));  \
      if constexpr (NH == 3) _mm256_storeu_ps(y[r] + 16, KILN_CLAMP(th##r)); \
    } else {                                                                 \
      _mm256_maskstore_ps(y[r], m0, KILN_CLAMP(lo##r));                      \
      if constexpr (NH >= 2) _mm256_maskstore_ps(y[r] + 8, m1, KILN_CLAMP(hi##r));  \
      if constexpr (NH == 3) _mm256_maskstore_ps(y[r] + 16, m2, KILN_CLAMP(th##r)); \
    }                                                                        \
  }
  KILN_ROWS(KILN_STORE)
#undef KILN_STORE
#undef KILN_CLAMP
}

template <size_t MR, bool kMaskedB, size_t NH = 2>
__attribute__((target("avx2,fma"))) void microkernel(size_t taps, const uint16_t* tap_ids, size_t c,
                                                     const float* const* a, size_t a_step, const float* panel,
                                                     size_t ldb, const float* bias, float* const* y, size_t nc, float lo,
                                                     float hi) {
  tile256<MR, kMaskedB, NH>(taps, tap_ids, c, a, a_step, panel, ldb, 0, bias, y, nc, lo, hi);
}

// A block and a half (the PairKernel contract, 16 < nc <= 24), MR <= 4.
template <size_t MR>
__attribute__((target("avx2,fma"))) void microkernel24(size_t taps, const uint16_t* tap_ids, size_t c,
                                                       const float* const* a, size_t a_step, const float* panel,
                                                       size_t ldb, size_t panel_stride, const float* bias,
                                                       float* const* y, size_t nc, float lo, float hi) {
  tile256<MR, false, 3>(taps, tap_ids, c, a, a_step, panel, ldb, panel_stride, bias, y, nc, lo, hi);
}
#undef KILN_ROWS

// [rows]: a block and a half, at most kOneAndHalfRows rows
const PairKernel kAvx2OneAndHalf[kOneAndHalfRows + 1] = {nullptr, microkernel24<1>, microkernel24<2>,
                                                             microkernel24<3>, microkernel24<4>};

// [masked B][rows]: the first 8 channels of a block
const Microkernel kAvx2Half[2][kMr + 1] = {
    {nullptr, microkernel<1, false, 1>, microkernel<2, false, 1>, microkernel<3, false, 1>, microkernel<4, false, 1>,
     microkernel<5, false, 1>, microkernel<6, false, 1>},
    {nullptr, microkernel<1, true, 1>, microkernel<2, true, 1>, microkernel<3, true, 1>, microkernel<4, true, 1>,
     microkernel<5, true, 1>, microkernel<6, true, 1>}};

// [masked B][rows]
const Microkernel kAvx2Kernels[2][kMr + 1] = {
    {nullptr, microkernel<1, false>, microkernel<2, false>, microkernel<3, false>, microkernel<4, false>,
     microkernel<5, false>, microkernel<6, false>},
    {nullptr, microkernel<1, true>, microkernel<2, true>, microkernel<3, true>, microkernel<4, true>,
     microkernel<5, true>, microkernel<6, true>}};

// AVX-512: MR rows of NB blocks of 16 channels, one zmm accumulator per row and block (12 of
// the 32 registers for 6 x 2), the weights' rows masked to the block's channels where kMaskedB
// (a MatMul's raw right operand), stores masked to nc. On CPUs with two 512-bit FMA units
// this doubles the AVX2 row's peak; where 512-bit operations are split in two (AMD Zen 4), it
// halves the instructions per FLOP (the loop, the clamp, the stores and the calls).
// (GCC 12 warns inside its own AVX-512 headers, their _mm512_undefined_* placeholders, when
// the intrinsics are inlined into a target("avx512...") function: a false positive.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define KILN_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
// Up to two tiles' rows (kWideRows, the single-block wide kernel); rows past MR compile away.
#define KILN_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
template <size_t MR, bool kMaskedB, size_t NB>
KILN_AVX512 void microkernel512(size_t taps, const uint16_t* tap_ids, size_t c, const float* const* a, size_t a_step,
                                const float* panel, size_t panel_stride, size_t ldb, const float* bias,
                                float* const* y, size_t nc, float lo, float hi) {
  const __mmask16 m0 = nc >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nc) - 1);
  const __mmask16 m1 = NB == 1 || nc <= 16 ? __mmask16(0) : nc >= 32 ? __mmask16(0xFFFF) : __mmask16((1u << (nc - 16)) - 1);
  const __m512 b0 = _mm512_maskz_loadu_ps(m0, bias);
  const __m512 b1 = NB == 2 ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#define KILN_INIT(r) __m512 lo##r = b0, hi##r = b1;
  KILN_ROWS(KILN_INIT)
#undef KILN_INIT
  for (size_t t = 0; t < taps; ++t) {
    const float* w = panel + (tap_ids ? tap_ids[t] : t) * c * ldb;
    const float* const* at = a_step ? a : a + t * MR;
    const size_t shift = t * a_step;
#define KILN_PTR(r) const float* a##r = MR > r ? at[r] + shift : nullptr;
    KILN_ROWS(KILN_PTR)
#undef KILN_PTR
#pragma GCC unroll 4
    for (size_t k = 0; k < c; ++k) {
      const __m512 w0 = kMaskedB ? _mm512_maskz_loadu_ps(m0, w) : _mm512_loadu_ps(w);
      __m512 w1 = w0;
      if constexpr (NB == 2) w1 = kMaskedB ? _mm512_maskz_loadu_ps(m1, w + panel_stride) : _mm512_loadu_ps(w + panel_stride);
      w += ldb;
#define KILN_FMA(r)                                             \
  if constexpr (MR > r) {                                       \
    const __m512 v = _mm512_set1_ps(a##r[k]);                   \
    lo##r = _mm512_fmadd_ps(v, w0, lo##r);                      \
    if constexpr (NB == 2) hi##r = _mm512_fmadd_ps(v, w1, hi##r); \
  }
      KILN_ROWS(KILN_FMA)
#undef KILN_FMA
    }
  }
  // max/min return their second operand when either is NaN: a NaN accumulator stays NaN.
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#define KILN_STORE(r)                                                                     \
  if constexpr (MR > r) {                                                                 \
    _mm512_mask_storeu_ps(y[r], m0, _mm512_min_ps(vhi, _mm512_max_ps(vlo, lo##r)));       \
    if constexpr (NB == 2)                                                                \
      _mm512_mask_storeu_ps(y[r] + 16, m1, _mm512_min_ps(vhi, _mm512_max_ps(vlo, hi##r))); \
  }
  KILN_ROWS(KILN_STORE)
#undef KILN_STORE
}
#undef KILN_ROWS

// One block in the single-block contract.
template <size_t MR, bool kMaskedB>
KILN_AVX512 void single512(size_t taps, const uint16_t* tap_ids, size_t c, const float* const* a, size_t a_step,
                           const float* panel, size_t ldb, const float* bias, float* const* y, size_t nc, float lo,
                           float hi) {
  microkernel512<MR, kMaskedB, 1>(taps, tap_ids, c, a, a_step, panel, 0, ldb, bias, y, nc, lo, hi);
}

// [masked B][rows]
const Microkernel kAvx512Kernels[2][kMr + 1] = {
    {nullptr, single512<1, false>, single512<2, false>, single512<3, false>, single512<4, false>,
     single512<5, false>, single512<6, false>},
    {nullptr, single512<1, true>, single512<2, true>, single512<3, true>, single512<4, true>, single512<5, true>,
     single512<6, true>}};
// Two full tiles of one block (12 rows, 12 accumulators): six FMA chains of 4-cycle latency
// keep two FMA units 75% busy at most, so a single block (a 16-channel layer, or a layer's odd
// last block) of six rows ran at half the pair kernel's rate (resnet_small's 3x3 layers).
const Microkernel kAvx512Wide = single512<kWideRows, false>;
const PairKernel kAvx512Pairs[2][kMr + 1] = {
    {nullptr, microkernel512<1, false, 2>, microkernel512<2, false, 2>, microkernel512<3, false, 2>,
     microkernel512<4, false, 2>, microkernel512<5, false, 2>, microkernel512<6, false, 2>},
    {nullptr, microkernel512<1, true, 2>, microkernel512<2, true, 2>, microkernel512<3, true, 2>,
     microkernel512<4, true, 2>, microkernel512<5, true, 2>, microkernel512<6, true, 2>}};

// Two full tiles of two blocks (12 rows x 32 channels, 24 accumulators) whose rows are evenly
// spaced: row r reads a + r * lda (+ t * a_step for kernel row t), writes y + r * ldy. Twice the
// rows per weight vector loaded of the 6-row pair kernel, and the rows addressed from two bases
// and lda's multiples instead of twelve pointers (which spilled). On the Sapphire Rapids host:
// a 12 x 32 tile in L1 reaches 183 GFLOP/s against 169 for 6 x 32 (bench/peak.sh).
KILN_AVX512 void pair12_strided512(size_t taps, size_t c, const float* a, size_t lda, size_t a_step, const float* panel,
                                   size_t panel_stride, const float* bias, float* y, size_t ldy, size_t nc, float lo,
                                   float hi) {
  const __mmask16 m1 = nc >= 32 ? __mmask16(0xFFFF) : __mmask16((1u << (nc - 16)) - 1);
  const __m512 b0 = _mm512_loadu_ps(bias), b1 = _mm512_maskz_loadu_ps(m1, bias + 16);
#define KILN_R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define KILN_INIT(r) __m512 lo##r = b0, hi##r = b1;
  KILN_R12(KILN_INIT)
#undef KILN_INIT
  const size_t l1 = lda, l3 = 3 * lda, l5 = 5 * lda;
  for (size_t t = 0; t < taps; ++t) {
    const float* w = panel + t * c * kNr;
    const float* p = a + t * a_step;  // rows 0-5 from p, 6-11 from q
    const float* q = p + 6 * lda;
#pragma GCC unroll 2
    for (size_t k = 0; k < c; ++k, w += kNr, ++p, ++q) {
      const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + panel_stride);
#define KILN_FMA(r, src)                           \
  {                                                \
    const __m512 v = _mm512_set1_ps(src);          \
    lo##r = _mm512_fmadd_ps(v, w0, lo##r);         \
    hi##r = _mm512_fmadd_ps(v, w1, hi##r);         \
  }
      KILN_FMA(0, p[0]) KILN_FMA(1, p[l1]) KILN_FMA(2, p[2 * l1]) KILN_FMA(3, p[l3]) KILN_FMA(4, p[4 * l1])
      KILN_FMA(5, p[l5]) KILN_FMA(6, q[0]) KILN_FMA(7, q[l1]) KILN_FMA(8, q[2 * l1]) KILN_FMA(9, q[l3])
      KILN_FMA(10, q[4 * l1]) KILN_FMA(11, q[l5])
#undef KILN_FMA
    }
  }
  // max/min return their second operand when either is NaN: NaN stays NaN.
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#define KILN_STORE(r)                                                                        \
  _mm512_storeu_ps(y + r * ldy, _mm512_min_ps(vhi, _mm512_max_ps(vlo, lo##r)));              \
  _mm512_mask_storeu_ps(y + r * ldy + 16, m1, _mm512_min_ps(vhi, _mm512_max_ps(vlo, hi##r)));
  KILN_R12(KILN_STORE)
#undef KILN_STORE
#undef KILN_R12
}

#pragma GCC diagnostic pop

#endif  // __x86_64__

#if defined(__aarch64__)
// The same contract in NEON: 16 channels of MR pixels in 4*MR float32x4 accumulators (24 + 4
// weight vectors fit arm64's 32 registers). What batched MatMuls run on arm64; convolutions
// stay on XNNPACK's NEON kernels there (no direct path in this row).
template <size_t MR, bool kMaskedB>
void microkernel_neon(size_t taps, const uint16_t* tap_ids, size_t c, const float* const* a, size_t a_step,
                      const float* panel, size_t ldb, const float* bias, float* const* y, size_t nc, float lo, float hi) {
  float32x4_t acc[MR][4];
  for (size_t r = 0; r < MR; ++r)
    for (size_t q = 0; q < 4; ++q) acc[r][q] = vld1q_f32(bias + 4 * q);
  float wbuf[kNr] = {};
  for (size_t t = 0; t < taps; ++t) {
    const float* w = panel + (tap_ids ? tap_ids[t] : t) * c * ldb;
    for (size_t k = 0; k < c; ++k, w += ldb) {
      const float* wk = w;
      if constexpr (kMaskedB) wk = static_cast<const float*>(std::memcpy(wbuf, w, nc * sizeof(float)));  // never past nc
      const float32x4_t w0 = vld1q_f32(wk), w1 = vld1q_f32(wk + 4), w2 = vld1q_f32(wk + 8), w3 = vld1q_f32(wk + 12);
      for (size_t r = 0; r < MR; ++r) {
        const float v = a_step ? a[r][t * a_step + k] : a[t * MR + r][k];
        acc[r][0] = vfmaq_n_f32(acc[r][0], w0, v);
        acc[r][1] = vfmaq_n_f32(acc[r][1], w1, v);
        acc[r][2] = vfmaq_n_f32(acc[r][2], w2, v);
        acc[r][3] = vfmaq_n_f32(acc[r][3], w3, v);
      }
    }
  }
  // vmaxq/vminq return NaN when either operand is NaN: a NaN accumulator stays NaN.
  const float32x4_t vlo = vdupq_n_f32(lo), vhi = vdupq_n_f32(hi);
  for (size_t r = 0; r < MR; ++r) {
    float tmp[kNr];
    float* out = nc == kNr ? y[r] : tmp;
    for (size_t q = 0; q < 4; ++q) vst1q_f32(out + 4 * q, vminq_f32(vhi, vmaxq_f32(vlo, acc[r][q])));
    if (nc != kNr) std::memcpy(y[r], tmp, nc * sizeof(float));
  }
}

// [masked B][rows]
const Microkernel kNeonKernels[2][kMr + 1] = {
    {nullptr, microkernel_neon<1, false>, microkernel_neon<2, false>, microkernel_neon<3, false>,
     microkernel_neon<4, false>, microkernel_neon<5, false>, microkernel_neon<6, false>},
    {nullptr, microkernel_neon<1, true>, microkernel_neon<2, true>, microkernel_neon<3, true>,
     microkernel_neon<4, true>, microkernel_neon<5, true>, microkernel_neon<6, true>}};
#endif  // __aarch64__

}  // namespace kiln::delegates::xnnpack::dense_kernels
