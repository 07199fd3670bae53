#include "delegates/xnnpack/layout.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <pthreadpool.h>

#include <algorithm>

#include "kernels/simd/isa.h"

namespace kiln::delegates::xnnpack {

namespace {

constexpr size_t kRows = 8;     // rows of a task (one 8x8 block row)
constexpr size_t kCols = 512;   // columns of a task

// dst (cols x rows, row stride `rows`) = transpose of src (rows x cols, row stride `cols`)
// over the block [r0, r1) x [c0, c1), element by element.
void transpose_scalar(const float* src, float* dst, size_t rows, size_t cols, size_t r0, size_t r1, size_t c0,
                      size_t c1) {
  for (size_t c = c0; c < c1; ++c)
    for (size_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
}

#if defined(__x86_64__)
// An 8x8 block: rows of src (stride ss) become columns of dst (stride ds).
__attribute__((target("avx2"))) inline void transpose8x8(const float* src, size_t ss, float* dst, size_t ds) {
  const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ss), r2 = _mm256_loadu_ps(src + 2 * ss),
               r3 = _mm256_loadu_ps(src + 3 * ss), r4 = _mm256_loadu_ps(src + 4 * ss), r5 = _mm256_loadu_ps(src + 5 * ss),
               r6 = _mm256_loadu_ps(src + 6 * ss), r7 = _mm256_loadu_ps(src + 7 * ss);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(dst + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(dst + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(dst + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(dst + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(dst + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(dst + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(dst + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}

// Three rows (an RGB image's planes) of 8 columns into 24 interleaved floats: each output
// vector takes its lanes from the three rows, permuted, and two blends. Element by element,
// the 3-channel input's change to NHWC took longer than the stem convolution after it.
__attribute__((target("avx2"))) inline void interleave3x8(const float* src, size_t ss, float* dst) {
  const __m256 a = _mm256_loadu_ps(src), b = _mm256_loadu_ps(src + ss), c = _mm256_loadu_ps(src + 2 * ss);
  // output k, lane l holds row (8k + l) % 3 of column (8k + l) / 3
  const __m256i i0 = _mm256_setr_epi32(0, 0, 0, 1, 1, 1, 2, 2);  // the columns of output 0's lanes
  const __m256i i1 = _mm256_setr_epi32(2, 3, 3, 3, 4, 4, 4, 5);
  const __m256i i2 = _mm256_setr_epi32(5, 5, 6, 6, 6, 7, 7, 7);
  // the lanes of rows b and c in each output (blend: a set bit takes the second operand)
  const __m256 o0 = _mm256_blend_ps(_mm256_blend_ps(_mm256_permutevar8x32_ps(a, i0), _mm256_permutevar8x32_ps(b, i0), 0x92),
                                    _mm256_permutevar8x32_ps(c, i0), 0x24);
  const __m256 o1 = _mm256_blend_ps(_mm256_blend_ps(_mm256_permutevar8x32_ps(a, i1), _mm256_permutevar8x32_ps(b, i1), 0x24),
                                    _mm256_permutevar8x32_ps(c, i1), 0x49);
  const __m256 o2 = _mm256_blend_ps(_mm256_blend_ps(_mm256_permutevar8x32_ps(a, i2), _mm256_permutevar8x32_ps(b, i2), 0x49),
                                    _mm256_permutevar8x32_ps(c, i2), 0x92);
  _mm256_storeu_ps(dst, o0);
  _mm256_storeu_ps(dst + 8, o1);
  _mm256_storeu_ps(dst + 16, o2);
}

__attribute__((target("avx2"))) void transpose_avx2(const float* src, float* dst, size_t rows, size_t cols, size_t r0,
                                                    size_t r1, size_t c0, size_t c1) {
  size_t c = c0;
  if (r1 - r0 == 8)
    for (; c + 8 <= c1; c += 8) transpose8x8(src + r0 * cols + c, cols, dst + c * rows + r0, rows);
  else if (rows == 3 && r0 == 0 && r1 == 3)
    for (; c + 8 <= c1; c += 8) interleave3x8(src + c, cols, dst + c * 3);
  transpose_scalar(src, dst, rows, cols, r0, r1, c, c1);
}
#endif  // __x86_64__

#if defined(__aarch64__)
// A 4x4 block: rows of src (stride ss) become columns of dst (stride ds).
inline void transpose4x4(const float* src, size_t ss, float* dst, size_t ds) {
  const float32x4_t r0 = vld1q_f32(src), r1 = vld1q_f32(src + ss), r2 = vld1q_f32(src + 2 * ss),
                    r3 = vld1q_f32(src + 3 * ss);
  const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1)), t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1)),
                    t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3)), t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
  vst1q_f32(dst, vreinterpretq_f32_f64(vtrn1q_f64(t0, t2)));
  vst1q_f32(dst + ds, vreinterpretq_f32_f64(vtrn1q_f64(t1, t3)));
  vst1q_f32(dst + 2 * ds, vreinterpretq_f32_f64(vtrn2q_f64(t0, t2)));
  vst1q_f32(dst + 3 * ds, vreinterpretq_f32_f64(vtrn2q_f64(t1, t3)));
}

void transpose_neon(const float* src, float* dst, size_t rows, size_t cols, size_t r0, size_t r1, size_t c0, size_t c1) {
  size_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    size_t c = c0;
    for (; c + 4 <= c1; c += 4) transpose4x4(src + r * cols + c, cols, dst + c * rows + r, rows);
    transpose_scalar(src, dst, rows, cols, r, r + 4, c, c1);
  }
  transpose_scalar(src, dst, rows, cols, r, r1, c0, c1);
}
#endif  // __aarch64__

using TransposeFn = void (*)(const float*, float*, size_t, size_t, size_t, size_t, size_t, size_t);

// The table (kernels/simd/isa.h): best first, the last runs anywhere.
struct Impl {
  const char* name;
  bool (*available)();
  TransposeFn transpose;
};
const Impl kImpls[] = {
#if defined(__x86_64__)
    {"avx2", simd::cpu_has_avx2, transpose_avx2},
#endif
#if defined(__aarch64__)
    {"neon", [] { return true; }, transpose_neon},
#endif
    {"plain", [] { return true; }, transpose_scalar}};

struct Job {
  const float* src;
  float* dst;
  size_t rows, cols, row_blocks, col_blocks;
};

// Task (batch, block of 8 rows, block of kCols columns).
void run_task(void* ctx, size_t i, size_t cb) {
  const Job& j = *static_cast<const Job*>(ctx);
  const size_t batch = i / j.row_blocks, rb = i % j.row_blocks, plane = j.rows * j.cols;
  const size_t r0 = rb * kRows, r1 = std::min(j.rows, r0 + kRows), c0 = cb * kCols, c1 = std::min(j.cols, c0 + kCols);
  const float* src = j.src + batch * plane;
  float* dst = j.dst + batch * plane;
  static const Impl* impl = simd::pick_isa(kImpls);
  impl->transpose(src, dst, j.rows, j.cols, r0, r1, c0, c1);
}

void transpose_batched(const float* src, float* dst, size_t n, size_t rows, size_t cols, pthreadpool_t pool) {
  if (n == 0 || rows == 0 || cols == 0) return;
  Job j{src, dst, rows, cols, (rows + kRows - 1) / kRows, (cols + kCols - 1) / kCols};
  pthreadpool_parallelize_2d(pool, run_task, &j, n * j.row_blocks, j.col_blocks, 0);
}

}  // namespace

void to_channels_last(const float* src, float* dst, size_t n, size_t c, size_t p, pthreadpool_t pool) {
  transpose_batched(src, dst, n, c, p, pool);
}

void to_channels_first(const float* src, float* dst, size_t n, size_t c, size_t p, pthreadpool_t pool) {
  transpose_batched(src, dst, n, p, c, pool);
}

void to_channels_last_bytes(const uint8_t* src, uint8_t* dst, size_t n, size_t c, size_t p) {
  for (size_t b = 0; b < n; ++b)
    for (size_t ch = 0; ch < c; ++ch)
      for (size_t i = 0; i < p; ++i) dst[(b * p + i) * c + ch] = src[(b * c + ch) * p + i];
}

void to_channels_first_bytes(const uint8_t* src, uint8_t* dst, size_t n, size_t c, size_t p) {
  for (size_t b = 0; b < n; ++b)
    for (size_t i = 0; i < p; ++i)
      for (size_t ch = 0; ch < c; ++ch) dst[(b * c + ch) * p + i] = src[(b * p + i) * c + ch];
}

}  // namespace kiln::delegates::xnnpack
