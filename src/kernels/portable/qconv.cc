#include "kernels/portable/qconv.h"

#include <algorithm>
#include <cstring>

#include "kernels/simd/qgemm.h"

namespace kiln::kernels {

namespace {

struct QConvJob {
  const ConvPlanes* cp;
  const uint8_t* xg;  // batch n's input group, as bytes
  uint8_t x_zero, a_xor;
  bool x_signed, a_unsigned, want_rowsum;
  size_t k, kp, mg;
  const uint8_t* panels;
  const int32_t* bias;
  const int32_t* wz;  // null when all 0
  int32_t* c;         // mg x kConvTile
  int64_t p0, cols;
};

// Row of output position p: its window over the group's channels, (channel, kd, kh, kw)
// order as the weights hold it.
void gather_position(const QConvJob& j, int64_t p, uint8_t* row, int32_t* rowsum) {
  const ConvPlanes& cp = *j.cp;
  const ConvDims& d = cp.g;
  const Window& win = cp.win;
  const int64_t od = p / cp.out_plane, oh = p % cp.out_plane / d.out[kSlotW], ow = p % d.out[kSlotW];
  int32_t sum = 0;
  size_t at = 0;
  for (int64_t ci = 0; ci < cp.group_ch; ++ci) {
    const uint8_t* xc = j.xg + ci * cp.in_vol;
    for (int64_t kd = 0; kd < d.k[kSlotD]; ++kd) {
      const int64_t id = od * win.stride[kSlotD] + kd * win.dilation[kSlotD] - win.pad_begin[kSlotD];
      for (int64_t kh = 0; kh < d.k[kSlotH]; ++kh) {
        const int64_t ih = oh * win.stride[kSlotH] + kh * win.dilation[kSlotH] - win.pad_begin[kSlotH];
        const bool inside = id >= 0 && id < d.in[kSlotD] && ih >= 0 && ih < d.in[kSlotH];
        const uint8_t* xr = xc + (id * d.in[kSlotH] + ih) * d.in[kSlotW];
        for (int64_t kw = 0; kw < d.k[kSlotW]; ++kw) {
          const int64_t iw = ow * win.stride[kSlotW] + kw * win.dilation[kSlotW] - win.pad_begin[kSlotW];
          const uint8_t v = inside && iw >= 0 && iw < d.in[kSlotW] ? xr[iw] : j.x_zero;
          row[at++] = static_cast<uint8_t>(v ^ j.a_xor);
          sum += j.x_signed ? static_cast<int8_t>(v) : v;
        }
      }
    }
  }
  std::memset(row + j.k, 0, j.kp - j.k);
  *rowsum = j.want_rowsum ? sum : 0;
}

// Rows of mr positions starting at p whose windows all lie inside the input, gathered tap by
// tap (the tap's offset from each window's origin is the same for every position); false
// (nothing written) when a window reaches into the padding.
bool gather_interior(const QConvJob& j, int64_t p, size_t mr, uint8_t* a, int32_t* rowsum) {
  const ConvPlanes& cp = *j.cp;
  const ConvDims& d = cp.g;
  const Window& win = cp.win;
  const uint8_t* base[simd::kQgemmMr];
  for (size_t r = 0; r < mr; ++r, ++p) {
    const int64_t od = p / cp.out_plane, oh = p % cp.out_plane / d.out[kSlotW], ow = p % d.out[kSlotW];
    const int64_t id0 = od * win.stride[kSlotD] - win.pad_begin[kSlotD], ih0 = oh * win.stride[kSlotH] - win.pad_begin[kSlotH];
    const int64_t iw0 = ow * win.stride[kSlotW] - win.pad_begin[kSlotW];
    if (id0 < 0 || id0 + (d.k[kSlotD] - 1) * win.dilation[kSlotD] >= d.in[kSlotD] || ih0 < 0 ||
        ih0 + (d.k[kSlotH] - 1) * win.dilation[kSlotH] >= d.in[kSlotH] || iw0 < 0 ||
        iw0 + (d.k[kSlotW] - 1) * win.dilation[kSlotW] >= d.in[kSlotW])
      return false;
    base[r] = j.xg + (id0 * d.in[kSlotH] + ih0) * d.in[kSlotW] + iw0;
  }
  size_t kk = 0;
  for (int64_t ci = 0; ci < cp.group_ch; ++ci)
    for (int64_t kd = 0; kd < d.k[kSlotD]; ++kd)
      for (int64_t kh = 0; kh < d.k[kSlotH]; ++kh) {
        const int64_t row = ci * cp.in_vol + (kd * win.dilation[kSlotD] * d.in[kSlotH] + kh * win.dilation[kSlotH]) * d.in[kSlotW];
        for (int64_t kw = 0; kw < d.k[kSlotW]; ++kw, ++kk) {
          const int64_t off = row + kw * win.dilation[kSlotW];
          for (size_t r = 0; r < mr; ++r) a[r * j.kp + kk] = static_cast<uint8_t>(base[r][off] ^ j.a_xor);
        }
      }
  for (size_t r = 0; r < mr; ++r) {
    uint8_t* row = a + r * j.kp;
    std::memset(row + j.k, 0, j.kp - j.k);
    int32_t sum = 0;
    if (j.want_rowsum && j.x_signed)
      for (size_t i = 0; i < j.k; ++i) sum += static_cast<int8_t>(row[i] ^ j.a_xor);
    else if (j.want_rowsum)
      for (size_t i = 0; i < j.k; ++i) sum += static_cast<uint8_t>(row[i] ^ j.a_xor);
    rowsum[r] = sum;
  }
  return true;
}

// Positions [p0 + 8 * first, p0 + 8 * last) of the tile, every panel.
void qconv_rows(const QConvJob& j, size_t first, size_t last) {
  alignas(64) uint8_t a[simd::kQgemmMr * kQgemmMaxK];
  int32_t rowsum[simd::kQgemmMr];
  const size_t blocks = (j.mg + simd::kQgemmNr - 1) / simd::kQgemmNr, panel = simd::qgemm_panel_bytes(j.kp);
  for (size_t sub = first; sub < last; ++sub) {
    const int64_t r0 = static_cast<int64_t>(sub * simd::kQgemmMr);
    const size_t mr = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(simd::kQgemmMr), j.cols - r0));
    if (!gather_interior(j, j.p0 + r0, mr, a, rowsum))
      for (size_t r = 0; r < mr; ++r) gather_position(j, j.p0 + r0 + static_cast<int64_t>(r), a + r * j.kp, rowsum + r);
    for (size_t b = 0; b < blocks; ++b) {
      simd::QgemmI32Epilogue e;
      e.bias = j.bias + b * simd::kQgemmNr;
      e.wz = j.wz ? j.wz + b * simd::kQgemmNr : nullptr;
      simd::qgemm_i32t(mr, j.kp, a, j.kp, rowsum, j.panels + b * panel, e, j.c + b * simd::kQgemmNr * kConvTile + r0,
                       kConvTile, std::min(simd::kQgemmNr, j.mg - b * simd::kQgemmNr), j.a_unsigned);
    }
  }
}

}  // namespace

void qconv_constants(bool x_signed, bool w_signed, int32_t xz, size_t k, const int32_t* colsum, const int32_t* wz,
                     size_t mg, int32_t* bias, int32_t* wz_out, QConvOperands* op) {
  const bool flip = x_signed == w_signed;  // both int8 or both uint8 (qgemm.h)
  const int64_t shift = !flip ? 0 : x_signed ? 128 : -128;
  const size_t np = (mg + simd::kQgemmNr - 1) / simd::kQgemmNr * simd::kQgemmNr;
  bool any_wz = false;
  for (size_t m = 0; m < np; ++m) {
    const int64_t z = m < mg ? wz[m] : 0;
    const int64_t t = m < mg ? -(shift + xz) * colsum[m] + static_cast<int64_t>(k) * xz * z : 0;
    bias[m] = static_cast<int32_t>(static_cast<uint32_t>(t));  // int32 arithmetic wraps back
    wz_out[m] = static_cast<int32_t>(z);
    any_wz = any_wz || z != 0;
  }
  op->x_signed = x_signed;
  op->x_zero = static_cast<uint8_t>(xz);
  op->a_unsigned = w_signed;
  op->a_xor = flip ? 0x80 : 0;
  op->bias = bias;
  op->wz = any_wz ? wz_out : nullptr;
}

void qconv_group(const RunCtx& c, const ConvPlanes& cp, const QConvOperands& op, int32_t* tile, QConvEmit emit,
                 void* ctx) {
  QConvJob j{};
  j.cp = &cp;
  j.xg = op.xg;
  j.x_zero = op.x_zero;
  j.a_xor = op.a_xor;
  j.x_signed = op.x_signed;
  j.a_unsigned = op.a_unsigned;
  j.want_rowsum = op.wz != nullptr;
  j.k = static_cast<size_t>(cp.group_ch * cp.k_vol);
  j.kp = simd::qgemm_k_padded(j.k);
  j.mg = static_cast<size_t>(cp.out_per_group);
  j.panels = op.panels;
  j.bias = op.bias;
  j.wz = op.wz;
  j.c = tile;
  for (int64_t p0 = 0; p0 < cp.out_vol; p0 += kConvTile) {
    j.p0 = p0;
    j.cols = std::min<int64_t>(kConvTile, cp.out_vol - p0);
    const size_t subs = (static_cast<size_t>(j.cols) + simd::kQgemmMr - 1) / simd::kQgemmMr;
    parallel_for(c, subs, std::max<size_t>(1, 4096 / std::max<size_t>(1, j.k * j.mg / 8)),
                 [&](size_t b, size_t e) { qconv_rows(j, b, e); });
    for (size_t m = 0; m < j.mg; ++m) emit(ctx, static_cast<int64_t>(m), j.c + m * kConvTile, p0, j.cols);
  }
}

}  // namespace kiln::kernels
