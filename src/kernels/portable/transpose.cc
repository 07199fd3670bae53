// Transpose: output axis k is input axis perm[k]; perm defaults to the reversed axes.
#include "kernels/kernel.h"
#include "kernels/portable/strided_copy.h"
#include "kernels/portable/sym_values.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

/// Reads perm for an input of `rank` into out[0..rank): the attribute, or reversed axes
/// when absent. False unless it is a permutation of [0, rank).
bool read_perm(const core::Attrs& attrs, int64_t rank, int64_t* out) {
  if (rank > kMaxRank) return false;
  const int64_t* perm = attrs.ints("perm");
  if (attrs.has("perm") && (perm == nullptr || attrs.ints_size("perm") != rank)) return false;
  bool seen[kMaxRank] = {};
  for (int64_t k = 0; k < rank; ++k) {
    out[k] = perm ? perm[k] : rank - 1 - k;
    if (out[k] < 0 || out[k] >= rank || seen[out[k]]) return false;
    seen[out[k]] = true;
  }
  return true;
}

/// Carries known values (e.g. torch's F.pad arithmetic transposes its [n, 2] pads table).
void fold_transpose(ShapeCtx& c, const int64_t* perm) {
  std::vector<int64_t> out_dims, in_dims;
  std::vector<ExprId> values;
  if (!can_carry(c, &out_dims) || !const_dims(c.pool, c.in(0).shape, &in_dims) || !small_values(c, 0, &values))
    return;
  if (static_cast<int64_t>(values.size()) != numel_of(in_dims)) return;
  const size_t rank = in_dims.size();
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t k = rank; k-- > 1;) in_strides[k - 1] = in_strides[k] * in_dims[k];
  std::vector<ExprId> out(values.size());
  for (int64_t e = 0; e < static_cast<int64_t>(out.size()); ++e) {
    int64_t rest = e, src = 0;
    for (size_t k = rank; k-- > 0;) {
      src += rest % out_dims[k] * in_strides[perm[k]];
      rest /= out_dims[k];
    }
    out[e] = values[src];
  }
  c.out(0).sym_values = std::move(out);
}

}  // namespace

Status transpose_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, 1));
  const int64_t rank = c.rank(0);
  int64_t perm[kMaxRank];
  if (!read_perm(c.attrs, rank, perm)) {
    std::vector<int64_t> given(c.attrs.ints("perm"), c.attrs.ints("perm") + c.attrs.ints_size("perm"));
    std::string s = "[";
    for (size_t k = 0; k < given.size(); ++k) s += (k ? ", " : "") + std::to_string(given[k]);
    return c.error("perm " + s + "] is not a permutation of [0, " + std::to_string(rank) + ") for input " +
                   c.pool.shape_to_string(c.in(0).shape) + " of rank " + std::to_string(rank));
  }
  c.out(0).dtype = c.in(0).dtype;
  c.out(0).shape.resize(rank);
  for (int64_t k = 0; k < rank; ++k) c.out(0).shape[k] = c.in(0).shape[perm[k]];
  fold_transpose(c, perm);
  // Axes of size 1 may move freely: if the others keep their order, the bytes do not change.
  int64_t last = -1;
  c.same_bytes = true;
  for (int64_t k = 0; k < rank && c.same_bytes; ++k) {
    if (c.pool.is_const_value(c.in(0).shape[perm[k]], 1)) continue;
    c.same_bytes = perm[k] > last;
    last = perm[k];
  }
  return ok_status();
}

KernelStatus transpose_run(const RunCtx& c) {
  const TensorView& x = c.in(0);
  TensorView& y = c.out(0);
  int64_t perm[kMaxRank], in_strides[kMaxRank], dims[kMaxRank], strides[kMaxRank];
  if (y.rank != x.rank || !read_perm(c.attrs, x.rank, perm)) return KernelStatus::kInvalidValue;
  row_major_strides(x, in_strides);
  for (int k = 0; k < x.rank; ++k) {
    dims[k] = x.dims[perm[k]];
    strides[k] = in_strides[perm[k]];
    if (y.dims[k] != dims[k]) return KernelStatus::kInvalidValue;
  }
  strided_copy(c, y.data, x.data, dtype_size(x.dtype), x.rank, dims, strides, 0);
  return KernelStatus::kOk;
}

}  // namespace kiln::kernels
