#include "delegates/xnnpack/layout.h"

#include <pthreadpool.h>

#include <algorithm>

namespace kiln::delegates::xnnpack {

namespace {

constexpr size_t kTile = 32;

// Transposes a rows x cols row-major matrix (row stride `cols`) into cols x rows, for the
// row tile [r0, r0 + kTile).
void transpose_rows(const float* src, float* dst, size_t rows, size_t cols, size_t r0) {
  const size_t r1 = std::min(rows, r0 + kTile);
  for (size_t c0 = 0; c0 < cols; c0 += kTile) {
    const size_t c1 = std::min(cols, c0 + kTile);
    for (size_t r = r0; r < r1; ++r)
      for (size_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
  }
}

struct Job {
  const float* src;
  float* dst;
  size_t rows, cols, tiles;
};

void run_tile(void* ctx, size_t i) {
  const Job& j = *static_cast<const Job*>(ctx);
  const size_t batch = i / j.tiles, tile = i % j.tiles;
  const size_t plane = j.rows * j.cols;
  transpose_rows(j.src + batch * plane, j.dst + batch * plane, j.rows, j.cols, tile * kTile);
}

void transpose_batched(const float* src, float* dst, size_t n, size_t rows, size_t cols, pthreadpool_t pool) {
  if (n == 0 || rows == 0 || cols == 0) return;
  Job j{src, dst, rows, cols, (rows + kTile - 1) / kTile};
  pthreadpool_parallelize_1d(pool, run_tile, &j, n * j.tiles, 0);
}

}  // namespace

void to_channels_last(const float* src, float* dst, size_t n, size_t c, size_t p, pthreadpool_t pool) {
  transpose_batched(src, dst, n, c, p, pool);
}

void to_channels_first(const float* src, float* dst, size_t n, size_t c, size_t p, pthreadpool_t pool) {
  transpose_batched(src, dst, n, p, c, pool);
}

}  // namespace kiln::delegates::xnnpack
