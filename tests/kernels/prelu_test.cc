// PRelu: hand cases (scalar, per-channel [C, 1, 1] and full-shape slopes), a seeded sweep of
// shapes and one-way broadcast slopes against a double reference (also run in oversized
// slots), errors (a slope that does not broadcast onto X), and symbolic [batch, C, H, W]
// shapes with their guards, evaluated and run far below the bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "op_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

std::vector<float> prelu(const Tensor& x, const Tensor& slope) {
  OpResult r = run_op("PRelu", {x, slope});
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  if (r.outputs.empty()) return {};
  EXPECT_EQ(r.outputs[0].shape, x.shape);
  EXPECT_EQ(r.outputs[0].dtype, DType::kF32);
  return r.outputs[0].values<float>();
}

/// y = x for x >= 0, slope * x otherwise, with the slope broadcast onto x's shape; in double.
std::vector<double> reference(const Tensor& x, const Tensor& slope) {
  std::vector<double> y(x.numel());
  for (int64_t e = 0; e < x.numel(); ++e) {
    double v = x.at(e), a = slope.at(broadcast_source(x.shape, slope.shape, e));
    y[e] = v < 0 ? a * v : v;
  }
  return y;
}

TEST(PRelu, ScalarSlope) {
  Tensor x = make_tensor<float>({2, 3}, {-2, -0.5f, 0, 0.5f, 3, -6});
  std::vector<float> want = {-0.5f, -0.125f, 0, 0.5f, 3, -1.5f};
  EXPECT_EQ(prelu(x, make_tensor<float>({}, {0.25f})), want);
  EXPECT_EQ(prelu(x, make_tensor<float>({1}, {0.25f})), want);
  EXPECT_EQ(prelu(x, make_tensor<float>({1, 1}, {0.25f})), want);
  // NaN passes through; infinities scale.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> y = prelu(make_tensor<float>({3}, {NAN, -inf, inf}), make_tensor<float>({}, {0.5f}));
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], -inf);
  EXPECT_EQ(y[2], inf);
}

TEST(PRelu, PerChannelSlope) {
  // NCHW with slope [C, 1, 1]: channel 0 scales by 0.1, channel 1 by 10.
  Tensor x = make_tensor<float>({1, 2, 2, 2}, {-1, 2, -3, 4, -1, 2, -3, 4});
  std::vector<float> y = prelu(x, make_tensor<float>({2, 1, 1}, {0.1f, 10}));
  std::vector<float> want = {-0.1f, 2, -0.3f, 4, -10, 2, -30, 4};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
  // Two images, three channels: slope [3, 1, 1] repeats per image.
  Tensor x2 = make_tensor<float>({2, 3, 1, 1}, {-1, -1, -1, -2, 5, -2});
  EXPECT_EQ(prelu(x2, make_tensor<float>({3, 1, 1}, {1, 2, 3})), (std::vector<float>{-1, -2, -3, -2, 5, -6}));
  // A trailing-axis slope (as after Gemm): [N, C] with slope [C].
  Tensor x3 = make_tensor<float>({2, 3}, {-1, -1, -1, -4, 0, 4});
  EXPECT_EQ(prelu(x3, make_tensor<float>({3}, {0.5f, 0, -1})), (std::vector<float>{-0.5f, 0, 1, -2, 0, 4}));
}

TEST(PRelu, FullShapeSlope) {
  Tensor x = make_tensor<float>({2, 2}, {-1, -2, 3, -4});
  EXPECT_EQ(prelu(x, make_tensor<float>({2, 2}, {1, 2, 3, 4})), (std::vector<float>{-1, -4, 3, -16}));
  Tensor x4 = make_tensor<float>({1, 2, 1, 2}, {-1, -1, -1, -1});
  EXPECT_EQ(prelu(x4, make_tensor<float>({1, 2, 1, 2}, {1, 2, 3, 4})), (std::vector<float>{-1, -2, -3, -4}));
}

TEST(PRelu, RandomSweepAgainstReference) {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> slope_value(-2.f, 2.f);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<int64_t> xs = random_shape(rng, 1 + iter % 5, 6);
    std::vector<int64_t> ss = broadcastable_shape(rng, xs);  // drops leading axes, sets some to 1
    Tensor x = random_f32(rng, xs, -3.f, 3.f);
    Tensor slope = random_f32(rng, ss, -2.f, 2.f);
    std::string what = "iter " + std::to_string(iter);
    SlotRun s = run_op_in_slots("PRelu", {x, slope});
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk) << what;
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk) << what;
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, xs) << what;
    std::vector<double> want = reference(x, slope);
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.at(i), want[i], 1e-6 * (1 + std::abs(want[i]))) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    EXPECT_EQ(s.outputs[0].bytes, y.bytes) << what;
  }
}

TEST(PRelu, Errors) {
  Tensor x = make_tensor<float>({2, 4}, std::vector<float>(8, -1.f));
  // Sizes that cannot broadcast at all.
  EXPECT_TRUE(has_text(run_op("PRelu", {x, make_tensor<float>({3}, {1, 2, 3})}).status,
                       "node 'test' (PRelu): slope (input #1) [3] must broadcast to X's shape [2, 4] (each slope axis, "
                       "aligned to X's last axes, is 1 or X's size)"));
  // Broadcastable both ways, but the slope would stretch X (one-way broadcasting only).
  Tensor x1 = make_tensor<float>({1, 4}, std::vector<float>(4, -1.f));
  EXPECT_TRUE(has_text(run_op("PRelu", {x1, make_tensor<float>({2, 4}, std::vector<float>(8, 1.f))}).status,
                       "slope (input #1) [2, 4] must broadcast to X's shape [1, 4] (its size 2 would stretch X's axis "
                       "0 of size 1)"));
  Tensor x4 = make_tensor<float>({4}, {1, 2, 3, 4});
  EXPECT_TRUE(has_text(run_op("PRelu", {x4, make_tensor<float>({1, 4}, {1, 2, 3, 4})}).status,
                       "slope (input #1) [1, 4] must broadcast to X's shape [4] (it has more axes than X)"));
  EXPECT_TRUE(has_text(run_op("PRelu", {x, make_tensor<int64_t>({1}, {1})}).status,
                       "input #1 has dtype i64, expected f32"));
  EXPECT_TRUE(has_text(run_op("PRelu", {make_tensor<int32_t>({1}, {1}), make_tensor<float>({1}, {1})}).status,
                       "input #0 has dtype i32, expected f32"));
  EXPECT_TRUE(has_text(run_op("PRelu", {x}).status, "expects 2 inputs, got 1"));
}

class PReluSymbolic : public ::testing::Test {
 protected:
  SymResult shape_of(std::vector<ExprId> x, std::vector<ExprId> slope) {
    return infer(pool, "PRelu", {sym_input(DType::kF32, std::move(x)), sym_input(DType::kF32, std::move(slope))});
  }
  /// Runs the kernel at dims `dims` (batch, C, H, W) on the evaluated shapes; checks the reference.
  void run_below_bound(const SymResult& r, const std::vector<ExprId>& slope_shape, const std::vector<int64_t>& dims) {
    std::mt19937 rng(static_cast<unsigned>(dims[0] * 1000 + dims[2] * 100 + dims[3]));
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
    Tensor x = random_f32(rng, out[0].shape, -2.f, 2.f);
    Tensor slope = random_f32(rng, eval_shape(pool, slope_shape, dims), -2.f, 2.f);
    for (const kernels::Guard& g : r.guards) ASSERT_TRUE(guard_holds(pool, g, dims));
    ASSERT_EQ(run_kernel("PRelu", {x, slope}, &out), kernels::KernelStatus::kOk);
    std::vector<double> want = reference(x, slope);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_NEAR(out[0].at(i), want[i], 1e-6 * (1 + std::abs(want[i])));
  }
  ExprId k(int64_t v) { return pool.constant(v); }
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId ch = pool.dim(pool.add_dim({"C", 1, 64, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 512, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 512, 1}));
};

TEST_F(PReluSymbolic, ShapesAndGuards) {
  std::vector<ExprId> x = {batch, ch, h, w};
  SymResult r = shape_of(x, {ch, k(1), k(1)});  // per channel
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, C, H, W]");
  EXPECT_EQ(guards_text(pool, r), "");
  r = shape_of(x, {});  // scalar
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, C, H, W]");
  EXPECT_EQ(guards_text(pool, r), "");
  r = shape_of(x, x);  // full shape
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(guards_text(pool, r), "");
  // A constant per-channel slope on a symbolic C: the channel count is guarded.
  r = shape_of(x, {k(16), k(1), k(1)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, C, H, W]");
  EXPECT_EQ(guards_text(pool, r), "C == 16");
  // A symbolic slope axis where X has the constant 1: it must be 1 too (X is not stretched).
  r = shape_of({batch, ch, k(1), w}, {h, w});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, C, 1, W]");
  EXPECT_EQ(guards_text(pool, r), "H == 1");
  // A slope axis that can never match X's.
  r = shape_of({batch, k(3), h, w}, {k(4), k(1), k(1)});
  EXPECT_TRUE(has_text(r.status, "slope (input #1) [4, 1, 1] must broadcast to X's shape [batch, 3, H, W]"));
}

TEST_F(PReluSymbolic, RunsFarBelowTheBound) {
  std::vector<ExprId> x = {batch, ch, h, w};
  for (std::vector<ExprId> slope : {std::vector<ExprId>{ch, k(1), k(1)}, std::vector<ExprId>{},
                                    std::vector<ExprId>{k(1)}, std::vector<ExprId>{w}, x,
                                    std::vector<ExprId>{k(1), ch, h, k(1)}}) {
    SymResult r = shape_of(x, slope);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_EQ(r.shape, "[batch, C, H, W]");
    ASSERT_TRUE(r.guards.empty()) << guards_text(pool, r);
    for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1, 1, 1}, {2, 3, 4, 5}, {1, 4, 7, 3}, {3, 2, 1, 9}})
      run_below_bound(r, slope, dims);
  }
  // With the guard C == 3 holding.
  SymResult r = shape_of(x, {k(3), k(1), k(1)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  run_below_bound(r, {k(3), k(1), k(1)}, {2, 3, 5, 4});
}

}  // namespace
}  // namespace kiln::testing
