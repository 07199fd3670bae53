#pragma once
// Numpy-style broadcasting over actual runtime shapes, shared by the elementwise kernels.

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::kernels {

/// Per-operand strides aligned to the output's rank; 0 on broadcast axes.
struct BroadcastIter {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[3][kMaxRank] = {};  // up to three operands (Where)

  /// Sets up iteration of `out` over operands `ins[0..n)`.
  void init(const TensorView& out, const TensorView* const* ins, int n) {
    rank = out.rank;
    for (int k = 0; k < rank; ++k) dims[k] = out.dims[k];
    for (int i = 0; i < n; ++i) {
      const TensorView& t = *ins[i];
      int64_t s = 1;
      for (int k = rank - 1; k >= 0; --k) {
        int tk = k - (rank - t.rank);
        if (tk < 0 || t.dims[tk] == 1) {
          strides[i][k] = 0;
        } else {
          strides[i][k] = s;
        }
        if (tk >= 0) s *= t.dims[tk];
      }
    }
  }

  /// Calls fn(out_index, off0, off1, off2, inner_count, inner_stride0, inner_stride1, inner_stride2)
  /// once per run of the innermost axis.
  template <typename Fn>
  void for_each_row(Fn&& fn) const {
    if (rank == 0) {
      fn(int64_t{0}, int64_t{0}, int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0}, int64_t{0}, int64_t{0});
      return;
    }
    int64_t inner = dims[rank - 1];
    int64_t outer = 1;
    for (int k = 0; k < rank - 1; ++k) outer *= dims[k];
    if (inner == 0 || outer == 0) return;
    int64_t idx[kMaxRank] = {};
    int64_t off[3] = {0, 0, 0};
    for (int64_t o = 0; o < outer; ++o) {
      fn(o * inner, off[0], off[1], off[2], inner, strides[0][rank - 1], strides[1][rank - 1],
         strides[2][rank - 1]);
      for (int k = rank - 2; k >= 0; --k) {  // odometer increment over the outer axes
        ++idx[k];
        for (int i = 0; i < 3; ++i) off[i] += strides[i][k];
        if (idx[k] < dims[k]) break;
        for (int i = 0; i < 3; ++i) off[i] -= strides[i][k] * dims[k];
        idx[k] = 0;
      }
    }
  }
};

/// y[i] = f(a[ia], b[ib]) over `out`'s shape, with ins[0] (a) and ins[1] (b) broadcast to it;
/// one flat loop when both already have out's element count.
template <typename A, typename B, typename Y, typename F>
void broadcast_binary(const TensorView& out, const TensorView* const* ins, const A* a, const B* b, Y* y, F f) {
  const int64_t n = out.numel();
  if (ins[0]->numel() == n && ins[1]->numel() == n) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
    return;
  }
  BroadcastIter it;
  it.init(out, ins, 2);
  it.for_each_row([&](int64_t o, int64_t oa, int64_t ob, int64_t, int64_t count, int64_t sa, int64_t sb, int64_t) {
    for (int64_t i = 0; i < count; ++i) y[o + i] = f(a[oa + i * sa], b[ob + i * sb]);
  });
}

}  // namespace kiln::kernels
