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
#include <type_traits>

#include "kernels/kernel.h"
#include "kernels/portable/conv.h"
#include "kernels/portable/matmul.h"
#include "kernels/portable/qconv.h"
#include "kernels/portable/quant.h"
#include "kernels/simd/int8_gemm.h"
#include "kernels/simd/qgemm.h"
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

/// ConvInteger's and MatMulInteger's operands (a, b, a_zero_point?, b_zero_point?): a and b i8
/// or u8, each zero point of its operand's dtype, a's one value, b's one value or one per
/// entry of `b_axis_len` (output channels, columns).
Status check_integer_operands(ShapeCtx& c, ExprId b_axis_len) {
  for (size_t i : {size_t{0}, size_t{1}})
    if (!is_q8(c.in(i).dtype)) return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + ", expected i8 or u8");
  for (size_t i : {size_t{2}, size_t{3}}) {
    if (!c.has_input(i)) continue;
    if (c.in(i).dtype != c.in(i - 2).dtype) return c.error("zero point (input #" + std::to_string(i) + ") must have its operand's dtype");
    KILN_TRY(one_or_per_axis(c, i, "zero point", i == 3 ? b_axis_len : core::kNoExpr));
  }
  return ok_status();
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
// A group with more than one input channel per group runs as GEMMs (simd/int8_gemm.h): the
// group's weights minus their zero points (Mg x K, K = Cg * kernel volume) times the input's
// columns (im2col, K x P, x minus its zero point, padding 0), a tile of kConvTile output
// positions at a time, so scratch stays small at any image size. Depthwise groups (one input
// channel) convolve directly (ConvPlanes). Both are exact in int32.

namespace {

template <typename A, typename Zp>
void pack_a(const A* a, Zp&& zp, size_t m, size_t k, int16_t* out);


/// Scratch of a grouped convolution of input #x by weight #w (constant sizes except the
/// output's): packed weights, one packed tile of columns, one int32 tile per output channel
/// of a group (GEMM), or one output plane (depthwise).
ExprId conv_scratch(ShapeCtx& c, size_t x, size_t w, const std::vector<ExprId>& y) {
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& ws = c.in(w).shape;
  ExprId k1 = ws[1];
  for (size_t d = 2; d < ws.size(); ++d) k1 = p.mul(k1, ws[d]);
  k1 = p.add(k1, p.constant(1));
  const ExprId m = ws[0];  // at least a group's output channels
  ExprId gemm = p.mul(p.constant(2), p.add(p.mul(m, k1), p.mul(p.constant(kConvTile + 16), k1)));
  gemm = p.add(gemm, p.mul(p.constant(4 * kConvTile), m));
  (void)x;
  return p.add(p.add(gemm, plane_bytes(p, y)), p.constant(256));
}

/// Where the parts of a convolution's scratch start (64-byte aligned), for this run's sizes.
struct ConvScratch {
  int16_t* a = nullptr;  // Mg x 2*k_pairs
  int16_t* b = nullptr;  // one tile of columns, packed
  int32_t* c = nullptr;  // Mg x kConvTile, or one output plane (depthwise)
  size_t room = 0;       // bytes before c (a and b)
  bool fits = false;

  ConvScratch(const RunCtx& ctx, size_t mg, size_t k, size_t plane) {
    auto align = [](size_t v) { return (v + 63) / 64 * 64; };
    const size_t a_bytes = align(simd::int8_gemm_a_elems(mg, k) * 2),
                 b_bytes = align(simd::int8_gemm_b_elems(k, kConvTile) * 2);
    const size_t c_bytes = std::max(mg * kConvTile, plane) * 4;
    auto* base = static_cast<unsigned char*>(ctx.scratch);
    fits = base != nullptr && ctx.scratch_bytes >= a_bytes + b_bytes + c_bytes;
    if (!fits) return;
    room = a_bytes + b_bytes;
    a = reinterpret_cast<int16_t*>(base);
    b = reinterpret_cast<int16_t*>(base + a_bytes);
    c = reinterpret_cast<int32_t*>(base + a_bytes + b_bytes);
  }
};

/// Row kk of group g's im2col of batch n over output positions [p0, p1) into row[0, p1 - p0):
/// x minus xz where the tap lands inside the input, 0 in the padding. Walks the positions one
/// output row (od, oh) at a time, the valid ow range clipped once per row.
template <typename X>
void im2col_row(const X* xg, int32_t xz, const ConvPlanes& cp, int64_t kk, int64_t p0, int64_t p1, int16_t* row) {
  const ConvDims& d = cp.g;
  const Window& win = cp.win;
  const int64_t kw = kk % d.k[kSlotW], kh = kk / d.k[kSlotW] % d.k[kSlotH], kd = kk / cp.k_plane % d.k[kSlotD];
  const X* xc = xg + kk / cp.k_vol * cp.in_vol;
  const int64_t sw = win.stride[kSlotW], off_w = kw * win.dilation[kSlotW] - win.pad_begin[kSlotW];
  int64_t ow_lo, ow_hi;
  clip_range(off_w, sw, d.in[kSlotW], d.out[kSlotW], &ow_lo, &ow_hi);
  for (int64_t p = p0; p < p1;) {
    const int64_t row_start = p / d.out[kSlotW] * d.out[kSlotW], ow0 = p - row_start;
    const int64_t ow1 = std::min(d.out[kSlotW], ow0 + (p1 - p));
    const int64_t od = row_start / cp.out_plane, oh = row_start % cp.out_plane / d.out[kSlotW];
    const int64_t id = od * win.stride[kSlotD] + kd * win.dilation[kSlotD] - win.pad_begin[kSlotD];
    const int64_t ih = oh * win.stride[kSlotH] + kh * win.dilation[kSlotH] - win.pad_begin[kSlotH];
    int16_t* r = row + (p - p0);  // r[ow - ow0] is position row_start + ow
    const bool inside = id >= 0 && id < d.in[kSlotD] && ih >= 0 && ih < d.in[kSlotH];
    const int64_t lo = inside ? std::max(ow0, ow_lo) : ow1, hi = inside ? std::min(ow1, ow_hi) : ow1;
    for (int64_t ow = ow0; ow < std::min(lo, ow1); ++ow) r[ow - ow0] = 0;
    // Input element of position ow: row_base + ow * sw + off_w (inside for ow in [lo, hi)).
    const int64_t row_base = inside ? (id * d.in[kSlotH] + ih) * d.in[kSlotW] : 0;
    if (sw == 1 && hi > lo) {
      if constexpr (std::is_same_v<X, uint8_t>)
        simd::widen_u8(xc + row_base + lo + off_w, static_cast<size_t>(hi - lo), xz, r + (lo - ow0));
      else
        simd::widen_i8(xc + row_base + lo + off_w, static_cast<size_t>(hi - lo), xz, r + (lo - ow0));
    } else {
      for (int64_t ow = lo; ow < hi; ++ow)
        r[ow - ow0] = static_cast<int16_t>(static_cast<int32_t>(xc[row_base + ow * sw + off_w]) - xz);
    }
    for (int64_t ow = std::max(hi, lo); ow < ow1; ++ow) r[ow - ow0] = 0;
    p = row_start + ow1;
  }
}

/// Columns [p0, p1) of group g's im2col of batch n, packed (int8_gemm.h) two rows at a time.
template <typename X>
void pack_columns(const X* x, int32_t xz, const ConvPlanes& cp, int64_t n, int64_t g, int64_t p0, int64_t p1, int16_t* out) {
  const int64_t k = cp.group_ch * cp.k_vol, cols = p1 - p0;
  const size_t kp = simd::int8_gemm_k_pairs(static_cast<size_t>(k)), block = kp * 2 * simd::kInt8GemmCols;
  if (cols % static_cast<int64_t>(simd::kInt8GemmCols) != 0)  // the last block's padding columns
    std::memset(out, 0, simd::int8_gemm_b_elems(static_cast<size_t>(k), static_cast<size_t>(cols)) * sizeof(int16_t));
  const X* xg = x + (n * cp.g.in_ch + g * cp.group_ch) * cp.in_vol;
  int16_t rows[2][kConvTile];
  for (int64_t kk = 0; kk < k; kk += 2) {
    im2col_row(xg, xz, cp, kk, p0, p1, rows[0]);
    if (kk + 1 < k)
      im2col_row(xg, xz, cp, kk + 1, p0, p1, rows[1]);
    else
      std::memset(rows[1], 0, sizeof(rows[1]));
    simd::interleave_pairs(rows[0], rows[1], static_cast<size_t>(cols), out + kk / 2 * 2 * simd::kInt8GemmCols, block);
  }
}

// Group g's weights (mg x k, a row per output channel) packed into quantized GEMM panels, their
// column sums and zero points.
template <typename W>
void pack_qconv_weights(const RunCtx& c, const W* w, uint32_t wzi, int64_t g, size_t mg, size_t k, uint8_t* panels,
                        int32_t* colsum, int32_t* wz) {
  const size_t kp = simd::qgemm_k_padded(k), blocks = (mg + simd::kQgemmNr - 1) / simd::kQgemmNr;
  std::memset(panels, 0, blocks * simd::qgemm_panel_bytes(kp));
  for (size_t m = 0; m < mg; ++m) {
    const W* wm = w + (static_cast<size_t>(g) * mg + m) * k;
    uint8_t* pm = panels + (m / simd::kQgemmNr) * simd::qgemm_panel_bytes(kp);
    int64_t wsum = 0;
    for (size_t kk = 0; kk < k; ++kk) {
      pm[simd::qgemm_panel_index(kk, m % simd::kQgemmNr)] = static_cast<uint8_t>(wm[kk]);
      wsum += wm[kk];
    }
    colsum[m] = static_cast<int32_t>(wsum);
    wz[m] = zero_point_at(c, wzi, g * static_cast<int64_t>(mg) + static_cast<int64_t>(m));
  }
}

// Group g of batch n on the quantized GEMM (qconv.h), weights packed for this call into the
// int16 GEMM's room in scratch (2 * (mg + kConvTile + 16) * (k + 1) bytes: the panels take
// (mg + 15) * (k + 3) at most, the column constants 16 * (mg + 15)).
template <typename X, typename W, typename Scratch, typename Emit>
void int_conv_qgemm(const RunCtx& c, const ConvPlanes& cp, const X* x, int32_t xz, const W* w, uint32_t wzi, int64_t n,
                    int64_t g, const Scratch& s, Emit&& emit) {
  const size_t mg = static_cast<size_t>(cp.out_per_group), k = static_cast<size_t>(cp.group_ch * cp.k_vol);
  const size_t np = (mg + simd::kQgemmNr - 1) / simd::kQgemmNr * simd::kQgemmNr;
  auto* panels = reinterpret_cast<uint8_t*>(s.a);
  auto* colsum = reinterpret_cast<int32_t*>(panels + (np / simd::kQgemmNr) * simd::qgemm_panel_bytes(simd::qgemm_k_padded(k)));
  int32_t* wz = colsum + np;
  int32_t* bias = wz + np;
  int32_t* wz_used = bias + np;
  pack_qconv_weights(c, w, wzi, g, mg, k, panels, colsum, wz);
  QConvOperands op;
  op.xg = reinterpret_cast<const uint8_t*>(x + (n * cp.g.in_ch + g * cp.group_ch) * cp.in_vol);
  op.panels = panels;
  qconv_constants(std::is_same_v<X, int8_t>, std::is_same_v<W, int8_t>, xz, k, colsum, wz, mg, bias, wz_used, &op);
  auto run = [&](int64_t m, const int32_t* acc, int64_t p0, int64_t count) { emit(n, g * cp.out_per_group + m, acc, p0, count); };
  qconv_group(c, cp, op, s.c, [](void* ctx, int64_t m, const int32_t* acc, int64_t p0, int64_t count) {
    (*static_cast<decltype(run)*>(ctx))(m, acc, p0, count);
  }, &run);
}

/// Every output plane (n, m) of an integer convolution as int32, handed to
/// `emit(n, m, acc, p0, count)` a run of positions at a time (acc[i] is position p0 + i).
template <typename X, typename W, typename Emit>
KernelStatus int_conv(const RunCtx& c, const ConvPlanes& cp, const X* x, int32_t xz, const W* w, uint32_t wzi, Emit&& emit) {
  const int64_t mg = cp.out_per_group, k = cp.group_ch * cp.k_vol, groups = cp.g.out_ch / std::max<int64_t>(1, mg);
  const ConvScratch s(c, static_cast<size_t>(mg), static_cast<size_t>(k), static_cast<size_t>(cp.out_vol));
  if (!s.fits) return cp.out_vol == 0 || cp.g.batch == 0 ? KernelStatus::kOk : KernelStatus::kInvalidValue;
  for (int64_t n = 0; n < cp.g.batch; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      if (cp.group_ch == 1 && mg == 1) {  // depthwise: directly, one plane
        cp.accumulate<int32_t>(x, xz, w, zero_point_at(c, wzi, g), n, g, 0, s.c);
        emit(n, g, s.c, 0, cp.out_vol);
        continue;
      }
      const size_t np = (static_cast<size_t>(mg) + simd::kQgemmNr - 1) / simd::kQgemmNr * simd::kQgemmNr;
      const size_t kp = simd::qgemm_k_padded(static_cast<size_t>(k));
      if (kp <= kQgemmMaxK && np * kp + 16 * np <= s.room) {  // int_conv_qgemm's panels and constants
        int_conv_qgemm(c, cp, x, xz, w, wzi, n, g, s, emit);
        continue;
      }
      pack_a(w + g * mg * k, [&](size_t m) { return zero_point_at(c, wzi, g * mg + static_cast<int64_t>(m)); },
             static_cast<size_t>(mg), static_cast<size_t>(k), s.a);
      for (int64_t p0 = 0; p0 < cp.out_vol; p0 += kConvTile) {
        const int64_t p1 = std::min(cp.out_vol, p0 + kConvTile), cols = p1 - p0;
        pack_columns(x, xz, cp, n, g, p0, p1, s.b);
        parallel_for(c, static_cast<size_t>(mg), 8, [&](size_t r0, size_t r1) {
          simd::int8_gemm(s.a, s.b, static_cast<size_t>(k), static_cast<size_t>(cols), s.c, kConvTile, r0, r1);
        });
        for (int64_t m = 0; m < mg; ++m) emit(n, g * mg + m, s.c + m * kConvTile, p0, cols);
      }
    }
  return KernelStatus::kOk;
}

}  // namespace

Status conv_integer_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 4));
  std::vector<ExprId> out;
  KILN_TRY(conv_operands_shape(c, 0, 1, kNoInput, &out));
  KILN_TRY(check_integer_operands(c, c.in(1).shape[0]));
  c.scratch_bytes = conv_scratch(c, 0, 1, out);
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
  KernelStatus st = KernelStatus::kOk;
  KernelStatus types = with_q8_types(xv, wv, [&](const auto* x, const auto* w) {
    st = int_conv(c, planes, x, xz, w, 3, [&](int64_t n, int64_t m, const int32_t* acc, int64_t p0, int64_t count) {
      std::memcpy(y + (n * planes.g.out_ch + m) * planes.out_vol + p0, acc, static_cast<size_t>(count) * sizeof(int32_t));
    });
  });
  return types != KernelStatus::kOk ? types : st;
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
  c.scratch_bytes = conv_scratch(c, 0, 3, out);
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus qlinear_conv_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  const TensorView& wv = c.in(3);
  TensorView& yv = c.out(0);
  const ConvPlanes planes(xv, wv, yv, c.op_data->as<ConvPrep>());
  const int32_t xz = zero_point_at(c, 2), yz = zero_point_at(c, 7);
  const float xs = scale_at(c, 1), ys = scale_at(c, 6);
  int32_t lo, hi;
  output_range(c, yv.dtype, &lo, &hi);
  const int32_t* bias = c.has_input(8) ? c.in(8).as<int32_t>() : nullptr;
  KernelStatus st = KernelStatus::kOk;
  KernelStatus types = with_q8_types(xv, wv, [&](const auto* x, const auto* w) {
    st = int_conv(c, planes, x, xz, w, 5, [&](int64_t n, int64_t m, const int32_t* acc, int64_t p0, int64_t count) {
      const float ratio = xs * scale_at(c, 4, m) / ys;
      const int32_t b = bias ? bias[m] : 0;
      const int64_t at = (n * planes.g.out_ch + m) * planes.out_vol + p0;
      if (yv.dtype == DType::kU8)
        simd::requantize_u8(acc, static_cast<size_t>(count), b, ratio, yz, lo, hi, yv.as<uint8_t>() + at);
      else
        simd::requantize_i8(acc, static_cast<size_t>(count), b, ratio, yz, lo, hi, yv.as<int8_t>() + at);
    });
  });
  return types != KernelStatus::kOk ? types : st;
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

template <typename A, typename Zp>
void pack_a(const A* a, Zp&& zp, size_t m, size_t k, int16_t* out) {
  const size_t stride = 2 * simd::int8_gemm_k_pairs(k);
  for (size_t r = 0; r < m; ++r) {
    int16_t* o = out + r * stride;
    if constexpr (std::is_same_v<A, uint8_t>)
      simd::widen_u8(a + r * k, k, zp(r), o);
    else
      simd::widen_i8(a + r * k, k, zp(r), o);
    for (size_t kk = k; kk < stride; ++kk) o[kk] = 0;
  }
}

/// B (k x n) minus its zero point `bz` (one value, or one per column) into the packed layout:
/// two rows at a time, widened and interleaved in chunks of columns.
template <typename B>
void pack_b(const B* b, const TensorView* bz, size_t k, size_t n, int16_t* out) {
  const size_t kp = simd::int8_gemm_k_pairs(k), block = kp * 2 * simd::kInt8GemmCols;
  if (n % simd::kInt8GemmCols != 0) std::memset(out, 0, simd::int8_gemm_b_elems(k, n) * sizeof(int16_t));
  const bool per_column = bz != nullptr && bz->numel() > 1;
  const int32_t z0 = bz == nullptr || per_column ? 0 : int_at(*bz, 0);
  constexpr size_t kChunk = 256;
  int16_t rows[2][kChunk];
  for (size_t j0 = 0; j0 < n; j0 += kChunk) {
    const size_t cols = std::min(kChunk, n - j0);
    for (size_t kk = 0; kk < k; kk += 2) {
      for (size_t t = 0; t < 2; ++t) {
        if (kk + t >= k) {
          std::memset(rows[t], 0, sizeof(rows[t]));
          continue;
        }
        if constexpr (std::is_same_v<B, uint8_t>)
          simd::widen_u8(b + (kk + t) * n + j0, cols, z0, rows[t]);
        else
          simd::widen_i8(b + (kk + t) * n + j0, cols, z0, rows[t]);
        if (per_column)
          for (size_t j = 0; j < cols; ++j) rows[t][j] = static_cast<int16_t>(rows[t][j] - int_at(*bz, static_cast<int64_t>(j0 + j)));
      }
      simd::interleave_pairs(rows[0], rows[1], cols, out + (j0 / simd::kInt8GemmCols) * block + kk / 2 * 2 * simd::kInt8GemmCols,
                             block);
    }
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
      pack_a(a + a_off, [&](size_t) { return az; }, m, k, s.a);
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
  KILN_TRY(check_integer_operands(c, columns(c, 1)));
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
  // The range in up to kParts chunks over the pool, then merged (min and max are exact in any
  // order); a NaN or infinity anywhere fails the run.
  constexpr size_t kParts = 16, kGrain = 1 << 14;
  const size_t parts = std::min(kParts, std::max<size_t>(1, n / kGrain)), per = (n + parts - 1) / parts;
  float lo_part[kParts], hi_part[kParts];
  bool finite[kParts];
  parallel_for(c, parts, 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      const size_t at = t * per, len = at < n ? std::min(per, n - at) : 0;
      lo_part[t] = hi_part[t] = 0.f;
      finite[t] = len == 0 || simd::finite_min_max(x + at, len, &lo_part[t], &hi_part[t]);
    }
  });
  float lo = 0.f, hi = 0.f;  // the range always holds 0
  for (size_t t = 0; t < parts; ++t) {
    if (!finite[t]) return KernelStatus::kInvalidValue;
    lo = std::min(lo, lo_part[t]);
    hi = std::max(hi, hi_part[t]);
  }
  const float scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  const float z0 = -lo / scale;
  const int32_t zp = static_cast<int32_t>(std::nearbyint(z0 < 0.f ? 0.f : z0 > 255.f ? 255.f : z0));
  uint8_t* y = c.out(0).as<uint8_t>();
  parallel_for(c, n, kGrain, [&](size_t b, size_t e) { simd::quantize_u8(x + b, e - b, scale, zp, 0, 255, y + b); });
  if (c.num_outputs > 1 && c.outputs[1]) c.out(1).as<float>()[0] = scale;
  if (c.num_outputs > 2 && c.outputs[2]) c.out(2).as<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
