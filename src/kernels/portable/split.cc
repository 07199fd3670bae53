// Split: cuts input #0 along `axis` (default 0) into one piece per output. Sizes come from
// input #1 (opset 13+), else attribute `split` (older), else num_outputs (opset 18: pieces
// of ceil(D / n), the last one smaller), else equal pieces of D / n (D must divide).
// The kernel cuts by the outputs' actual sizes, which bind evaluated from these.
#include <cstring>
#include <string>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Per-output sizes along the axis of size d.
Status piece_sizes(ShapeCtx& c, ExprId d, std::vector<ExprId>* sizes) {
  core::ExprPool& p = c.pool;
  const auto n = static_cast<int64_t>(c.outputs.size());
  const std::string axis_of = "along axis " + std::to_string(c.attrs.get_int("axis", 0)) + " of " +
                              p.shape_to_string(c.in(0).shape);
  std::vector<ExprId> given;
  if (c.has_input(1)) {
    if (c.attrs.has("split")) return c.error("split given both as attribute and as input #1; keep one");
    if (!known_ints(c, 1, &given)) return c.error("split input #1 must be a constant or computed from shapes");
  } else {
    for (uint32_t k = 0; k < c.attrs.ints_size("split"); ++k) given.push_back(p.constant(c.attrs.ints("split")[k]));
  }
  if (!given.empty()) {
    if (static_cast<int64_t>(given.size()) != n)
      return c.error("split has " + std::to_string(given.size()) + " sizes for " + std::to_string(n) + " outputs");
    ExprId total = p.constant(0);
    for (size_t i = 0; i < given.size(); ++i) {
      KILN_TRY(c.require_ge(given[i], p.constant(0), "for split size #" + std::to_string(i)));
      total = p.add(total, given[i]);
    }
    KILN_TRY(c.require_eq(total, d, "for the split sizes to cover " + axis_of));
    *sizes = std::move(given);
    return ok_status();
  }
  if (c.attrs.has("num_outputs")) {
    if (c.attrs.get_int("num_outputs", 0) != n)
      return c.error("num_outputs is " + std::to_string(c.attrs.get_int("num_outputs", 0)) + " but the node has " +
                     std::to_string(n) + " outputs");
    ExprId chunk = p.ceildiv(d, p.constant(n));
    ExprId last = p.sub(d, p.mul(chunk, p.constant(n - 1)));
    KILN_TRY(c.require_ge(last, p.constant(0),
                          "for " + std::to_string(n) + " pieces of ceil(" + p.to_string(d) + "/" +
                              std::to_string(n) + ") to fit " + axis_of));
    sizes->assign(n, chunk);
    sizes->back() = last;
    return ok_status();
  }
  KILN_TRY(c.require_divisible(d, n, "to split it into " + std::to_string(n) + " equal pieces " + axis_of));
  sizes->assign(n, p.floordiv(d, p.constant(n)));
  return ok_status();
}

}  // namespace

Status split_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 2));
  if (c.outputs.empty()) return c.error("needs at least one output");
  if (c.has_input(1) && c.in(1).dtype != DType::kI64 && c.in(1).dtype != DType::kI32)
    return c.error(std::string("split input #1 has dtype ") + dtype_name(c.in(1).dtype) + ", expected i64");
  const int64_t rank = c.rank(0);
  if (rank == 0) return c.error("cannot split a scalar (rank 0)");
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 0), rank));
  std::vector<ExprId> sizes;
  KILN_TRY(piece_sizes(c, c.in(0).shape[axis], &sizes));
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    c.out(i).dtype = c.in(0).dtype;
    c.out(i).shape = c.in(0).shape;
    c.out(i).shape[axis] = sizes[i];
  }
  return ok_status();
}

KernelStatus split_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  int64_t axis = c.attrs.get_int("axis", 0);
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank) return KernelStatus::kInvalidValue;
  // Bind fixed every shape; still refuse anything that would read or write out of bounds.
  int64_t total = 0;
  for (uint32_t i = 0; i < c.num_outputs; ++i) {
    const TensorView& y = c.out(i);
    if (y.rank != x.rank || y.dtype != x.dtype) return KernelStatus::kInvalidValue;
    for (int k = 0; k < x.rank; ++k)
      if (k != axis && y.dims[k] != x.dims[k]) return KernelStatus::kInvalidValue;
    total += y.dims[axis];
  }
  if (total != x.dims[axis]) return KernelStatus::kInvalidValue;

  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(x.dtype));  // inner: bytes per unit along the axis
  for (int k = 0; k < axis; ++k) outer *= x.dims[k];
  for (int k = static_cast<int>(axis) + 1; k < x.rank; ++k) inner *= x.dims[k];
  const auto* src = static_cast<const unsigned char*>(x.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (uint32_t i = 0; i < c.num_outputs; ++i) {
      const int64_t block = c.out(i).dims[axis] * inner;
      if (block == 0) continue;
      std::memcpy(static_cast<unsigned char*>(c.out(i).data) + o * block, src, static_cast<size_t>(block));
      src += block;
    }
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
