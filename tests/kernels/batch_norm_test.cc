// BatchNormalization: hand cases, a seeded sweep over ranks 2-5 against a double reference,
// errors, and a symbolic shape run below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

/// (x - mean) / sqrt(var + eps) * scale + B per channel, in double.
std::vector<double> reference(const Tensor& x, const Tensor& scale, const Tensor& b, const Tensor& mean,
                              const Tensor& var, double eps) {
  int64_t channels = x.shape[1], plane = 1;
  for (size_t k = 2; k < x.shape.size(); ++k) plane *= x.shape[k];
  std::vector<double> y(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t ch = (i / plane) % channels;
    y[i] = (x.at(i) - mean.at(ch)) / std::sqrt(var.at(ch) + eps) * scale.at(ch) + b.at(ch);
  }
  return y;
}

TEST(BatchNorm, HandComputed) {
  Tensor x = make_tensor<float>({1, 2, 2}, {1, 2, 3, 4});
  Tensor scale = make_tensor<float>({2}, {1, 2}), b = make_tensor<float>({2}, {0, 1});
  Tensor mean = make_tensor<float>({2}, {1, 2}), var = make_tensor<float>({2}, {3, 0});
  OpResult r = run_op("BatchNormalization", {x, scale, b, mean, var}, AttrStore().set_float("epsilon", 1.f));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 2, 2}));
  // channel 0: (x - 1) / 2; channel 1: (x - 2) / 1 * 2 + 1
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 0.5f, 3, 5}));

  // Rank 2 (N, C), default epsilon, explicit training_mode = 0.
  Tensor x2 = make_tensor<float>({2, 2}, {1, 2, 3, 4});
  r = run_op("BatchNormalization", {x2, scale, b, mean, make_tensor<float>({2}, {4, 1})},
             AttrStore().set_int("training_mode", 0));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  std::vector<float> y = r.outputs[0].values<float>();
  EXPECT_NEAR(y[0], 0.0, 1e-6);
  EXPECT_NEAR(y[1], 1.0, 1e-5);
  EXPECT_NEAR(y[2], 2 / std::sqrt(4 + 1e-5), 1e-6);
  EXPECT_NEAR(y[3], 2 * 2 / std::sqrt(1 + 1e-5) + 1, 1e-5);
}

TEST(BatchNorm, RandomSweepAgainstReference) {
  std::mt19937 rng(1701);
  for (int iter = 0; iter < 200; ++iter) {
    int rank = 2 + static_cast<int>(rng() % 4);
    std::vector<int64_t> shape = random_shape(rng, rank, rank > 3 ? 4 : 7);
    int64_t ch = shape[1];
    Tensor x = random_f32(rng, shape, -3, 3);
    Tensor scale = random_f32(rng, {ch}, -2, 2), b = random_f32(rng, {ch});
    Tensor mean = random_f32(rng, {ch}), var = random_f32(rng, {ch}, 0.05f, 3);
    AttrStore a;
    float eps = 1e-5f;
    if (rng() % 2) a.set_float("epsilon", eps = std::uniform_real_distribution<float>(1e-6f, 0.5f)(rng));
    SlotRun s = run_op_in_slots("BatchNormalization", {x, scale, b, mean, var}, a);
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, shape);
    EXPECT_TRUE(s.tails_intact) << "iter " << iter;
    std::vector<double> want = reference(x, scale, b, mean, var, eps);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(s.exact.outputs[0].at(i), want[i], 1e-5 * (1 + std::abs(want[i]))) << "iter " << iter << " at " << i;
      ASSERT_EQ(s.outputs[0].at(i), s.exact.outputs[0].at(i)) << "slotted run differs, iter " << iter;
    }
  }
}

TEST(BatchNorm, Errors) {
  Tensor x = make_tensor<float>({1, 2, 2}, {1, 2, 3, 4});
  Tensor v2 = make_tensor<float>({2}, {1, 1}), v3 = make_tensor<float>({3}, {1, 1, 1});
  auto message = [](const std::vector<Tensor>& in, const AttrStore& a = AttrStore(), size_t outputs = 1) {
    OpResult r = run_op("BatchNormalization", in, a, outputs);
    EXPECT_FALSE(r.status.ok());
    return r.status;
  };
  EXPECT_TRUE(has_text(message({x, v2, v2, v2, v2}, AttrStore().set_int("training_mode", 1)),
                       "node 'test' (BatchNormalization): training_mode = 1 is not supported; export the model in "
                       "inference mode (training_mode = 0)"));
  EXPECT_TRUE(has_text(message({x, v2, v2, v2, v2}, AttrStore(), 3),
                       "asks for 3 outputs; only Y is produced in inference mode"));
  EXPECT_TRUE(has_text(message({make_tensor<float>({2}, {1, 2}), v2, v2, v2, v2}),
                       "input X [2] must have rank >= 2 (N, C, ...)"));
  EXPECT_TRUE(has_text(message({x, v2, v2, v3, v2}),
                       "sizes 3 and 2 must be equal (length of mean [3] must equal the channels of X [1, 2, 2])"));
  EXPECT_TRUE(has_text(message({x, v2, make_tensor<float>({1, 2}, {1, 1}), v2, v2}), "B [1, 2] must have rank 1"));
  EXPECT_TRUE(has_text(message({x, v2, v2, v2}), "expects 5 inputs, got 4"));
  EXPECT_TRUE(has_text(message({x, v2, v2, v2, make_tensor<int64_t>({2}, {1, 1})}),
                       "input #4 has dtype i64, expected f32"));
}

TEST(BatchNormSymbolic, ShapeAndRunsBelowTheBound) {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 64, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 64, 1}));
  ExprId ch = pool.dim(pool.add_dim({"C", 1, 16, 1}));
  ExprId three = pool.constant(3);
  auto vec = sym_input(DType::kF32, {three});
  SymResult r = infer(pool, "BatchNormalization", {sym_input(DType::kF32, {batch, three, h, w}), vec, vec, vec, vec});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, H, W]");
  EXPECT_EQ(guards_text(pool, r), "");

  SymResult g = infer(pool, "BatchNormalization", {sym_input(DType::kF32, {batch, ch, h}), vec, vec, vec, vec});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(pool, g), "3 == C");

  std::mt19937 rng(3);
  Tensor scale = random_f32(rng, {3}), b = random_f32(rng, {3}), mean = random_f32(rng, {3});
  Tensor var = random_f32(rng, {3}, 0.1f, 2);
  for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1, 1, 3}, {2, 5, 7, 3}, {8, 1, 9, 3}, {3, 13, 2, 3}}) {
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
    Tensor x = random_f32(rng, out[0].shape);
    ASSERT_EQ(run_kernel("BatchNormalization", {x, scale, b, mean, var}, &out), kernels::KernelStatus::kOk);
    std::vector<double> want = reference(x, scale, b, mean, var, 1e-5);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(out[0].at(i), want[i], 1e-5 * (1 + std::abs(want[i])));
  }
}

}  // namespace
}  // namespace kiln::testing
