// Cast: hand cases for every conversion rule, a seeded sweep over all dtype pairs against a
// double reference, errors, and the symbolic shape (including folded shape values).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bound_slot_util.h"

namespace kiln::testing {
namespace {

core::AttrStore to(int64_t code) { return core::AttrStore().set_int("to", code); }

TEST(Cast, FloatToIntegerTruncatesTowardZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = make_tensor<float>({7}, {1.7f, -1.7f, -0.5f, 2.f, nan, 1e30f, -1e30f});
  OpResult r = run_op("Cast", {x}, to(7));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{1, -1, 0, 2, 0, hi, lo}));  // NaN -> 0, saturate
  r = run_op("Cast", {x}, to(6));
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);
  const int32_t lo32 = std::numeric_limits<int32_t>::min(), hi32 = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{1, -1, 0, 2, 0, hi32, lo32}));
}

TEST(Cast, ToAndFromBool) {
  Tensor x = make_tensor<float>({4}, {0.f, -0.f, 0.25f, std::numeric_limits<float>::quiet_NaN()});
  OpResult r = run_op("Cast", {x}, to(9));
  EXPECT_EQ(r.outputs[0].dtype, DType::kBool);
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{0, 0, 1, 1}));
  Tensor i = make_tensor<int64_t>({3}, {0, -3, 1});
  EXPECT_EQ(run_op("Cast", {i}, to(9)).outputs[0].bytes, (std::vector<unsigned char>{0, 1, 1}));
  Tensor b = make_tensor<bool>({3}, {true, false, true});
  b.bytes[2] = 7;  // any non-zero byte reads as true
  EXPECT_EQ(run_op("Cast", {b}, to(1)).outputs[0].values<float>(), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(run_op("Cast", {b}, to(7)).outputs[0].values<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(run_op("Cast", {b}, to(9)).outputs[0].bytes, (std::vector<unsigned char>{1, 0, 1}));
}

TEST(Cast, IntegerConversions) {
  Tensor i = make_tensor<int64_t>({3}, {(int64_t{1} << 32) + 5, -2, 3});
  EXPECT_EQ(run_op("Cast", {i}, to(6)).outputs[0].values<int32_t>(), (std::vector<int32_t>{5, -2, 3}));  // wraps
  EXPECT_EQ(run_op("Cast", {i}, to(1)).outputs[0].values<float>(), (std::vector<float>{4294967301.f, -2, 3}));
  Tensor j = make_tensor<int32_t>({2}, {-7, 9});
  EXPECT_EQ(run_op("Cast", {j}, to(7)).outputs[0].values<int64_t>(), (std::vector<int64_t>{-7, 9}));
  EXPECT_EQ(run_op("Cast", {j}, to(6)).outputs[0].values<int32_t>(), (std::vector<int32_t>{-7, 9}));
}

/// Double reference of one element converted to `t`, as a double.
double reference(double x, DType t) {
  switch (t) {
    case DType::kF32: return static_cast<float>(x);
    case DType::kI64:
    case DType::kI32: return std::trunc(x);  // sweep values stay in range
    case DType::kBool: return x != 0 ? 1 : 0;
    case DType::kI8:
    case DType::kU8: break;  // not a Cast target
  }
  return NAN;
}

TEST(Cast, RandomSweepAllPairs) {
  std::mt19937 rng(77);
  const DType types[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  const int64_t codes[] = {1, 7, 6, 9};
  std::uniform_real_distribution<float> val(-50.f, 50.f);
  for (int iter = 0; iter < 160; ++iter) {
    DType from = types[iter % 4];
    int to_index = iter / 4 % 4;
    std::vector<int64_t> shape = random_shape(rng, 1 + iter / 16 % 5, 5);
    Tensor x;
    x.dtype = from;
    x.shape = shape;
    x.bytes.resize(static_cast<size_t>(x.numel()) * dtype_size(from));
    for (int64_t i = 0; i < x.numel(); ++i) {
      float v = rng() % 5 == 0 ? 0.f : val(rng);  // plenty of zeros for the bool cases
      switch (from) {
        case DType::kF32: x.data<float>()[i] = v; break;
        case DType::kI64: x.data<int64_t>()[i] = static_cast<int64_t>(v); break;
        case DType::kI32: x.data<int32_t>()[i] = static_cast<int32_t>(v); break;
        case DType::kBool: x.bytes[i] = v > 0 ? 1 : 0; break;
        case DType::kI8:
        case DType::kU8: x.bytes[i] = static_cast<uint8_t>(static_cast<int8_t>(v)); break;
      }
    }
    SlotRun s = run_op_in_slots("Cast", {x}, to(codes[to_index]));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.dtype, types[to_index]);
    ASSERT_EQ(y.shape, shape);
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_EQ(y.at(i), reference(x.at(i), y.dtype))
          << dtype_name(from) << " -> " << dtype_name(y.dtype) << " at " << i;
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(Cast, Errors) {
  Tensor x = make_tensor<float>({2}, {1, 2});
  OpResult r = run_op("Cast", {x});
  EXPECT_NE(r.status.message().find("node 'test' (Cast): missing required attribute 'to'"), std::string::npos)
      << r.status.message();
  r = run_op("Cast", {x}, to(10));
  EXPECT_NE(r.status.message().find("attribute 'to' = 10 is not a supported dtype code; supported: 1 (float)"),
            std::string::npos)
      << r.status.message();
  r = run_op("Cast", {x, x}, to(1));
  EXPECT_NE(r.status.message().find("expects 1 inputs, got 2"), std::string::npos) << r.status.message();
}

TEST(Cast, SymbolicShapeAndFoldedValues) {
  core::ExprPool pool;
  core::ExprId batch = pool.dim(pool.add_dim({"batch", 1, 16, 1}));
  core::AttrStore attrs = to(6);
  kernels::ShapeCtx c(pool, attrs.view());
  c.inputs.resize(1);
  c.inputs[0].dtype = DType::kI64;
  c.inputs[0].shape = {pool.constant(2)};
  c.inputs[0].sym_values = {batch, pool.constant(3)};  // e.g. a folded Shape result
  c.outputs.resize(1);
  Status st = kernels::find_op("Cast")->shape(c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.out(0).dtype, DType::kI32);
  EXPECT_EQ(pool.shape_to_string(c.out(0).shape), "[2]");
  EXPECT_EQ(pool.shape_to_string(c.out(0).sym_values), "[batch, 3]");

  // A symbolic data tensor keeps its symbolic shape; to-bool carries no values.
  attrs = to(9);
  kernels::ShapeCtx d(pool, attrs.view());
  d.inputs.resize(1);
  d.inputs[0].shape = {batch, pool.mul(batch, pool.constant(4))};
  d.outputs.resize(1);
  ASSERT_TRUE(kernels::find_op("Cast")->shape(d).ok());
  EXPECT_EQ(pool.shape_to_string(d.out(0).shape), "[batch, 4*batch]");
  EXPECT_EQ(d.out(0).dtype, DType::kBool);
  EXPECT_TRUE(d.out(0).sym_values.empty());

  // A constant i64 tensor cast to i32 folds with the kernel's wrap-around.
  Tensor k = make_tensor<int64_t>({2}, {(int64_t{1} << 32) + 1, -1});
  attrs = to(6);
  kernels::ShapeCtx e(pool, attrs.view());
  e.inputs.resize(1);
  e.inputs[0].dtype = DType::kI64;
  e.inputs[0].shape = {pool.constant(2)};
  e.inputs[0].const_data = k.bytes.data();
  e.outputs.resize(1);
  ASSERT_TRUE(kernels::find_op("Cast")->shape(e).ok());
  EXPECT_EQ(pool.shape_to_string(e.out(0).sym_values), "[1, -1]");
}

}  // namespace
}  // namespace kiln::testing
