#pragma once
// What MatMul shares with its integer forms (MatMulInteger, QLinearMatMul): the numpy-style
// shape of a product and the walk over its broadcast batch axes.

#include <vector>

#include "kernels/kernel.h"

namespace kiln::kernels {

/// The output shape of inputs #ai times #bi with numpy semantics (a 1-D first operand is a
/// row, a 1-D second one a column, the added axis removed; batch axes broadcast).
Status matmul_operands_shape(ShapeCtx& c, size_t ai, size_t bi, std::vector<ExprId>* out);

/// The actual matrix sizes of a product (1-D operands promoted) and its batch axes: batch t
/// reads A at a_off and B at b_off (elements) and writes m x n output elements at t*m*n.
struct MatmulBatch {
  int64_t m = 1, k = 1, n = 1, batches = 1;
  int rank = 0;
  int64_t size[kMaxRank] = {}, a_stride[kMaxRank] = {}, b_stride[kMaxRank] = {};

  MatmulBatch(const TensorView& a, const TensorView& b);
  void offsets(int64_t t, int64_t* a_off, int64_t* b_off) const;
};

}  // namespace kiln::kernels
