// Concat: inputs of one dtype and rank joined along `axis`; the other axes must agree.
// Known small integer inputs (e.g. gathered shape values) fold into the output's values.
#include <cstring>

#include "kernels/kernel.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Carries every input's known values (sym_values) into the joined output.
void fold_concat(ShapeCtx& c, int64_t axis) {
  std::vector<int64_t> out_dims;
  if (!can_carry(c, &out_dims)) return;
  const size_t n = c.num_inputs();
  std::vector<std::vector<ExprId>> values(n);
  std::vector<int64_t> block(n);  // elements per outer index
  int64_t inner = 1, outer = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= out_dims[k];
  for (size_t k = axis + 1; k < out_dims.size(); ++k) inner *= out_dims[k];
  for (size_t i = 0; i < n; ++i) {
    std::vector<int64_t> dims;
    if (!const_dims(c.pool, c.in(i).shape, &dims) || !small_values(c, i, &values[i])) return;
    if (static_cast<int64_t>(values[i].size()) != numel_of(dims)) return;
    block[i] = dims[axis] * inner;
  }
  std::vector<ExprId> out;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < n; ++i)
      out.insert(out.end(), values[i].begin() + o * block[i], values[i].begin() + (o + 1) * block[i]);
  if (static_cast<int64_t>(out.size()) == numel_of(out_dims)) c.out(0).sym_values = std::move(out);
}

}  // namespace

Status concat_shape(ShapeCtx& c) {
  if (c.num_inputs() == 0) return c.error("expects at least 1 input, got 0");
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (!c.has_input(i)) return c.error("input #" + std::to_string(i) + " is required but missing");
  if (!c.attrs.has("axis")) return c.error("needs the axis attribute");
  core::ExprPool& p = c.pool;
  const int64_t rank = c.rank(0);
  if (rank == 0) return c.error("cannot concatenate scalars (rank 0)");
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 0), rank));
  std::vector<ExprId> out = c.in(0).shape;
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    const SymTensor& t = c.in(i);
    const std::string which = "input #" + std::to_string(i) + " " + p.shape_to_string(t.shape);
    if (t.dtype != c.in(0).dtype)
      return c.error(which + " has dtype " + dtype_name(t.dtype) + " but input #0 has " + dtype_name(c.in(0).dtype) +
                     "; all inputs must share one dtype");
    if (c.rank(i) != rank)
      return c.error(which + " has rank " + std::to_string(c.rank(i)) + " but input #0 " +
                     p.shape_to_string(c.in(0).shape) + " has rank " + std::to_string(rank));
    for (int64_t k = 0; k < rank; ++k) {
      if (k == axis) continue;
      KILN_TRY(c.require_eq(c.in(0).shape[k], t.shape[k],
                            "on dim " + std::to_string(k) + " to concatenate input #0 " +
                                p.shape_to_string(c.in(0).shape) + " with " + which + " along axis " +
                                std::to_string(axis)));
      if (p.is_const(t.shape[k])) out[k] = t.shape[k];  // a guarded-equal constant reads better
    }
    out[axis] = p.add(out[axis], t.shape[axis]);
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape = std::move(out);
  fold_concat(c, axis);
  return ok_status();
}

KernelStatus concat_run(const RunCtx& c) {
  TensorView& y = c.out(0);
  int64_t axis = c.attrs.get_int("axis", 0);
  if (axis < 0) axis += y.rank;
  if (axis < 0 || axis >= y.rank) return KernelStatus::kInvalidValue;
  // Bind fixed every shape; still refuse anything that would write past the output.
  int64_t total = 0;
  for (uint32_t i = 0; i < c.num_inputs; ++i) {
    if (!c.has_input(i) || c.in(i).rank != y.rank) return KernelStatus::kInvalidValue;
    for (int k = 0; k < y.rank; ++k)
      if (k != axis && c.in(i).dims[k] != y.dims[k]) return KernelStatus::kInvalidValue;
    total += c.in(i).dims[axis];
  }
  if (total != y.dims[axis]) return KernelStatus::kInvalidValue;

  const auto es = static_cast<int64_t>(dtype_size(y.dtype));
  int64_t outer = 1, inner = es;  // inner: bytes per unit step along the axis
  for (int k = 0; k < axis; ++k) outer *= y.dims[k];
  for (int k = static_cast<int>(axis) + 1; k < y.rank; ++k) inner *= y.dims[k];
  auto* dst = static_cast<unsigned char*>(y.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (uint32_t i = 0; i < c.num_inputs; ++i) {
      const int64_t block = c.in(i).dims[axis] * inner;
      if (block == 0) continue;
      std::memcpy(dst, static_cast<const unsigned char*>(c.in(i).data) + o * block, static_cast<size_t>(block));
      dst += block;
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
