// Pad: grows (or, with negative pads, crops) each axis. pads = [b_1..b_n, e_1..e_n] come
// from input #1 from opset 11 (with the optional scalar constant_value #2 and, from opset
// 18, the axes #3 they apply to), from attributes pads/value before. Output size per axis:
// d + b + e. Negative pads crop first; the kept window [max(0,-b), d - max(0,-e)) is then
// padded by mode: constant (value), edge (nearest window element), reflect (mirror without
// repeating the border) or wrap (opset 19: the window repeated periodically). Pads wider than
// the window keep reflecting or wrapping, as numpy.pad; with a crop on the other side, wrap
// repeats the kept window (ONNX Runtime slices first, then pads).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

enum class PadMode : uint8_t { kConstant, kEdge, kReflect, kWrap };

constexpr int64_t kMaxPad = int64_t{1} << 40;

/// Parses the mode attribute; false for anything but constant, edge, reflect and wrap.
bool parse_mode(const core::Attrs& a, PadMode* m) {
  const char* s = a.get_str("mode", "constant");
  if (std::strcmp(s, "constant") == 0) *m = PadMode::kConstant;
  else if (std::strcmp(s, "edge") == 0) *m = PadMode::kEdge;
  else if (std::strcmp(s, "reflect") == 0) *m = PadMode::kReflect;
  else if (std::strcmp(s, "wrap") == 0) *m = PadMode::kWrap;
  else return false;
  return true;
}

/// Reads pads (and axes) as per-axis begin/end expressions over every axis of the input.
Status read_pads(ShapeCtx& c, std::vector<ExprId>* begin, std::vector<ExprId>* end) {
  core::ExprPool& p = c.pool;
  const int64_t rank = c.rank(0);
  std::vector<ExprId> pads;
  std::vector<int64_t> axes;
  if (c.num_inputs() == 1) {  // before opset 11
    if (!c.attrs.has("pads")) return c.error("needs pads (attribute before opset 11, input #1 from opset 11)");
    for (uint32_t k = 0; k < c.attrs.ints_size("pads"); ++k) pads.push_back(p.constant(c.attrs.ints("pads")[k]));
  } else {
    if (!known_ints(c, 1, &pads)) return c.error("pads input #1 must be a constant or computed from shapes");
    if (c.has_input(3) && !known_const_ints(c, 3, &axes)) return c.error("axes input #3 must be a constant");
  }
  if (!c.has_input(3))
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  if (pads.size() != 2 * axes.size())
    return c.error("pads has " + std::to_string(pads.size()) + " values, expected 2 per padded axis (" +
                   std::to_string(2 * axes.size()) + ")");
  for (ExprId v : pads)  // keeps the pool's arithmetic far from overflow
    if (p.is_const(v) && (p.const_value(v) > kMaxPad || p.const_value(v) < -kMaxPad))
      return c.error("pad " + std::to_string(p.const_value(v)) + " is out of range [-2^40, 2^40]");
  if (rank == 0 && !axes.empty()) return c.error("cannot pad a scalar (rank 0) along an axis");
  begin->assign(rank, p.constant(0));
  end->assign(rank, p.constant(0));
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < axes.size(); ++j) {
    KILN_ASSIGN_OR_RETURN(int64_t k, c.normalize_axis(axes[j], rank));
    if (seen[k]) return c.error("axis " + std::to_string(axes[j]) + " is listed twice in axes");
    seen[k] = true;
    (*begin)[k] = pads[j];
    (*end)[k] = pads[j + axes.size()];
  }
  return ok_status();
}

/// Reads element k of an i64 or i32 tensor.
int64_t read_int(const TensorView& t, int64_t k) {
  return t.dtype == DType::kI32 ? t.as<int32_t>()[k] : t.as<int64_t>()[k];
}

/// One axis at run time: output index i reads input index i - begin when it lies in the
/// kept window [lo, hi), else what the mode says.
struct AxisMap {
  int64_t begin = 0, lo = 0, hi = 0;

  /// Input index for output index i, or -1 for the constant.
  int64_t source(int64_t i, PadMode m) const {
    const int64_t s = i - begin;
    if (s >= lo && s < hi) return s;
    if (m == PadMode::kConstant) return -1;
    if (m == PadMode::kEdge) return s < lo ? lo : hi - 1;
    const int64_t n = hi - lo;
    if (m == PadMode::kWrap) return lo + core::floor_mod(s - lo, n);  // period n: x0 .. x(n-1) x0 ..
    // Reflection is periodic with period 2(n - 1) over the window: x0 x1 .. x(n-1) .. x1.
    if (n == 1) return lo;
    const int64_t r = core::floor_mod(s - lo, 2 * (n - 1));
    return lo + (r < n ? r : 2 * (n - 1) - r);
  }
};

/// Fills y (actual dims out[]) from x; Word is an unsigned type of the element size.
template <typename Word>
void pad_typed(const TensorView& x, TensorView& y, const AxisMap* maps, PadMode mode, Word fill) {
  const int rank = x.rank;
  const auto* src = static_cast<const Word*>(x.data);
  auto* dst = static_cast<Word*>(y.data);
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  int64_t in_strides[kMaxRank];
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; --k) {
    in_strides[k] = s;
    s *= x.dims[k];
  }
  const AxisMap& last = maps[rank - 1];
  const int64_t width = y.dims[rank - 1];
  // Output columns [copy_lo, copy_hi) read the input row directly.
  const int64_t copy_lo = std::clamp(last.begin + last.lo, int64_t{0}, width);
  const int64_t copy_hi = std::clamp(last.begin + last.hi, copy_lo, width);
  int64_t idx[kMaxRank] = {};
  const int64_t rows = y.numel() / width;
  for (int64_t r = 0; r < rows; ++r, dst += width) {
    int64_t base = 0;
    bool constant_row = false;
    for (int k = 0; k < rank - 1; ++k) {
      const int64_t from = maps[k].source(idx[k], mode);
      if (from < 0) constant_row = true;
      base += from * in_strides[k];
    }
    if (constant_row) {
      std::fill(dst, dst + width, fill);
    } else {
      const Word* row = src + base;
      for (int64_t i = 0; i < copy_lo; ++i) {
        const int64_t from = last.source(i, mode);
        dst[i] = from < 0 ? fill : row[from];
      }
      if (copy_hi > copy_lo)
        std::memcpy(dst + copy_lo, row + (copy_lo - last.begin), static_cast<size_t>(copy_hi - copy_lo) * sizeof(Word));
      for (int64_t i = copy_hi; i < width; ++i) {
        const int64_t from = last.source(i, mode);
        dst[i] = from < 0 ? fill : row[from];
      }
    }
    for (int k = rank - 2; k >= 0; --k) {  // odometer over the outer output axes
      if (++idx[k] < y.dims[k]) break;
      idx[k] = 0;
    }
  }
}

/// The fill value's bit pattern as a Word of the element size.
template <typename Word>
Word as_word(const void* bytes) {
  Word w;
  std::memcpy(&w, bytes, sizeof(Word));
  return w;
}

}  // namespace

Status pad_shape(ShapeCtx& c) {
  core::ExprPool& p = c.pool;
  if (c.num_inputs() == 0) return c.error("expects 1 to 4 inputs, got 0");
  if (c.num_inputs() > 1) KILN_TRY(c.expect_inputs(2, 4));
  if (!c.has_input(0)) return c.error("input #0 is required but missing");
  for (size_t i : {size_t{1}, size_t{3}})
    if (c.has_input(i) && c.in(i).dtype != DType::kI64 && c.in(i).dtype != DType::kI32)
      return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + ", expected i64");
  if (c.has_input(2)) {
    const SymTensor& v = c.in(2);
    if (v.dtype != c.in(0).dtype)
      return c.error(std::string("constant_value (input #2) has dtype ") + dtype_name(v.dtype) + ", expected " +
                     dtype_name(c.in(0).dtype) + " like input #0");
    for (ExprId d : v.shape)
      if (!p.is_const_value(d, 1))
        return c.error("constant_value (input #2) must be a scalar, got shape " + p.shape_to_string(v.shape));
  }
  PadMode mode;
  if (!parse_mode(c.attrs, &mode))
    return c.error(std::string("mode '") + c.attrs.get_str("mode", "") +
                   "' is not supported; expected constant, edge, reflect or wrap");
  std::vector<ExprId> begin, end;
  KILN_TRY(read_pads(c, &begin, &end));
  const std::vector<ExprId>& in = c.in(0).shape;
  std::vector<ExprId> out(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    const std::string where = "on axis " + std::to_string(k) + " of " + p.shape_to_string(in) + " padded by " +
                              p.to_string(begin[k]) + " and " + p.to_string(end[k]);
    out[k] = p.add(p.add(in[k], begin[k]), end[k]);
    // edge, reflect and wrap copy from the kept window d + min(b, 0) + min(e, 0), so it must not
    // be empty when they pad (then the output, no smaller, is not empty either). The window
    // is the least of d, d + b, d + e and d + b + e (the terms whose pads may be negative);
    // each is required separately, as sums simplify better than min() (d + b for
    // b = 32*ceildiv(d,32) - d is 32*ceildiv(d,32)).
    const bool grows = p.range(begin[k]).hi > 0 || p.range(end[k]).hi > 0;
    if (mode == PadMode::kConstant || !grows) {
      KILN_TRY(c.require_ge(out[k], p.constant(0), where));
    } else {
      const bool crop_b = p.range(begin[k]).lo < 0, crop_e = p.range(end[k]).lo < 0;
      std::vector<ExprId> terms = {in[k]};
      if (crop_b) terms.push_back(p.add(in[k], begin[k]));
      if (crop_e) terms.push_back(p.add(in[k], end[k]));
      if (crop_b && crop_e) terms.push_back(out[k]);
      for (ExprId t : terms)
        KILN_TRY(c.require_ge(t, p.constant(1), std::string("for ") + c.attrs.get_str("mode", "") +
                                                    " padding to have an element to copy " + where));
    }
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = std::move(out);
  return ok_status();
}

KernelStatus pad_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  PadMode mode;
  if (!parse_mode(c.attrs, &mode) || y.rank != x.rank || y.dtype != x.dtype) return KernelStatus::kInvalidValue;
  const bool from_attrs = c.num_inputs == 1;
  const int64_t n_pads = from_attrs ? c.attrs.ints_size("pads") : c.in(1).numel();
  const int64_t n_axes = c.has_input(3) ? c.in(3).numel() : x.rank;
  if (n_pads != 2 * n_axes || n_axes > x.rank) return KernelStatus::kInvalidValue;

  AxisMap maps[kMaxRank];
  int64_t end_pad[kMaxRank] = {};
  bool seen[kMaxRank] = {};
  for (int64_t j = 0; j < n_axes; ++j) {
    int64_t axis = c.has_input(3) ? read_int(c.in(3), j) : j;
    if (axis < 0) axis += x.rank;
    if (axis < 0 || axis >= x.rank || seen[axis]) return KernelStatus::kInvalidValue;
    seen[axis] = true;
    maps[axis].begin = from_attrs ? c.attrs.ints("pads")[j] : read_int(c.in(1), j);
    end_pad[axis] = from_attrs ? c.attrs.ints("pads")[j + n_axes] : read_int(c.in(1), j + n_axes);
  }
  bool empty = false;
  for (int k = 0; k < x.rank; ++k) {
    AxisMap& m = maps[k];
    const int64_t end = end_pad[k], d = x.dims[k];
    if (y.dims[k] != d + m.begin + end) return KernelStatus::kInvalidValue;
    m.lo = std::max<int64_t>(0, -m.begin);
    m.hi = d - std::max<int64_t>(0, -end);
    const bool grows = m.begin > 0 || end > 0;
    if (mode != PadMode::kConstant && grows && m.hi <= m.lo && y.dims[k] > 0) return KernelStatus::kInvalidValue;
    empty = empty || y.dims[k] == 0;
  }
  if (empty) return KernelStatus::kOk;

  // The fill value as bytes of the element type (zero by default).
  alignas(8) unsigned char fill[8] = {};
  if (c.has_input(2) && c.in(2).numel() == 1) {
    std::memcpy(fill, c.in(2).data, dtype_size(x.dtype));
  } else if (from_attrs && c.attrs.has("value")) {
    const float v = c.attrs.get_float("value", 0.f);
    const double safe = std::isfinite(v) ? v : 0.0;  // float-to-int casts of NaN or huge values are undefined
    const auto i64 = static_cast<int64_t>(std::clamp(safe, -9.2e18, 9.2e18));
    const auto i32 = static_cast<int32_t>(std::clamp(safe, -2147483648.0, 2147483647.0));
    const unsigned char b = v != 0.f;
    switch (x.dtype) {
      case DType::kF32: std::memcpy(fill, &v, 4); break;
      case DType::kI64: std::memcpy(fill, &i64, 8); break;
      case DType::kI32: std::memcpy(fill, &i32, 4); break;
      case DType::kBool: fill[0] = b; break;
      case DType::kI8: fill[0] = static_cast<unsigned char>(static_cast<int8_t>(std::clamp(safe, -128.0, 127.0))); break;
      case DType::kU8: fill[0] = static_cast<unsigned char>(std::clamp(safe, 0.0, 255.0)); break;
    }
  }
  switch (dtype_size(x.dtype)) {
    case 1: pad_typed<uint8_t>(x, y, maps, mode, as_word<uint8_t>(fill)); break;
    case 4: pad_typed<uint32_t>(x, y, maps, mode, as_word<uint32_t>(fill)); break;
    case 8: pad_typed<uint64_t>(x, y, maps, mode, as_word<uint64_t>(fill)); break;
    default: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
