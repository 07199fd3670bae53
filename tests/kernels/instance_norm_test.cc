// InstanceNormalization: hand cases, a seeded sweep over ranks 2-5 against a double
// reference, errors, and a symbolic shape run below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

/// Per (n, c): mean and biased variance over the spatial elements, then the affine map.
std::vector<double> reference(const Tensor& x, const Tensor& scale, const Tensor& b, double eps) {
  int64_t channels = x.shape[1], plane = 1;
  for (size_t k = 2; k < x.shape.size(); ++k) plane *= x.shape[k];
  std::vector<double> y(x.numel());
  for (int64_t inst = 0; inst < x.shape[0] * channels; ++inst) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < plane; ++i) mean += x.at(inst * plane + i) / plane;
    for (int64_t i = 0; i < plane; ++i) var += std::pow(x.at(inst * plane + i) - mean, 2) / plane;
    int64_t ch = inst % channels;
    for (int64_t i = 0; i < plane; ++i)
      y[inst * plane + i] = scale.at(ch) * (x.at(inst * plane + i) - mean) / std::sqrt(var + eps) + b.at(ch);
  }
  return y;
}

TEST(InstanceNorm, HandComputed) {
  // Channel 0 [0, 2]: mean 1, var 1, eps 3 -> (x - 1) / 2 * 2 + 1; channel 1 is constant -> B.
  Tensor x = make_tensor<float>({1, 2, 2}, {0, 2, 5, 5});
  Tensor scale = make_tensor<float>({2}, {2, 3}), b = make_tensor<float>({2}, {1, -1});
  OpResult r = run_op("InstanceNormalization", {x, scale, b}, AttrStore().set_float("epsilon", 3.f));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 2, -1, -1}));

  // A large offset must not cost precision (two-pass statistics).
  Tensor big = make_tensor<float>({1, 1, 2, 2}, {10000, 10002, 10000, 10002});
  r = run_op("InstanceNormalization", {big, make_tensor<float>({1}, {1}), make_tensor<float>({1}, {0})},
             AttrStore().set_float("epsilon", 0.f));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{-1, 1, -1, 1}));
}

TEST(InstanceNorm, RandomSweepAgainstReference) {
  std::mt19937 rng(1702);
  for (int iter = 0; iter < 200; ++iter) {
    int rank = 2 + static_cast<int>(rng() % 4);
    std::vector<int64_t> shape = random_shape(rng, rank, rank > 3 ? 4 : 8);
    int64_t ch = shape[1];
    Tensor x = random_f32(rng, shape, -3, 5);
    Tensor scale = random_f32(rng, {ch}, -2, 2), b = random_f32(rng, {ch});
    AttrStore a;
    float eps = 1e-5f;
    if (rng() % 2) a.set_float("epsilon", eps = std::uniform_real_distribution<float>(1e-6f, 0.5f)(rng));
    SlotRun s = run_op_in_slots("InstanceNormalization", {x, scale, b}, a);
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, shape);
    EXPECT_TRUE(s.tails_intact) << "iter " << iter;
    std::vector<double> want = reference(x, scale, b, eps);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(s.exact.outputs[0].at(i), want[i], 2e-5 * (1 + std::abs(want[i]))) << "iter " << iter << " at " << i;
      ASSERT_EQ(s.outputs[0].at(i), s.exact.outputs[0].at(i)) << "slotted run differs, iter " << iter;
    }
  }
}

TEST(InstanceNorm, Errors) {
  Tensor x = make_tensor<float>({1, 2, 2}, {1, 2, 3, 4});
  Tensor v2 = make_tensor<float>({2}, {1, 1});
  auto status = [](const std::vector<Tensor>& in) { return run_op("InstanceNormalization", in).status; };
  EXPECT_TRUE(has_text(status({x, v2, make_tensor<float>({3}, {1, 1, 1})}),
                       "node 'test' (InstanceNormalization): sizes 3 and 2 must be equal (length of B [3] must "
                       "equal the channels of input [1, 2, 2])"));
  EXPECT_TRUE(has_text(status({x, make_tensor<float>({2, 1}, {1, 1}), v2}), "scale [2, 1] must have rank 1"));
  EXPECT_TRUE(has_text(status({make_tensor<float>({2}, {1, 2}), v2, v2}), "input [2] must have rank >= 2"));
  EXPECT_TRUE(has_text(status({x, v2}), "expects 3 inputs, got 2"));
  EXPECT_TRUE(has_text(status({make_tensor<int32_t>({1, 2, 1}, {1, 2}), v2, v2}), "input #0 has dtype i32"));
}

TEST(InstanceNormSymbolic, ShapeAndRunsBelowTheBound) {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 64, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 64, 1}));
  ExprId ch = pool.dim(pool.add_dim({"C", 1, 16, 1}));
  ExprId four = pool.constant(4);
  auto vec = sym_input(DType::kF32, {four});
  SymResult r = infer(pool, "InstanceNormalization", {sym_input(DType::kF32, {batch, four, h, w}), vec, vec});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 4, H, W]");
  EXPECT_EQ(guards_text(pool, r), "");
  SymResult g = infer(pool, "InstanceNormalization", {sym_input(DType::kF32, {batch, ch, w}), vec, vec});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(pool, g), "4 == C");

  std::mt19937 rng(4);
  Tensor scale = random_f32(rng, {4}), b = random_f32(rng, {4});
  for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1, 1, 4}, {2, 5, 7, 4}, {8, 1, 9, 4}, {3, 13, 2, 4}}) {
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
    Tensor x = random_f32(rng, out[0].shape);
    ASSERT_EQ(run_kernel("InstanceNormalization", {x, scale, b}, &out), kernels::KernelStatus::kOk);
    std::vector<double> want = reference(x, scale, b, 1e-5);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(out[0].at(i), want[i], 2e-5 * (1 + std::abs(want[i])));
  }
}

}  // namespace
}  // namespace kiln::testing
