// Unique: the distinct elements of the flattened input, or (attrs: axis) its distinct slices
// along an axis, in ascending order (sorted = 1, the default; slices compare element by
// element, NaN above every number and equal to NaN) or in order of first occurrence
// (sorted = 0). Outputs: Y, the first index of each in X, the inverse (for each element or
// slice of X, its position in Y) and the counts. The number of distinct items is a
// data-dependent dim (attrs: dim, as NonZero's) bounded by the number of items.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

struct Items {
  int64_t outer = 1, n = 1, inner = 1;  // X as [outer, n, inner]: items are n slices
};

Items items_of(const TensorView& x, bool flat, int64_t axis) {
  Items it;
  if (flat) {
    it.n = x.numel();
    return it;
  }
  it.n = x.dims[axis];
  for (int64_t a = 0; a < axis; ++a) it.outer *= x.dims[a];
  for (int64_t a = axis + 1; a < x.rank; ++a) it.inner *= x.dims[a];
  return it;
}

/// -1, 0, 1 comparing items i and j (element by element across every outer row).
template <typename T>
int compare(const T* x, const Items& it, int64_t i, int64_t j) {
  for (int64_t o = 0; o < it.outer; ++o)
    for (int64_t r = 0; r < it.inner; ++r) {
      const T a = x[(o * it.n + i) * it.inner + r], b = x[(o * it.n + j) * it.inner + r];
      if constexpr (std::is_floating_point_v<T>) {
        const bool na = std::isnan(a), nb = std::isnan(b);
        if (na || nb) {
          if (na != nb) return na ? 1 : -1;
          continue;
        }
      }
      if (a < b) return -1;
      if (b < a) return 1;
    }
  return 0;
}

}  // namespace

Status unique_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  KILN_ASSIGN_OR_RETURN(const ExprId u, data_dim_attr(c));
  if (c.outputs.empty() || c.outputs.size() > 4) return c.error("has 1 to 4 outputs (Y, indices, inverse_indices, counts)");
  const SymTensor& x = c.in(0);
  core::ExprPool& p = c.pool;
  ExprId n = p.constant(1);
  c.out(0).dtype = x.dtype;
  if (!c.attrs.has("axis")) {
    for (ExprId e : x.shape) n = p.mul(n, e);
    c.out(0).shape = {u};
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", 0), c.rank(0)));
    n = x.shape[static_cast<size_t>(axis)];
    c.out(0).shape = x.shape;
    c.out(0).shape[static_cast<size_t>(axis)] = u;
  }
  const std::vector<std::vector<ExprId>> shapes = {{u}, {n}, {u}};
  for (size_t k = 1; k < c.outputs.size(); ++k) {
    c.out(k).dtype = DType::kI64;
    c.out(k).shape = shapes[k - 1];
  }
  c.scratch_bytes = p.mul(p.constant(4 * static_cast<int64_t>(sizeof(int64_t))), n);  // order, group, first, relabel
  return ok_status();
}

namespace {

template <typename T>
KernelStatus unique_typed(const RunCtx& c, bool flat, int64_t axis) {
  const TensorView& x = c.in(0);
  const Items it = items_of(x, flat, axis);
  const T* xs = x.as<T>();
  if (c.scratch_bytes < 4 * sizeof(int64_t) * static_cast<size_t>(it.n) || (it.n > 0 && !c.scratch)) return KernelStatus::kInvalidValue;
  int64_t* order = static_cast<int64_t*>(c.scratch);  // items sorted (stable: first occurrence first among equals)
  int64_t* group = order + it.n;                      // per item: its position in Y
  int64_t* first = group + it.n;                      // per position in Y: its first item (then 1 more array)
  std::iota(order, order + it.n, int64_t{0});
  std::stable_sort(order, order + it.n, [&](int64_t a, int64_t b) { return compare(xs, it, a, b) < 0; });
  int64_t u = 0;
  for (int64_t k = 0; k < it.n; ++k) {
    if (k == 0 || compare(xs, it, order[k - 1], order[k]) != 0) first[u++] = order[k];
    group[order[k]] = u - 1;
  }
  if (c.attrs.get_int("sorted", 1) == 0) {  // Y in order of first occurrence: relabel the groups
    int64_t* label = order;  // free now: per sorted group, its label in order of first occurrence
    int64_t* by_label = first + it.n;
    std::fill(label, label + u, int64_t{-1});
    int64_t next = 0;
    for (int64_t i = 0; i < it.n; ++i)
      if (label[group[i]] < 0) label[group[i]] = next++, by_label[label[group[i]]] = i;
    for (int64_t i = 0; i < it.n; ++i) group[i] = label[group[i]];
    std::copy(by_label, by_label + u, first);
  }
  *c.produced_dim = u;
  TensorView& y = c.out(0);
  const int64_t capacity = flat ? y.dims[0] : y.dims[axis];  // at the bound: bind takes a data dim at its max
  if (u > capacity) return KernelStatus::kInvalidValue;
  T* ys = y.as<T>();
  // Rows u apart: the axis holds u, not the bound. Empty slices have no bytes (maybe no buffer).
  for (int64_t o = 0; o < it.outer && it.inner > 0; ++o)
    for (int64_t k = 0; k < u; ++k)
      std::memcpy(ys + (o * u + k) * it.inner, xs + (o * it.n + first[k]) * it.inner, sizeof(T) * static_cast<size_t>(it.inner));
  if (c.num_outputs > 1)
    for (int64_t k = 0; k < u; ++k) c.out(1).as<int64_t>()[k] = first[k];
  if (c.num_outputs > 2)
    for (int64_t i = 0; i < it.n; ++i) c.out(2).as<int64_t>()[i] = group[i];
  if (c.num_outputs > 3) {
    int64_t* counts = c.out(3).as<int64_t>();
    std::fill(counts, counts + u, int64_t{0});
    for (int64_t i = 0; i < it.n; ++i) ++counts[group[i]];
  }
  return KernelStatus::kOk;
}

}  // namespace

KernelStatus unique_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  if (!c.produced_dim) return KernelStatus::kInvalidValue;
  const bool flat = !c.attrs.has("axis");
  int64_t axis = flat ? 0 : c.attrs.get_int("axis", 0);
  if (axis < 0) axis += x.rank;
  if (!flat && (axis < 0 || axis >= x.rank)) return KernelStatus::kInvalidValue;
  switch (x.dtype) {
    case DType::kF32: return unique_typed<float>(c, flat, axis);
    case DType::kI64: return unique_typed<int64_t>(c, flat, axis);
    case DType::kI32: return unique_typed<int32_t>(c, flat, axis);
    case DType::kBool: return unique_typed<uint8_t>(c, flat, axis);
    case DType::kI8: return unique_typed<int8_t>(c, flat, axis);
    case DType::kU8: return unique_typed<uint8_t>(c, flat, axis);
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
