// ConstantOfShape: hand cases for every way the value arrives, errors, and symbolic shapes
// (a folded Shape computation) run below the bound.
#include <gtest/gtest.h>

#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;


TEST(ConstantOfShape, HandComputed) {
  OpResult r = run_op("ConstantOfShape", {i64s({2, 3})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dtype, DType::kF32);
  EXPECT_EQ(r.outputs[0].shape, (V{2, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), std::vector<float>(6, 0.f));

  r = run_op("ConstantOfShape", {i64s({3})}, core::AttrStore().set_floats("value", {2.5f}));
  EXPECT_EQ(r.outputs[0].values<float>(), std::vector<float>(3, 2.5f));
  r = run_op("ConstantOfShape", {i64s({2, 1})}, core::AttrStore().set_ints("value", {7}));
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{7, 7}));
  r = run_op("ConstantOfShape", {i64s({2})}, core::AttrStore().set_int("value", -3));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{-3, -3}));
  r = run_op("ConstantOfShape", {i64s({1})}, core::AttrStore().set_float("value", 1.5f));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1.5f}));
  r = run_op("ConstantOfShape", {i64s({3})}, core::AttrStore().set_ints("value", {1}).set_int("dtype", 9));
  EXPECT_EQ(r.outputs[0].dtype, DType::kBool);
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{1, 1, 1}));
  r = run_op("ConstantOfShape", {i64s({2})}, core::AttrStore().set_floats("value", {-2.75f}).set_int("dtype", 6));
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{-2, -2}));  // truncated, as Cast does
  r = run_op("ConstantOfShape", {i64s({2})}, core::AttrStore().set_ints("value", {4}).set_int("dtype", 1));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 4}));

  r = run_op("ConstantOfShape", {i64s({})}, core::AttrStore().set_ints("value", {5}));  // a scalar
  EXPECT_EQ(r.outputs[0].shape, (V{}));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{5}));
  r = run_op("ConstantOfShape", {i64s({4, 0})});
  EXPECT_EQ(r.outputs[0].shape, (V{4, 0}));
  r = run_op("ConstantOfShape", {make_tensor<int32_t>({2}, {1, 2})});
  EXPECT_EQ(r.outputs[0].shape, (V{1, 2}));

  EXPECT_TRUE(fold_matches_kernel("ConstantOfShape", {i64s({2, 3})}, core::AttrStore().set_ints("value", {9})));
  EXPECT_TRUE(fold_matches_kernel("ConstantOfShape", {i64s({2})},
                                  core::AttrStore().set_floats("value", {0.5f}).set_int("dtype", 9)));
  // f32 fills are carried only when they are exact integers.
  EXPECT_TRUE(fold_matches_kernel("ConstantOfShape", {i64s({2})}, core::AttrStore().set_floats("value", {3.f})));
  EXPECT_TRUE(fold_matches_kernel("ConstantOfShape", {i64s({2})}, core::AttrStore().set_floats("value", {2.5f}), false));
  core::ExprPool p;
  Tensor two = i64s({2});
  EXPECT_TRUE(infer(p, "ConstantOfShape", {const_input(p, two)}, core::AttrStore().set_floats("value", {2.5f}))
                  .outputs[0]
                  .sym_values.empty());
}

TEST(ConstantOfShape, Errors) {
  auto status = [](const Tensor& shape, const core::AttrStore& a) {
    return run_op("ConstantOfShape", {shape}, a).status;
  };
  core::AttrStore none;
  EXPECT_TRUE(has_text(status(i64s({2}), core::AttrStore().set_floats("value", {1, 2})),
                       "node 'test' (ConstantOfShape): attribute 'value' must hold exactly one element"));
  EXPECT_TRUE(has_text(status(i64s({2}), core::AttrStore().set_str("value", "x")), "got a string"));
  EXPECT_TRUE(has_text(status(i64s({2}), core::AttrStore().set_int("dtype", 10)),
                       "attribute 'dtype' must be 1 (float), 6 (int32), 7 (int64) or 9 (bool)"));
  EXPECT_TRUE(has_text(status(i64s({2, -1}), none), "shape [2, -1] element 1 (-1) is negative"));
  EXPECT_TRUE(has_text(status(make_tensor<float>({1}, {2}), none), "shape input #0 has dtype f32, expected i64"));
  EXPECT_TRUE(has_text(status(make_tensor<int64_t>({1, 1}, {2}), none), "shape input #0 must be 1-D, got rank 2"));
  EXPECT_TRUE(has_text(status(i64s({1, 1, 1, 1, 1, 1, 1, 1, 1}), none), "has rank 9, above the limit 8"));
  SymPool s;
  EXPECT_TRUE(has_text(infer(s.pool, "ConstantOfShape", {sym_input(DType::kI64, {s.c(2)})}).status,
                       "shape input #0 is not known at export"));
  EXPECT_TRUE(has_text(infer(s.pool, "ConstantOfShape", {sym_values_input(s.pool, {s.pool.sub(s.seq, s.c(2))})}).status,
                       "element 0 (seq - 2) may be negative"));
}

TEST(ConstantOfShapeSymbolic, ShapeFromDimsRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  core::AttrStore a = core::AttrStore().set_ints("value", {1});
  SymResult r = infer(p, "ConstantOfShape", {sym_values_input(p, {s.batch, p.mul(s.seq, s.c(2))})}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 2*seq]");
  EXPECT_TRUE(r.guards.empty());
  EXPECT_EQ(values_of(p, r), "[]");  // too big to carry
  SymResult k = infer(p, "ConstantOfShape", {sym_values_input(p, {s.c(3)})}, a);
  EXPECT_EQ(values_of(p, k), "[1, 1, 1]");

  for (V dims : {V{1, 1}, V{3, 5}, V{8, 512}}) {
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kI64;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    Tensor shape = i64s(out[0].shape);  // at run time the shape input is a real tensor
    ASSERT_EQ(run_kernel("ConstantOfShape", {shape}, &out, a), kernels::KernelStatus::kOk);
    EXPECT_EQ(out[0].values<int64_t>(), V(dims[0] * dims[1] * 2, 1));
    out[0].shape = {dims[0], dims[1]};  // not the shape the input holds
    EXPECT_EQ(run_kernel("ConstantOfShape", {shape}, &out, a), kernels::KernelStatus::kInvalidValue);
  }
}

}  // namespace
}  // namespace kiln::testing
