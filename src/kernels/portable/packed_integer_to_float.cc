// PackedMatMulIntegerToFloat (Kiln-internal, made by export's fold of a dynamically quantized
// MatMul, export/onnx/qdq_fold.h's fold_dynamic_matmuls): what ONNX Runtime's dynamic quantizer writes as
// MatMulInteger(a, B, a_zero_point, B_zero_point) -> Cast(float) -> Mul(a_scale * B_scale)
// [-> Add(bias)], in one instruction with B packed at export:
//   y = float((a - az) @ (B - bz)) * (a_scale * B_scale) [+ bias]
// with the same f32 roundings as the unfused ops (the product, then the sum).
//
// Inputs: a [..., K] i8/u8; a_scale f32 (one value); a_zero_point (a's dtype, one value,
// optional); B as quantized GEMM panels (u8 bytes, simd/qgemm.h, int8 or uint8 values as the
// attribute b_signed says); B's column sums i32 [N]; B's zero points i32 [N]; B's scales f32
// [N]; bias f32 [N] (optional). Attributes k, n, b_signed. Output f32 [..., N].
//
// PackedConvIntegerToFloat is the same for a dense convolution (ConvInteger, group 1): inputs
// x [N, C, ...] i8/u8, x_scale, x_zero_point, W as panels (qconv.h: K = C * kernel volume,
// rows in (channel, kd, kh, kw) order), W's column sums, zero points and scales per output
// channel [M], bias [M] (optional); attributes out_channels, group_in (= C), kernel_shape and
// the window attributes, b_signed. Output f32 [N, M, ...].
//
// Rows of a are gathered 8 at a time (top bit flipped where the microkernel's operand
// signedness asks for it) unless they can be read in place; the flip's shift and the zero
// points' cross terms go into a per-call column constant (scratch).
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/conv.h"
#include "kernels/portable/qconv.h"
#include "kernels/portable/quant.h"
#include "kernels/simd/qgemm.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kMaxK = 8192;  // a tile's 8 rows are gathered on the stack
constexpr size_t kNoInputIndex = static_cast<size_t>(-1);

size_t padded16(size_t n) { return (n + simd::kQgemmNr - 1) / simd::kQgemmNr * simd::kQgemmNr; }

struct Job {
  const uint8_t* a;
  const uint8_t* panels;
  float* y;
  size_t rows, k, kp, n, tiles, chunks, blocks_per_chunk;
  uint8_t a_xor;
  bool a_signed, a_unsigned_operand, in_place, want_rowsum;
  simd::QgemmF32Epilogue e;  // over all columns (padded)
};

void run_tasks(const Job& j, size_t begin, size_t end) {
  alignas(64) uint8_t buf[simd::kQgemmMr * kMaxK];
  int32_t rowsum[simd::kQgemmMr] = {};
  const size_t blocks = (j.n + simd::kQgemmNr - 1) / simd::kQgemmNr, panel = simd::qgemm_panel_bytes(j.kp);
  for (size_t task = begin; task < end; ++task) {
    const size_t tile = task / j.chunks, chunk = task % j.chunks;
    const size_t r0 = tile * simd::kQgemmMr, mr = std::min(simd::kQgemmMr, j.rows - r0);
    const uint8_t* a = j.a + r0 * j.k;
    size_t lda = j.k;
    if (!j.in_place) {
      for (size_t r = 0; r < mr; ++r) {
        const uint8_t* src = j.a + (r0 + r) * j.k;
        uint8_t* dst = buf + r * j.kp;
        for (size_t i = 0; i < j.k; ++i) dst[i] = static_cast<uint8_t>(src[i] ^ j.a_xor);
        std::memset(dst + j.k, 0, j.kp - j.k);
        int32_t s = 0;
        if (j.want_rowsum && j.a_signed)
          for (size_t i = 0; i < j.k; ++i) s += static_cast<int8_t>(src[i]);
        else if (j.want_rowsum)
          for (size_t i = 0; i < j.k; ++i) s += src[i];
        rowsum[r] = s;
      }
      a = buf;
      lda = j.kp;
    }
    const size_t b0 = chunk * j.blocks_per_chunk, b1 = std::min(blocks, b0 + j.blocks_per_chunk);
    for (size_t b = b0; b < b1; ++b) {
      const size_t c0 = b * simd::kQgemmNr;
      simd::QgemmF32Epilogue e;
      e.bias = j.e.bias + c0;
      e.wz = j.e.wz ? j.e.wz + c0 : nullptr;
      e.scale = j.e.scale + c0;
      e.fbias = j.e.fbias ? j.e.fbias + c0 : nullptr;
      simd::qgemm_f32(mr, j.kp, a, lda, rowsum, j.panels + b * panel, e, j.y + r0 * j.n + c0, j.n,
                      std::min(simd::kQgemmNr, j.n - c0), j.a_unsigned_operand);
    }
  }
}

}  // namespace

Status packed_matmul_integer_to_float_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(7, 8));
  const int64_t k = c.attrs.get_int("k", 0), n = c.attrs.get_int("n", 0);
  if (k < 1 || k > kMaxK || n < 1) return c.error("attributes k (1.." + std::to_string(kMaxK) + ") and n (>= 1) are required");
  const DType at = c.in(0).dtype;
  if (at != DType::kI8 && at != DType::kU8) return c.error("input #0 has dtype " + std::string(dtype_name(at)) + ", expected i8 or u8");
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  if (c.has_input(2) && c.in(2).dtype != at) return c.error("a's zero point (input #2) must have a's dtype");
  KILN_TRY(c.expect_dtype(3, DType::kU8));
  KILN_TRY(c.expect_dtype(4, DType::kI32));
  KILN_TRY(c.expect_dtype(5, DType::kI32));
  KILN_TRY(c.expect_dtype(6, DType::kF32));
  if (c.has_input(7)) KILN_TRY(c.expect_dtype(7, DType::kF32));
  const std::vector<ExprId>& as = c.in(0).shape;
  if (as.empty()) return c.error("input #0 is a scalar; expected [..., K]");
  KILN_TRY(c.require_eq(as.back(), c.pool.constant(k), "a's last axis must be the packed weights' K"));
  std::vector<ExprId> out = as;
  out.back() = c.pool.constant(n);
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  // Per-call column constants: bias terms and weight zero points (i32), scales and bias (f32).
  c.scratch_bytes = c.pool.constant(static_cast<int64_t>(4 * 4 * padded16(static_cast<size_t>(n)) + 64));
  return ok_status();
}

KernelStatus packed_matmul_integer_to_float_run(const RunCtx& c) {
  const TensorView& av = c.in(0);
  const size_t k = static_cast<size_t>(c.attrs.get_int("k", 0)), n = static_cast<size_t>(c.attrs.get_int("n", 0));
  const size_t rows = static_cast<size_t>(av.numel()) / k, np = padded16(n);
  if (rows == 0) return KernelStatus::kOk;
  if (c.scratch == nullptr || c.scratch_bytes < 4 * 4 * np) return KernelStatus::kInvalidValue;
  const bool a_signed = av.dtype == DType::kI8, b_signed = c.attrs.get_int("b_signed", 1) != 0;
  const bool flip = a_signed == b_signed;  // both int8 or both uint8: flip a's top bit (qgemm.h)
  const int64_t shift = !flip ? 0 : a_signed ? 128 : -128;
  const int64_t az = zero_point_at(c, 2);
  const float xs = scale_at(c, 1);
  const int32_t* colsum = c.in(4).as<int32_t>();
  const int32_t* wz = c.in(5).as<int32_t>();
  const float* ws = c.in(6).as<float>();
  auto* bias = static_cast<int32_t*>(c.scratch);
  int32_t* wzp = bias + np;
  auto* scale = reinterpret_cast<float*>(wzp + np);
  float* fbias = scale + np;
  bool any_wz = false;
  for (size_t j = 0; j < np; ++j) {
    const bool col = j < n;
    const int64_t t = col ? -(shift + az) * colsum[j] + static_cast<int64_t>(k) * az * wz[j] : 0;
    bias[j] = static_cast<int32_t>(static_cast<uint32_t>(t));  // int32 arithmetic wraps back
    wzp[j] = col ? wz[j] : 0;
    any_wz = any_wz || wzp[j] != 0;
    scale[j] = col ? xs * ws[j] : 0.f;
    fbias[j] = col && c.has_input(7) ? c.in(7).as<float>()[j] : 0.f;
  }
  Job j{};
  j.a = static_cast<const uint8_t*>(av.data);
  j.panels = c.in(3).as<uint8_t>();
  j.y = c.out(0).as<float>();
  j.rows = rows, j.k = k, j.kp = simd::qgemm_k_padded(k), j.n = n;
  j.a_xor = flip ? 0x80 : 0;
  j.a_signed = a_signed;
  j.a_unsigned_operand = b_signed;
  j.want_rowsum = any_wz;
  j.in_place = !flip && !any_wz && k % 4 == 0;
  j.e.bias = bias, j.e.wz = any_wz ? wzp : nullptr, j.e.scale = scale, j.e.fbias = c.has_input(7) ? fbias : nullptr;
  j.tiles = (rows + simd::kQgemmMr - 1) / simd::kQgemmMr;
  // Few row tiles (a decoder step): split the columns too, so every thread has work.
  const size_t blocks = np / simd::kQgemmNr;
  j.chunks = std::min(blocks, std::max<size_t>(1, 8 / j.tiles));
  j.blocks_per_chunk = (blocks + j.chunks - 1) / j.chunks;
  j.chunks = (blocks + j.blocks_per_chunk - 1) / j.blocks_per_chunk;
  const size_t grain = std::max<size_t>(1, (1 << 15) / std::max<size_t>(1, simd::kQgemmMr * k * j.blocks_per_chunk * 16));
  parallel_for(c, j.tiles * j.chunks, grain, [&](size_t b, size_t e) { run_tasks(j, b, e); });
  return KernelStatus::kOk;
}

namespace {

// The weight's shape [M, C, kernel...] from the attributes (the packed op has no weight tensor).
bool packed_conv_weight_dims(const core::Attrs& a, int rank, int64_t* dims) {
  const int64_t* ks = a.ints("kernel_shape");
  if (!ks || static_cast<int>(a.ints_size("kernel_shape")) != rank - 2) return false;
  dims[0] = a.get_int("out_channels", 0);
  dims[1] = a.get_int("group_in", 0);
  for (int k = 0; k < rank - 2; ++k) dims[2 + k] = ks[k];
  return dims[0] > 0 && dims[1] > 0;
}

size_t packed_conv_scratch(int64_t m) {
  return static_cast<size_t>(m) * kConvTile * 4 + 8 * padded16(static_cast<size_t>(m)) + 64;
}

}  // namespace

Status packed_conv_integer_to_float_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(7, 8));
  const DType xt = c.in(0).dtype;
  if (xt != DType::kI8 && xt != DType::kU8) return c.error("input #0 has dtype " + std::string(dtype_name(xt)) + ", expected i8 or u8");
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  if (c.has_input(2) && c.in(2).dtype != xt) return c.error("x's zero point (input #2) must have x's dtype");
  KILN_TRY(c.expect_dtype(3, DType::kU8));
  KILN_TRY(c.expect_dtype(4, DType::kI32));
  KILN_TRY(c.expect_dtype(5, DType::kI32));
  KILN_TRY(c.expect_dtype(6, DType::kF32));
  if (c.has_input(7)) KILN_TRY(c.expect_dtype(7, DType::kF32));
  if (c.attrs.get_int("group", 1) != 1) return c.error("only group 1 (a dense convolution) is packed");
  const int rank = static_cast<int>(c.in(0).shape.size());
  int64_t dims[kMaxRank];
  if (rank < 3 || rank > kMaxRank || !packed_conv_weight_dims(c.attrs, rank, dims))
    return c.error("attributes out_channels, group_in and kernel_shape (one per spatial axis of x) are required");
  int64_t k = dims[1];
  for (int a = 2; a < rank; ++a) k *= dims[a];
  if (simd::qgemm_k_padded(static_cast<size_t>(k)) > kQgemmMaxK) return c.error("K = " + std::to_string(k) + " is above 8192");
  std::vector<ExprId> w;
  for (int a = 0; a < rank; ++a) w.push_back(c.pool.constant(dims[a]));
  std::vector<ExprId> out;
  KILN_TRY(conv_operands_shape_of(c, 0, w, kNoInputIndex, &out));
  c.out(0).dtype = DType::kF32;
  c.out(0).shape = std::move(out);
  c.scratch_bytes = c.pool.constant(static_cast<int64_t>(packed_conv_scratch(dims[0])));
  return ok_status();
}

KernelStatus packed_conv_integer_to_float_run(const RunCtx& c) {
  const TensorView& xv = c.in(0);
  TensorView wv;
  wv.rank = xv.rank;
  if (!packed_conv_weight_dims(c.attrs, xv.rank, wv.dims)) return KernelStatus::kInvalidValue;
  const ConvPlanes cp(xv, wv, c.out(0), c.op_data->as<ConvPrep>());
  const size_t m = static_cast<size_t>(cp.g.out_ch), np = padded16(m), k = static_cast<size_t>(cp.group_ch * cp.k_vol);
  if (cp.out_vol == 0 || cp.g.batch == 0) return KernelStatus::kOk;
  if (c.scratch == nullptr || c.scratch_bytes < packed_conv_scratch(cp.g.out_ch)) return KernelStatus::kInvalidValue;
  auto* tile = static_cast<int32_t*>(c.scratch);
  int32_t* bias = tile + m * kConvTile;
  int32_t* wz = bias + np;
  QConvOperands op;
  op.panels = c.in(3).as<uint8_t>();
  qconv_constants(xv.dtype == DType::kI8, c.attrs.get_int("b_signed", 1) != 0, zero_point_at(c, 2), k,
                  c.in(4).as<int32_t>(), c.in(5).as<int32_t>(), m, bias, wz, &op);
  struct Out {
    float* y;
    const float* ws;
    const float* fbias;
    float xs;
    int64_t plane;
  } out{nullptr, c.in(6).as<float>(), c.has_input(7) ? c.in(7).as<float>() : nullptr, scale_at(c, 1), cp.out_vol};
  for (int64_t n = 0; n < cp.g.batch; ++n) {
    op.xg = static_cast<const uint8_t*>(xv.data) + n * cp.g.in_ch * cp.in_vol;
    out.y = c.out(0).as<float>() + n * cp.g.out_ch * cp.out_vol;
    // y = float(acc) * (x_scale * w_scale) [+ bias]: two f32 roundings, as the unfused ops.
    qconv_group(c, cp, op, tile, [](void* ctx, int64_t ch, const int32_t* acc, int64_t p0, int64_t count) {
      const Out& o = *static_cast<const Out*>(ctx);
      const float s = o.xs * o.ws[ch];
      float* y = o.y + ch * o.plane + p0;
      if (o.fbias)
        for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(acc[i]) * s + o.fbias[ch];
      else
        for (int64_t i = 0; i < count; ++i) y[i] = static_cast<float>(acc[i]) * s;
    }, &out);
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
