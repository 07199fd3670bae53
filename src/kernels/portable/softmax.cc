// Softmax and LogSoftmax. Opset-13 semantics: normalize along the single axis `axis`
// (default -1). With coerce_2d = 1 (set by the importer below opset 13): view the input as
// [prod(dims[:axis]), prod(dims[axis:])] and normalize each row; the default axis is 1.
// Output shape and dtype = input's.
#include <algorithm>
#include <cmath>

#include "kernels/kernel.h"
#include "kernels/simd/vmath.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

bool coerce_2d(const core::Attrs& a) { return a.get_int("coerce_2d", 0) != 0; }
int64_t default_axis(const core::Attrs& a) { return coerce_2d(a) ? 1 : -1; }

Status softmax_like_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  if (c.rank(0) == 0) return c.error("input #0 must have rank >= 1, got a scalar");
  KILN_TRY(c.normalize_axis(c.attrs.get_int("axis", default_axis(c.attrs)), c.rank(0)).status());
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = c.in(0).shape;
  return ok_status();
}

/// Softmax (or its log) of n values spaced `stride` apart, starting at x and y.
/// Subtracting the max keeps exp() in (0, 1], so nothing overflows:
///   softmax(x)_i = exp(x_i - m) / s,  log_softmax(x)_i = x_i - m - log(s),
///   where m = max(x) and s = sum_j exp(x_j - m) >= 1.
template <bool kLog>
void softmax_row(const float* x, float* y, int64_t n, int64_t stride) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i * stride] > m ? x[i * stride] : m;
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    float e = std::exp(x[i * stride] - m);
    if (!kLog) y[i * stride] = e;
    s += e;
  }
  if (kLog) {
    float shift = m + std::log(s);
    for (int64_t i = 0; i < n; ++i) y[i * stride] = x[i * stride] - shift;
  } else {
    float inv = 1.f / s;
    for (int64_t i = 0; i < n; ++i) y[i * stride] *= inv;
  }
}

/// Softmax and LogSoftmax: the normalized axis and the pre-13 2-D coercion, read once.
struct SoftmaxPrep {
  int64_t axis;
  bool coerce_2d;
};

template <bool kLog>
KernelStatus softmax_like_run(const RunCtx& c) {
  const TensorView& in = c.in(0);
  const SoftmaxPrep& prep = c.op_data->as<SoftmaxPrep>();
  const int64_t axis = prep.axis;
  if (axis < 0 || axis >= in.rank) return KernelStatus::kInvalidValue;
  // View the input as [outer, n, inner] at its actual dims; coerce_2d folds the trailing
  // axes into n.
  int64_t outer = 1, inner = 1, n = in.dims[axis];
  for (int k = 0; k < axis; ++k) outer *= in.dims[k];
  for (int k = static_cast<int>(axis) + 1; k < in.rank; ++k) inner *= in.dims[k];
  if (prep.coerce_2d) {
    n *= inner;
    inner = 1;
  }
  if (n == 0) return KernelStatus::kOk;
  const float* x = in.as<float>();
  float* y = c.out(0).as<float>();
  if (!kLog && inner == 1) {  // contiguous rows: vmath's softmax (exp max rel error 2e-7), rows over the pool
    parallel_for(c, static_cast<size_t>(outer), static_cast<size_t>(std::max<int64_t>(1, 16384 / n)), [&](size_t b, size_t e) {
      for (size_t o = b; o < e; ++o) simd::softmax_row(x + o * n, y + o * n, static_cast<size_t>(n));
    });
    return KernelStatus::kOk;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      softmax_row<kLog>(x + base, y + base, n, inner);
    }
  return KernelStatus::kOk;
}

}  // namespace

void softmax_prepare(const PrepareCtx& c, OpData* d) {
  SoftmaxPrep& p = d->as<SoftmaxPrep>();
  p.axis = c.attrs.get_int("axis", default_axis(c.attrs));
  if (p.axis < 0) p.axis += c.input_ranks[0];
  p.coerce_2d = coerce_2d(c.attrs);
}

Status softmax_shape(ShapeCtx& c) { return softmax_like_shape(c); }
Status log_softmax_shape(ShapeCtx& c) { return softmax_like_shape(c); }

KernelStatus softmax_run(const RunCtx& c) { return softmax_like_run<false>(c); }
KernelStatus log_softmax_run(const RunCtx& c) { return softmax_like_run<true>(c); }

}  // namespace kiln::kernels
