// CumSum: the ONNX examples (exclusive, reverse, both), a seeded sweep of shapes, axes
// (negative too), flags and dtypes against running sums written here (also inside oversized
// slots), integer wrapping, errors, and symbolic shapes run far below the bound.
#include <gtest/gtest.h>

#include <limits>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore flags(int64_t exclusive, int64_t reverse) {
  return core::AttrStore().set_int("exclusive", exclusive).set_int("reverse", reverse);
}
Tensor axis_of(int64_t a) { return make_tensor<int64_t>({}, {a}); }

TEST(CumSum, OnnxExamples) {
  Tensor x = make_tensor<float>({5}, {1, 2, 3, 4, 5});
  EXPECT_EQ(run_op("CumSum", {x, axis_of(0)}).outputs[0].values<float>(), (std::vector<float>{1, 3, 6, 10, 15}));
  EXPECT_EQ(run_op("CumSum", {x, axis_of(0)}, flags(1, 0)).outputs[0].values<float>(),
            (std::vector<float>{0, 1, 3, 6, 10}));
  EXPECT_EQ(run_op("CumSum", {x, axis_of(0)}, flags(0, 1)).outputs[0].values<float>(),
            (std::vector<float>{15, 14, 12, 9, 5}));
  EXPECT_EQ(run_op("CumSum", {x, axis_of(0)}, flags(1, 1)).outputs[0].values<float>(),
            (std::vector<float>{14, 12, 9, 5, 0}));
  Tensor m = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run_op("CumSum", {m, axis_of(0)}).outputs[0].values<float>(), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(run_op("CumSum", {m, axis_of(-1)}).outputs[0].values<float>(), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(run_op("CumSum", {m, make_tensor<int32_t>({1}, {1})}).outputs[0].values<float>(),
            (std::vector<float>{1, 3, 6, 4, 9, 15}));
  // Integers wrap as the arithmetic kernels do.
  const int32_t big = std::numeric_limits<int32_t>::max();
  OpResult r = run_op("CumSum", {make_tensor<int32_t>({2}, {big, 1}), axis_of(0)});
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{big, std::numeric_limits<int32_t>::min()}));
}

TEST(CumSum, RandomSweep) {
  std::mt19937 rng(1618);
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    const V shape = random_shape(rng, rank, 4);
    const int64_t axis = static_cast<int64_t>(rng() % rank), given = rng() % 2 ? axis - rank : axis;
    const int64_t exclusive = rng() % 2, reverse = rng() % 2;
    const DType t = iter % 3 == 0 ? DType::kI64 : iter % 3 == 1 ? DType::kI32 : DType::kF32;
    Tensor x = random_tensor(rng, t, shape);
    SlotRun s = run_op_in_slots("CumSum", {x, axis_of(given)}, flags(exclusive, reverse));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, shape);
    const V st = strides_of(shape);
    for (int64_t e = 0; e < y.numel(); ++e) {
      const int64_t pos = e / st[axis] % shape[axis], base = e - pos * st[axis];
      double want = 0;
      for (int64_t q = 0; q < shape[axis]; ++q) {
        const bool before = reverse ? q > pos : q < pos;
        if (before || (!exclusive && q == pos)) want += x.at(base + q * st[axis]);
      }
      ASSERT_NEAR(y.at(e), want, 1e-4 * (1 + std::abs(want))) << "iter " << iter << " at " << e;
    }
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(CumSum, Errors) {
  Tensor x = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(has_text(run_op("CumSum", {x, axis_of(2)}).status, "node 'test' (CumSum): axis 2 is out of range"));
  EXPECT_TRUE(has_text(run_op("CumSum", {x, make_tensor<float>({}, {0.f})}).status,
                       "axis input #1 has dtype f32, expected i64 or i32"));
  EXPECT_TRUE(has_text(run_op("CumSum", {x, make_tensor<int64_t>({2}, {0, 1})}).status, "axis [2] must be a scalar"));
  EXPECT_TRUE(has_text(run_op("CumSum", {make_tensor<bool>({2}, {true, false}), axis_of(0)}).status,
                       "input #0 has dtype bool, expected f32, i64 or i32"));
  core::ExprPool p;
  EXPECT_TRUE(has_text(infer(p, "CumSum", {const_input(p, x), sym_input(DType::kI64, {})}).status,
                       "axis input #1 must be a constant"));
}

TEST(CumSumSymbolic, PositionIdsBelowTheBound) {
  // position ids = CumSum(mask, axis 1) over [batch, seq].
  SymPool s;
  core::ExprPool& p = s.pool;
  Tensor one = axis_of(1);
  SymResult r = infer(p, "CumSum", {sym_input(DType::kI64, {s.batch, s.seq}), const_input(p, one)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq]");
  for (V dims : {V{1, 1}, V{3, 5}, V{8, 512}}) {
    std::vector<int64_t> mask(static_cast<size_t>(dims[0] * dims[1]), 1);
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kI64;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("CumSum", {make_tensor<int64_t>(dims, mask), one}, &out), kernels::KernelStatus::kOk);
    for (int64_t b = 0; b < dims[0]; ++b)
      for (int64_t q = 0; q < dims[1]; ++q) EXPECT_EQ(out[0].values<int64_t>()[b * dims[1] + q], q + 1);
  }
}

}  // namespace
}  // namespace kiln::testing
