// The integer forms of Conv and MatMul, and dynamic quantization (ONNX opset 10 and later):
// the portable int8 reference every faster int8 path is checked against.
//
// ConvInteger(x, w, x_zero_point?, w_zero_point?) -> i32: the convolution of (x - xz) by
// (w - wz), exact in int32; w's zero point is one value or one per output channel.
// QLinearConv(x, x_scale, xz, w, w_scale, wz, y_scale, yz, B?): the same accumulator plus the
// i32 bias, requantized to yz's dtype (quant.h); w_scale/wz per tensor or per output channel.
// Kiln's QDQ folding (export/onnx/qdq_fold.h) sets the internal attributes clamp_min and
// clamp_max (output quanta) when a Relu or Clip sat between the op and its QuantizeLinear.
// MatMulInteger(a, b, a_zero_point?, b_zero_point?) -> i32 and QLinearMatMul(a, a_scale, az,
// b, b_scale, bz, y_scale, yz): numpy MatMul semantics; a's zero point is one value, b's one
// value or one per column (b_scale too).
// DynamicQuantizeLinear(x f32) -> (y u8, y_scale f32, y_zero_point u8): the range of x
// widened to hold 0, mapped onto [0, 255]; a NaN or infinite x fails the run.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/conv.h"
#include "kernels/portable/matmul.h"
#include "kernels/portable/quant.h"
#include "kernels/simd/int8_gemm.h"
#include "kernels/simd/quantize.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

bool is_q8(DType t) { return t == DType::kI8 || t == DType::kU8; }

Status one_or_per_axis(ShapeCtx& c, size_t i, const char* what, ExprId per_axis_len) {
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& sh = c.in(i).shape;
  if (sh.empty() || (sh.size() == 1 && p.is_const_value(sh[0], 1))) return ok_status();
  if (per_axis_len == core::kNoExpr || sh.size() != 1)
    return c.error(std::string(what) + " (input #" + std::to_string(i) + ") " + p.shape_to_string(sh) +
                   (per_axis_len == core::kNoExpr ? " must hold one value" : " must hold one value or be 1-D"));
  return c.require_eq(sh[0], per_axis_len, std::string("(per-channel ") + what + " of input #" + std::to_string(i) + ")");
}

/// A quantized operand's input #x (kNoInput: none, only a scale and zero point).
constexpr size_t kNoInput = static_cast<size_t>(-1);

}  // namespace

Status check_quantized_operand(ShapeCtx& c, size_t x, size_t s, size_t z, ExprId per_axis_len) {
  DType t = DType::kU8;
  if (x != kNoInput) {
    t = c.in(x).dtype;
    if (!is_q8(t)) return c.error("input #" + std::to_string(x) + " has dtype " + dtype_name(t) + ", expected i8 or u8");
  }
  KILN_TRY(c.expect_dtype(s, DType::kF32));
  KILN_TRY(one_or_per_axis(c, s, "scale", per_axis_len));
  std::vector<float> v;
  if (c.const_floats(s, &v))
    for (float f : v)
      if (!(f > 0.f) || !std::isfinite(f))
        return c.error("scale (input #" + std::to_string(s) + ") holds " + std::to_string(f) + "; scales must be positive and finite");
  if (z == kNoInput || !c.has_input(z)) return ok_status();
  if (x == kNoInput ? !is_q8(c.in(z).dtype) : c.in(z).dtype != t)
    return c.error("zero point (input #" + std::to_string(z) + ") has dtype " + dtype_name(c.in(z).dtype) + ", expected " +
                   (x == kNoInput ? std::string("i8 or u8") : dtype_name(t)));
  return one_or_per_axis(c, z, "zero point", per_axis_len);
}

Result<DType> quantized_output_dtype(ShapeCtx& c, size_t z) {
  if (!c.has_input(z)) return DType::kU8;
  const DType t = c.in(z).dtype;
  if (!is_q8(t)) return c.error("output zero point (input #" + std::to_string(z) + ") has dtype " + dtype_name(t) + ", expected i8 or u8");
  return t;
}

namespace {

/// The product of the output's spatial sizes (one output plane), in bytes of int32.
ExprId plane_bytes(core::ExprPool& p, const std::vector<ExprId>& y) {
  ExprId n = p.constant(static_cast<int64_t>(sizeof(int32_t)));
  for (size_t k = 2; k < y.size(); ++k) n = p.mul(n, y[k]);
  return n;
}

/// Calls fn(x_ptr, w_ptr) with x and w typed by their dtypes (i8 or u8 each).
template <typename Fn>
KernelStatus with_q8_types(const TensorView& x, const TensorView& w, Fn&& fn) {
  if (!is_q8(x.dtype) || !is_q8(w.dtype)) return KernelStatus::kInvalidValue;
  if (x.dtype == DType::kU8)
    w.dtype == DType::kU8 ? fn(x.as<uint8_t>(), w.as<uint8_t>()) : fn(x.as<uint8_t>(), w.as<int8_t>());
  else
    w.dtype == DType::kU8 ? fn(x.as<int8_t>(), w.as<uint8_t>()) : fn(x.as<int8_t>(), w.as<int8_t>());
  return KernelStatus::kOk;
}

/// The output's range: the dtype's, narrowed by a folded activation's clamp_min/clamp_max.
void output_range(const RunCtx& c, DType t, int32_t* lo, int32_t* hi) {
  *lo = static_cast<int32_t>(std::max<int64_t>(qmin(t), c.attrs.get_int("clamp_min", qmin(t))));
  *hi = static_cast<int32_t>(std::min<int64_t>(qmax(t), c.attrs.get_int("clamp_max", qmax(t))));
  if (*hi < *lo) *lo = *hi;  // Clip with min > max gives max
}

}  // namespace

// ---- ConvInteger, QLinearConv ----------------------------------------------------------

Status conv_integer_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 4));
  std::vector<ExprId> out;
  KILN_TRY(conv_operands_shape(c, 0, 1, kNoInput, &out));
  for (size_t i : {size_t{0}, size_t{1}})
    if (!is_q8(c.in(i).dtype)) return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + ", expected i8 or u8");
  for (size_t i : {size_t{2}, size_t{3}}) {
    if (!c.has_input(i)) continue;
    if (c.in(i).dtype != c.in(i - 2).dtype) return c.error("zero point (input #" + std::to_string(i) + ") must have its operand's dtype");
    KILN_TRY(one_or_per_axis(c, i, "zero point", i == 3 ? c.in(1).shape[0] : core::kNoExpr));
  }
  c.out(0).dtype = DType::kI32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus conv_integer_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& wv = c.in(1);
  const ConvPlanes planes(xv, wv, c.out(0), c.op_data->as<ConvPrep>());
  int32_t* y = c.out(0).as<int32_t>();
  const int32_t xz = zero_point_at(c, 2);
  return with_q8_types(xv, wv, [&](const auto* x, const auto* w) {
    for (int64_t n = 0; n < planes.g.batch; ++n)
      for (int64_t m = 0; m < planes.g.out_ch; ++m)
        planes.accumulate<int32_t>(x, xz, w, zero_point_at(c, 3, m), n, m, 0, y + (n * planes.g.out_ch + m) * planes.out_vol);
  });
}

Status qlinear_conv_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(8, 9));
  std::vector<ExprId> out;
  KILN_TRY(conv_operands_shape(c, 0, 3, 8, &out));
  KILN_TRY(check_quantized_operand(c, 0, 1, 2));
  KILN_TRY(check_quantized_operand(c, 3, 4, 5, c.in(3).shape[0]));
  KILN_TRY(check_quantized_operand(c, kNoInput, 6, 7));
  if (c.has_input(8)) KILN_TRY(c.expect_dtype(8, DType::kI32));
  KILN_ASSIGN_OR_RETURN(c.out(0).dtype, quantized_output_dtype(c, 7));
  c.scratch_bytes = plane_bytes(c.pool, out);
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus qlinear_conv_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& wv = c.in(3);
  TensorView& yv = c.out(0);
  const ConvPlanes planes(xv, wv, yv, c.op_data->as<ConvPrep>());
  int32_t* acc = static_cast<int32_t*>(c.scratch);
  if (planes.out_vol > 0 && (acc == nullptr || c.scratch_bytes < static_cast<size_t>(planes.out_vol) * 4))
    return KernelStatus::kInvalidValue;
  const int32_t xz = zero_point_at(c, 2), yz = zero_point_at(c, 7);
  const float xs = scale_at(c, 1), ys = scale_at(c, 6);
  int32_t lo, hi;
  output_range(c, yv.dtype, &lo, &hi);
  const int32_t* bias = c.has_input(8) ? c.in(8).as<int32_t>() : nullptr;
  return with_q8_types(xv, wv, [&](const auto* x, const auto* w) {
    for (int64_t n = 0; n < planes.g.batch; ++n)
      for (int64_t m = 0; m < planes.g.out_ch; ++m) {
        planes.accumulate<int32_t>(x, xz, w, zero_point_at(c, 5, m), n, m, bias ? bias[m] : 0, acc);
        const float ratio = xs * scale_at(c, 4, m) / ys;
        const int64_t at = (n * planes.g.out_ch + m) * planes.out_vol;
        for (int64_t i = 0; i < planes.out_vol; ++i) store_q(yv, at + i, requantize(acc[i], ratio, yz, lo, hi));
      }
  });
}

// ---- MatMulInteger, QLinearMatMul ------------------------------------------------------
// Each batch: A and B packed into scratch as int16 with their zero points subtracted
// (simd/int8_gemm.h), B once when every batch reads the same one (a weight), then the GEMM
// over row blocks on the pool.

namespace {

/// b's column count as an expression (1 for a 1-D b): the length of a per-column operand.
ExprId columns(ShapeCtx& c, size_t b) {
  const std::vector<ExprId>& s = c.in(b).shape;
  return s.size() == 1 ? c.pool.constant(1) : s.back();
}

/// Scratch of a product of inputs #a and #b: packed A and B (int8_gemm.h) with room to align
/// each part to 64 bytes, plus an int32 m x n result when `with_c`.
ExprId gemm_scratch(ShapeCtx& c, size_t a, size_t b, bool with_c) {
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& as = c.in(a).shape;
  const ExprId m = as.size() == 1 ? p.constant(1) : as[as.size() - 2];
  const ExprId k1 = p.add(as.back(), p.constant(1)), n = columns(c, b);
  ExprId bytes = p.mul(p.constant(2), p.add(p.mul(m, k1), p.mul(p.add(n, p.constant(16)), k1)));
  if (with_c) bytes = p.add(bytes, p.mul(p.constant(4), p.mul(m, n)));
  return p.add(bytes, p.constant(192));
}

/// The packed operands and result of one product in scratch.
struct GemmScratch {
  int16_t* a = nullptr;
  int16_t* b = nullptr;
  int32_t* c = nullptr;
  bool fits = false;

  GemmScratch(const RunCtx& ctx, const MatmulBatch& mb, bool with_c) {
    auto align = [](size_t x) { return (x + 63) / 64 * 64; };
    const size_t k = static_cast<size_t>(mb.k), m = static_cast<size_t>(mb.m), n = static_cast<size_t>(mb.n);
    const size_t a_bytes = align(simd::int8_gemm_a_elems(m, k) * 2), b_bytes = align(simd::int8_gemm_b_elems(k, n) * 2);
    const size_t need = a_bytes + b_bytes + (with_c ? m * n * 4 : 0);
    auto* base = static_cast<unsigned char*>(ctx.scratch);
    fits = need == 0 || (base != nullptr && ctx.scratch_bytes >= need);
    if (!fits || base == nullptr) return;
    a = reinterpret_cast<int16_t*>(base);
    b = reinterpret_cast<int16_t*>(base + a_bytes);
    c = reinterpret_cast<int32_t*>(base + a_bytes + b_bytes);
  }
};

template <typename A>
void pack_a(const A* a, int32_t az, size_t m, size_t k, int16_t* out) {
  const size_t stride = 2 * simd::int8_gemm_k_pairs(k);
  for (size_t r = 0; r < m; ++r) {
    int16_t* o = out + r * stride;
    for (size_t kk = 0; kk < k; ++kk) o[kk] = static_cast<int16_t>(static_cast<int32_t>(a[r * k + kk]) - az);
    for (size_t kk = k; kk < stride; ++kk) o[kk] = 0;
  }
}

/// B (k x n) minus its zero point `bz` (one value, or one per column) into the packed layout.
template <typename B>
void pack_b(const B* b, const TensorView* bz, size_t k, size_t n, int16_t* out) {
  std::memset(out, 0, simd::int8_gemm_b_elems(k, n) * sizeof(int16_t));
  const size_t kp = simd::int8_gemm_k_pairs(k);
  for (size_t j = 0; j < n; ++j) {
    const int32_t z = bz == nullptr ? 0 : int_at(*bz, bz->numel() == 1 ? 0 : static_cast<int64_t>(j));
    for (size_t kk = 0; kk < k; ++kk)
      out[simd::int8_gemm_b_index(kp, kk, j)] = static_cast<int16_t>(static_cast<int32_t>(b[kk * n + j]) - z);
  }
}

/// Every batch of A x B with zero points (input #az of A, #bz of B: per column) as int32 into
/// `out(t)` (row stride n), the result of batch t; `done(t)` then reads it.
template <typename OutFn, typename DoneFn>
KernelStatus int_matmul(const RunCtx& c, const MatmulBatch& mb, uint32_t ai, uint32_t bi, uint32_t azi, uint32_t bzi,
                        const GemmScratch& s, OutFn&& out, DoneFn&& done) {
  if (!s.fits) return KernelStatus::kInvalidValue;
  const int32_t az = zero_point_at(c, azi);
  const TensorView* bz = c.has_input(bzi) ? &c.in(bzi) : nullptr;
  const size_t m = static_cast<size_t>(mb.m), k = static_cast<size_t>(mb.k), n = static_cast<size_t>(mb.n);
  return with_q8_types(c.in(ai), c.in(bi), [&](const auto* a, const auto* b) {
    int64_t packed_b = -1;
    for (int64_t t = 0; t < mb.batches; ++t) {
      int64_t a_off, b_off;
      mb.offsets(t, &a_off, &b_off);
      pack_a(a + a_off, az, m, k, s.a);
      if (b_off != packed_b) pack_b(b + b_off, bz, k, n, s.b);
      packed_b = b_off;
      int32_t* y = out(t);
      const size_t grain = std::max<size_t>(4, (1 << 16) / std::max<size_t>(1, k * n));
      parallel_for(c, m, grain, [&](size_t r0, size_t r1) { simd::int8_gemm(s.a, s.b, k, n, y, n, r0, r1); });
      done(t);
    }
  });
}

}  // namespace

Status matmul_integer_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 4));
  std::vector<ExprId> out;
  KILN_TRY(matmul_operands_shape(c, 0, 1, &out));
  for (size_t i : {size_t{0}, size_t{1}})
    if (!is_q8(c.in(i).dtype)) return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + ", expected i8 or u8");
  for (size_t i : {size_t{2}, size_t{3}}) {
    if (!c.has_input(i)) continue;
    if (c.in(i).dtype != c.in(i - 2).dtype) return c.error("zero point (input #" + std::to_string(i) + ") must have its operand's dtype");
    KILN_TRY(one_or_per_axis(c, i, "zero point", i == 3 ? columns(c, 1) : core::kNoExpr));
  }
  c.scratch_bytes = gemm_scratch(c, 0, 1, false);
  c.out(0).dtype = DType::kI32;
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus matmul_integer_run(const RunCtx& c) {
  const MatmulBatch mb(c.in(0), c.in(1));
  int32_t* y = c.out(0).as<int32_t>();
  return int_matmul(c, mb, 0, 1, 2, 3, GemmScratch(c, mb, false), [&](int64_t t) { return y + t * mb.m * mb.n; },
                    [](int64_t) {});
}

Status qlinear_matmul_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(8, 8));
  std::vector<ExprId> out;
  KILN_TRY(matmul_operands_shape(c, 0, 3, &out));
  KILN_TRY(check_quantized_operand(c, 0, 1, 2));
  KILN_TRY(check_quantized_operand(c, 3, 4, 5, columns(c, 3)));
  KILN_TRY(check_quantized_operand(c, kNoInput, 6, 7));
  KILN_ASSIGN_OR_RETURN(c.out(0).dtype, quantized_output_dtype(c, 7));
  c.scratch_bytes = gemm_scratch(c, 0, 3, true);
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus qlinear_matmul_run(const RunCtx& c) {
  const MatmulBatch mb(c.in(0), c.in(3));
  TensorView& yv = c.out(0);
  const GemmScratch s(c, mb, true);
  const int32_t yz = zero_point_at(c, 7);
  const float as = scale_at(c, 1), ys = scale_at(c, 6);
  int32_t lo, hi;
  output_range(c, yv.dtype, &lo, &hi);
  return int_matmul(c, mb, 0, 3, 2, 5, s, [&](int64_t) { return s.c; },
                    [&](int64_t t) {
                      const int64_t at = t * mb.m * mb.n;
                      for (int64_t i = 0; i < mb.m; ++i)
                        for (int64_t j = 0; j < mb.n; ++j)
                          store_q(yv, at + i * mb.n + j, requantize(s.c[i * mb.n + j], as * scale_at(c, 4, j) / ys, yz, lo, hi));
                    });
}

// ---- DynamicQuantizeLinear --------------------------------------------------------------

Status dynamic_quantize_linear_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  c.out(0).dtype = DType::kU8;
  c.out(0).shape = c.in(0).shape;
  if (c.outputs.size() > 1) c.out(1).dtype = DType::kF32;  // scalars
  if (c.outputs.size() > 2) c.out(2).dtype = DType::kU8;
  return ok_status();
}

KernelStatus dynamic_quantize_linear_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const float* x = xv.as<float>();
  const size_t n = static_cast<size_t>(xv.numel());
  float lo = 0.f, hi = 0.f;  // the range always holds 0
  if (n > 0 && !simd::finite_min_max(x, n, &lo, &hi)) return KernelStatus::kInvalidValue;
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  const float scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  const float z0 = -lo / scale;
  const int32_t zp = static_cast<int32_t>(std::nearbyint(z0 < 0.f ? 0.f : z0 > 255.f ? 255.f : z0));
  simd::quantize_u8(x, n, scale, zp, 0, 255, c.out(0).as<uint8_t>());
  if (c.num_outputs > 1 && c.outputs[1]) c.out(1).as<float>()[0] = scale;
  if (c.num_outputs > 2 && c.outputs[2]) c.out(2).as<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
