// TopK: the K largest (largest = 1, the default) or smallest (largest = 0) elements of X
// (f32, i64 or i32) along `axis` (default -1), as Values (X's dtype) and their Indices (i64),
// both of X's shape with K on the axis. Always sorted best first, also with sorted = 0 (ONNX
// then allows any order); equal values keep the lower index first, as ONNX Runtime does. NaN
// ranks above every number (largest = 1 picks NaNs first, largest = 0 last), as torch.topk.
// K (a 1-element i64) sets the output size. Export knows it when it is a constant or computed
// from sizes (e.g. min(seq, 100), or min(1000, n) with n a NonZero's count); it must lie in
// [0, axis size]. Otherwise K is read from the data: it is then a data-dependent dim (attrs:
// dim, as NonZero's count) bounded by the axis's largest size, the outputs are reserved at
// that bound and sized by the K found; a K outside [0, axis size] fails execute.
//
// No scratch: each lane keeps its best K as a binary heap (worst on top) inside its own slice
// of Indices, then heap-sorts it in place: O(n log K). Values alone (no Indices output) are
// picked by K passes over the lane, each taking the best element ranked after the previous
// pick: O(n K).
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/kernel.h"
#include "kernels/portable/int_input.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// a ranks above b in the value order (NaN above every number, NaNs equal).
template <typename T>
inline bool above(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

/// The output order over one lane: element i comes before element j.
template <typename T, bool kLargest>
struct Before {
  const T* x;  // the lane's first element
  int64_t stride;
  bool operator()(int64_t i, int64_t j) const {
    const T a = x[i * stride], b = x[j * stride];
    if constexpr (kLargest) return above(a, b) || (!above(b, a) && i < j);
    return above(b, a) || (!above(a, b) && i < j);
  }
};

/// A binary heap of element ids in a strided slice h[0], h[s], h[2s]...; the element that
/// comes last in the output order sits on top.
template <typename Cmp>
struct StridedHeap {
  int64_t* h;
  int64_t s;
  const Cmp& before;
  int64_t& at(int64_t j) const { return h[j * s]; }
  void sift_up(int64_t pos) const {
    while (pos > 0) {
      const int64_t parent = (pos - 1) / 2;
      if (!before(at(parent), at(pos))) return;
      std::swap(at(parent), at(pos));
      pos = parent;
    }
  }
  void sift_down(int64_t size, int64_t pos) const {
    for (;;) {
      int64_t child = 2 * pos + 1;
      if (child >= size) return;
      if (child + 1 < size && before(at(child), at(child + 1))) ++child;  // the later of the two
      if (!before(at(pos), at(child))) return;
      std::swap(at(pos), at(child));
      pos = child;
    }
  }
};

template <typename T, bool kLargest>
void topk_with_indices(const T* x, T* vals, int64_t* ids, int64_t outer, int64_t n, int64_t inner, int64_t k) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      const T* lane = x + o * n * inner + r;
      const Before<T, kLargest> before{lane, inner};
      const StridedHeap<Before<T, kLargest>> heap{ids + o * k * inner + r, inner, before};
      for (int64_t i = 0; i < k; ++i) {
        heap.at(i) = i;
        heap.sift_up(i);
      }
      for (int64_t i = k; i < n; ++i) {
        if (!before(i, heap.at(0))) continue;
        heap.at(0) = i;
        heap.sift_down(k, 0);
      }
      for (int64_t size = k; size > 1; --size) {  // heap sort: the last in order goes to the end
        std::swap(heap.at(0), heap.at(size - 1));
        heap.sift_down(size - 1, 0);
      }
      T* v = vals + o * k * inner + r;
      for (int64_t j = 0; j < k; ++j) v[j * inner] = lane[heap.at(j) * inner];
    }
}

template <typename T, bool kLargest>
void topk_values_only(const T* x, T* vals, int64_t outer, int64_t n, int64_t inner, int64_t k) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      const T* lane = x + o * n * inner + r;
      const Before<T, kLargest> before{lane, inner};
      T* v = vals + o * k * inner + r;
      int64_t prev = -1;
      for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; ++i)
          if ((prev < 0 || before(prev, i)) && (best < 0 || before(i, best))) best = i;
        v[j * inner] = lane[best * inner];
        prev = best;
      }
    }
}

template <typename T>
void topk_typed(const RunCtx& c, bool largest, int64_t outer, int64_t n, int64_t inner, int64_t k) {
  const T* x = c.in(0).as<T>();
  T* vals = c.out(0).as<T>();
  if (c.num_outputs > 1) {
    int64_t* ids = c.out(1).as<int64_t>();
    if (largest) topk_with_indices<T, true>(x, vals, ids, outer, n, inner, k);
    else topk_with_indices<T, false>(x, vals, ids, outer, n, inner, k);
  } else {
    if (largest) topk_values_only<T, true>(x, vals, outer, n, inner, k);
    else topk_values_only<T, false>(x, vals, outer, n, inner, k);
  }
}

}  // namespace

Status topk_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 2));
  core::ExprPool& p = c.pool;
  if (c.outputs.empty() || c.outputs.size() > 2)
    return c.error("expects 1 or 2 outputs (Values, Indices), got " + std::to_string(c.outputs.size()));
  const SymTensor& x = c.in(0);
  if (x.dtype == DType::kBool) return c.error("input #0 has dtype bool, expected f32, i64 or i32");
  KILN_TRY(c.expect_dtype(1, DType::kI64));
  const int64_t rank = c.rank(0);
  if (rank == 0) return c.error("input #0 must have rank >= 1, got a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, c.normalize_axis(c.attrs.get_int("axis", -1), rank));
  const SymTensor& kin = c.in(1);
  if (kin.shape.size() > 1 || (kin.shape.size() == 1 && !p.is_const_value(kin.shape[0], 1)))
    return c.error("K " + p.shape_to_string(kin.shape) + " must hold one element");
  ExprId k;
  if (c.attrs.has("dim")) {  // read from the data: the kernel checks it against the axis
    KILN_ASSIGN_OR_RETURN(k, data_dim_attr(c));
  } else {
    std::vector<ExprId> kv;
    if (!known_ints(c, 1, &kv) || kv.size() != 1)
      return c.error("K input #1 sets the output size, so it must be a constant or computed from input shapes");
    k = kv[0];
    if (p.is_const(k) && p.const_value(k) < 0)
      return c.error("K = " + std::to_string(p.const_value(k)) + " must not be negative");
    KILN_TRY(c.require_ge(k, p.constant(0), "for K = " + p.to_string(k) + " to be a size"));
    KILN_TRY(c.require_ge(x.shape[axis], k,
                          "for K = " + p.to_string(k) + " on axis " + std::to_string(axis) + " of " +
                              p.shape_to_string(x.shape)));
  }
  std::vector<ExprId> out = x.shape;
  out[axis] = k;
  c.out(0).dtype = x.dtype;
  c.out(0).shape = out;
  if (c.outputs.size() > 1) {
    c.out(1).dtype = DType::kI64;
    c.out(1).shape = std::move(out);
  }
  return ok_status();
}

KernelStatus topk_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  const TensorView& kin = c.in(1);
  if (c.num_outputs < 1 || c.num_outputs > 2 || kin.dtype != DType::kI64 || kin.numel() != 1)
    return KernelStatus::kInvalidValue;
  int64_t axis = c.attrs.get_int("axis", -1);
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank) return KernelStatus::kInvalidValue;
  const int64_t k = kin.as<int64_t>()[0], n = x.dims[axis];
  if (c.produced_dim) *c.produced_dim = k;  // K from the data: also when over the bound (the Method names it)
  if (k < 0 || k > n) return KernelStatus::kInvalidValue;
  for (uint32_t i = 0; i < c.num_outputs; ++i) {  // bind fixed the outputs; check they fit K
    const TensorView& y = c.out(i);
    if (y.rank != x.rank || y.dtype != (i == 0 ? x.dtype : DType::kI64)) return KernelStatus::kInvalidValue;
    for (int a = 0; a < x.rank; ++a) {
      // K from the data: the axis holds the reservation (the bound); the outputs are written
      // with K on it, rows K apart.
      const bool fits = a != axis ? y.dims[a] == x.dims[a] : c.produced_dim ? y.dims[a] >= k : y.dims[a] == k;
      if (!fits) return KernelStatus::kInvalidValue;
    }
  }
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= x.dims[a];
  for (int a = static_cast<int>(axis) + 1; a < x.rank; ++a) inner *= x.dims[a];
  if (k == 0 || outer * inner == 0) return KernelStatus::kOk;
  const bool largest = c.attrs.get_int("largest", 1) != 0;
  switch (x.dtype) {
    case DType::kF32: topk_typed<float>(c, largest, outer, n, inner, k); break;
    case DType::kI64: topk_typed<int64_t>(c, largest, outer, n, inner, k); break;
    case DType::kI32: topk_typed<int32_t>(c, largest, outer, n, inner, k); break;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return KernelStatus::kInvalidValue;
  }
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
