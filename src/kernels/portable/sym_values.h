#pragma once
// Export-time contents of small integer tensors (SymTensor::sym_values). Ops carry them so
// that the shape arithmetic exporters emit (Shape -> Gather -> Mul -> Concat -> Reshape,
// Equal/Where around Expand...) folds into SymExprs. Booleans are carried as the constants
// 0 and 1, and only when the result is provable. f32 tensors are carried only while every
// value is an integer within +-2^24, which f32 holds exactly (tf2onnx and paddle2onnx
// compute sizes as Cast(float) -> Mul -> Cast(int64)). Nothing here runs on the device.

#include <vector>

#include "kernels/kernel.h"

namespace kiln::kernels {

/// Largest tensor (in elements) whose contents are carried.
constexpr int64_t kMaxSymValues = 64;

/// Every integer of magnitude up to 2^24 is exact in f32.
constexpr int64_t kMaxExactF32 = int64_t{1} << 24;

/// True when e lies within +-kMaxExactF32 for every dim value (so f32 holds it exactly).
bool exact_in_f32(const core::ExprPool& p, ExprId e);

/// The dims of `shape` as numbers; false if any is symbolic.
bool const_dims(const core::ExprPool& p, const std::vector<ExprId>& shape, std::vector<int64_t>* out);

/// Product of constant dims.
int64_t numel_of(const std::vector<int64_t>& dims);

/// Contents of input i when known and small: its sym_values, or the data of a constant
/// i64/i32/bool tensor of at most kMaxSymValues elements (bool as 0/1), or of an f32 one
/// whose values are all integers within +-kMaxExactF32, or nothing for a tensor with no
/// elements (always known). False otherwise.
bool small_values(ShapeCtx& c, size_t i, std::vector<ExprId>* out);

/// Whether output 0 (dtype and shape already set) may carry values: at most kMaxSymValues
/// elements of constant dims, returned in *dims. (f32 outputs too: an op that makes f32
/// values must only make integers within +-kMaxExactF32.)
bool can_carry(ShapeCtx& c, std::vector<int64_t>* dims);

/// For each element of an output of dims `out`, the flat index of the element it reads in
/// an operand of dims `in` under numpy broadcasting (aligned right, size-1 axes repeat).
std::vector<int64_t> broadcast_map(const std::vector<int64_t>& out, const std::vector<int64_t>& in);

/// Integer elementwise ops as the kernels compute them.
/// kMod: remainder with the divisor's sign (ONNX Mod, fmod=0); kFmod: with the dividend's
/// sign (fmod=1, C's %).
enum class IntOp { kAdd, kSub, kMul, kDiv, kMax, kMin, kMod, kFmod };

/// a op b on tensors of dtype t as an expression. i64/i32: constants fold exactly as the
/// kernel computes (wrapping, Div truncating); symbolic operands fold only when the result
/// is exact: no overflow possible, and Div only when a >= 0 and b >= 1 (truncation is then
/// floordiv). f32: only when the exact result is an integer within +-kMaxExactF32 (Div by a
/// constant that provably divides a), which the kernel's float arithmetic then gives exactly.
/// kNoExpr when either operand is kNoExpr or the result cannot be expressed.
ExprId fold_int_op(core::ExprPool& p, IntOp op, DType t, ExprId a, ExprId b);

/// Comparisons, as carried in bool tensors.
enum class CmpOp { kEq, kLt, kGt, kLe, kGe };

/// 1 or 0 when `a op b` is provable for every dim value, else kNoExpr.
ExprId fold_compare(core::ExprPool& p, CmpOp op, ExprId a, ExprId b);

/// Truth of a carried bool value: 1, 0 or -1 when unknown (kNoExpr or symbolic).
int truth_of(const core::ExprPool& p, ExprId v);

/// Sets out(0).sym_values to fn(args) per element of output 0, where args[i] is the
/// broadcast element of input i in [0, n) (kNoExpr when input i's values are unknown).
/// Leaves them empty when output 0 cannot carry values, no input is known, or fn returns
/// kNoExpr for any element. Call after output 0's dtype and shape are set.
template <typename Fn>
void fold_broadcast(ShapeCtx& c, size_t n, Fn fn) {
  std::vector<int64_t> out_dims;
  if (!can_carry(c, &out_dims)) return;
  std::vector<std::vector<ExprId>> values(n);
  std::vector<std::vector<int64_t>> maps(n);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int64_t> dims;
    if (!c.has_input(i) || !const_dims(c.pool, c.in(i).shape, &dims)) return;
    if (!small_values(c, i, &values[i]) || static_cast<int64_t>(values[i].size()) != numel_of(dims)) {
      values[i].clear();
      continue;
    }
    any = true;
    maps[i] = broadcast_map(out_dims, dims);
  }
  if (!any) return;
  const int64_t total = numel_of(out_dims);
  std::vector<ExprId> out(static_cast<size_t>(total)), args(n);
  for (int64_t e = 0; e < total; ++e) {
    for (size_t i = 0; i < n; ++i) args[i] = maps[i].empty() ? core::kNoExpr : values[i][maps[i][e]];
    out[e] = fn(args);
    if (out[e] == core::kNoExpr) return;
  }
  c.out(0).sym_values = std::move(out);
}

/// Copies input 0's known values to output 0 unchanged (views: the element order is kept).
void fold_view(ShapeCtx& c);

}  // namespace kiln::kernels
