#include "delegates/xnnpack/pointwise.h"

#include <pthreadpool.h>

#include <algorithm>

#include "kernels/simd/vbinary.h"
#include "kernels/simd/vmath.h"

namespace kiln::delegates::xnnpack {

namespace {

constexpr size_t kBlock = 4096;

enum class Kind : uint8_t { kErf, kTanh, kGate, kGelu, kClamp, kSoftmax, kLayerNorm };

// One map over blocks of kBlock elements (softmax: blocks of whole rows of `row` elements).
struct Job {
  Kind kind;
  const float* x;
  float* y;
  size_t n, row;
  bool hard;  ///< gate: hard sigmoid; gelu: tanh form
  float alpha, beta;  ///< gate: its slope and offset; clamp: lo and hi
  const float* gamma = nullptr;  ///< layer norm (alpha: epsilon)
  const float* shift = nullptr;
};

void run_block(void* ctx, size_t b) {
  const Job& j = *static_cast<const Job*>(ctx);
  if (j.kind == Kind::kSoftmax || j.kind == Kind::kLayerNorm) {
    const size_t per = std::max<size_t>(1, kBlock / std::max<size_t>(1, j.row)), rows = j.n / j.row;
    for (size_t r = b * per; r < std::min(rows, (b + 1) * per); ++r) {
      if (j.kind == Kind::kSoftmax)
        simd::softmax_row(j.x + r * j.row, j.y + r * j.row, j.row);
      else
        simd::layer_norm_row(j.x + r * j.row, j.y + r * j.row, j.row, j.gamma, j.shift, j.alpha);
    }
    return;
  }
  const size_t first = b * kBlock, count = std::min(kBlock, j.n - first);
  const float* x = j.x + first;
  float* y = j.y + first;
  switch (j.kind) {
    case Kind::kGate:
      return simd::gate(x, y, count, j.hard, j.alpha, j.beta);
    case Kind::kErf:
      return simd::erf(x, y, count);
    case Kind::kTanh:
      return simd::tanh(x, y, count);
    case Kind::kGelu:
      return simd::gelu(x, y, count, j.hard);
    case Kind::kClamp:
      return simd::clamp(x, y, count, j.alpha, j.beta);
    case Kind::kSoftmax:
    case Kind::kLayerNorm:
      return;
  }
}

void run(const Job& j, pthreadpool_t pool) {
  size_t blocks = (j.n + kBlock - 1) / kBlock;
  if (j.kind == Kind::kSoftmax || j.kind == Kind::kLayerNorm) {
    const size_t per = std::max<size_t>(1, kBlock / std::max<size_t>(1, j.row));
    blocks = (j.n / std::max<size_t>(1, j.row) + per - 1) / per;
  }
  pthreadpool_parallelize_1d(pool, run_block, const_cast<Job*>(&j), blocks, 0);
}

}  // namespace

void fast_erf(const float* x, float* y, size_t n, pthreadpool_t pool) { run(Job{Kind::kErf, x, y, n, 1, false, 0, 0}, pool); }

void fast_tanh(const float* x, float* y, size_t n, pthreadpool_t pool) { run(Job{Kind::kTanh, x, y, n, 1, false, 0, 0}, pool); }

void gate(const float* x, float* y, size_t n, bool hard, float alpha, float beta, pthreadpool_t pool) {
  run(Job{Kind::kGate, x, y, n, 1, hard, alpha, beta}, pool);
}

void fast_clamp(const float* x, float* y, size_t n, float lo, float hi, pthreadpool_t pool) {
  run(Job{Kind::kClamp, x, y, n, 1, false, lo, hi}, pool);
}

void fast_gelu(const float* x, float* y, size_t n, bool tanh_form, pthreadpool_t pool) {
  run(Job{Kind::kGelu, x, y, n, 1, tanh_form, 0, 0}, pool);
}

void layer_norm_rows(const float* x, float* y, size_t rows, size_t n, const float* gamma, const float* beta, float eps,
                     pthreadpool_t pool) {
  if (rows == 0 || n == 0) return;
  Job j{Kind::kLayerNorm, x, y, rows * n, n, false, eps, 0};
  j.gamma = gamma;
  j.shift = beta;
  run(j, pool);
}

void softmax_rows(const float* x, float* y, size_t rows, size_t n, pthreadpool_t pool) {
  if (rows == 0 || n == 0) return;
  run(Job{Kind::kSoftmax, x, y, rows * n, n, false, 0, 0}, pool);
}

}  // namespace kiln::delegates::xnnpack
