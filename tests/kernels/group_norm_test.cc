// GroupNormalization: hand cases (per-group scale of opset 18, per-channel scale of opset 21),
// a seeded sweep over ranks 2-5 against a double reference (also run in oversized slots), 0
// extents, errors, and symbolic shapes (C and the spatial dims symbolic) run below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;
using Shape = std::vector<int64_t>;

AttrStore groups_attr(int64_t g) { return AttrStore().set_int("num_groups", g); }

/// Per (n, group): mean and biased variance over the group's channels and spatial elements,
/// then scale and bias indexed by the group (per_group) or by the channel.
std::vector<double> reference(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups, double eps,
                              bool per_group) {
  const int64_t n = x.shape[0], channels = x.shape[1];
  int64_t plane = 1;
  for (size_t k = 2; k < x.shape.size(); ++k) plane *= x.shape[k];
  const int64_t cpg = channels / groups;
  std::vector<double> y(static_cast<size_t>(x.numel()));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      double mean = 0, var = 0;
      const double count = static_cast<double>(cpg * plane);
      for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
        for (int64_t i = 0; i < plane; ++i) mean += x.at((b * channels + ch) * plane + i) / count;
      for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch)
        for (int64_t i = 0; i < plane; ++i) var += std::pow(x.at((b * channels + ch) * plane + i) - mean, 2) / count;
      for (int64_t ch = g * cpg; ch < (g + 1) * cpg; ++ch) {
        const int64_t k = per_group ? g : ch;
        for (int64_t i = 0; i < plane; ++i) {
          const int64_t e = (b * channels + ch) * plane + i;
          y[e] = (x.at(e) - mean) / std::sqrt(var + eps) * scale.at(k) + bias.at(k);
        }
      }
    }
  }
  return y;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.at(static_cast<int64_t>(i)), want[i], 2e-5 * (1 + std::abs(want[i]))) << what << " at " << i;
}

TEST(GroupNorm, HandComputedPerGroupAndPerChannel) {
  // Two groups of two channels, one value each: group 0 = [1, 3] (mean 2, var 1), group 1 =
  // [4, 4] (var 0). With epsilon 3: group 0 normalizes to [-0.5, 0.5], group 1 to [0, 0].
  Tensor x = make_tensor<float>({1, 4, 1}, {1, 3, 4, 4});
  AttrStore a = groups_attr(2).set_float("epsilon", 3.f);
  // Opset 18: scale and bias per group.
  OpResult r = run_op("GroupNormalization", {x, make_tensor<float>({2}, {2, 10}), make_tensor<float>({2}, {1, -1})}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{1, 4, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 2, -1, -1}));
  // Opset 21: scale and bias per channel.
  r = run_op("GroupNormalization",
             {x, make_tensor<float>({4}, {2, 4, 1, 1}), make_tensor<float>({4}, {0, 1, 2, 3})}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{-1, 3, 2, 3}));
  // num_groups == C: the two readings coincide (InstanceNormalization).
  Tensor x2 = make_tensor<float>({1, 2, 2}, {0, 2, 5, 5});
  r = run_op("GroupNormalization", {x2, make_tensor<float>({2}, {2, 3}), make_tensor<float>({2}, {1, -1})},
             groups_attr(2).set_float("epsilon", 3.f));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 2, -1, -1}));
  // num_groups = 1 over [N, C] (rank 2: no spatial axes), default epsilon 1e-5.
  Tensor x3 = make_tensor<float>({2, 2}, {10000, 10002, -1, 1});
  r = run_op("GroupNormalization", {x3, make_tensor<float>({1}, {1}), make_tensor<float>({1}, {0})}, groups_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  const std::vector<float> y = r.outputs[0].values<float>();
  const double z = 1 / std::sqrt(1 + 1e-5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], i % 2 ? z : -z, 1e-6) << i;  // no loss to the offset 10000
}

TEST(GroupNorm, RandomSweepAgainstReference) {
  std::mt19937 rng(1803);
  for (int iter = 0; iter < 240; ++iter) {
    const int rank = 2 + static_cast<int>(rng() % 4);
    Shape shape = random_shape(rng, rank, rank > 3 ? 4 : 7);
    const int64_t groups = 1 + static_cast<int64_t>(rng() % 4), cpg = 1 + static_cast<int64_t>(rng() % 3);
    shape[1] = groups * cpg;
    const bool per_group = iter % 2 == 0;
    const int64_t len = per_group ? groups : shape[1];
    Tensor x = random_f32(rng, shape, -3, 5);
    Tensor scale = random_f32(rng, {len}, -2, 2), bias = random_f32(rng, {len});
    AttrStore a = groups_attr(groups);
    float eps = 1e-5f;
    if (rng() % 2) a.set_float("epsilon", eps = std::uniform_real_distribution<float>(1e-6f, 0.5f)(rng));
    if (rng() % 3 == 0) a.set_int("stash_type", 1);
    const std::string what = "iter " + std::to_string(iter);
    SlotRun s = run_op_in_slots("GroupNormalization", {x, scale, bias}, a);
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk) << what;
    ASSERT_EQ(s.exact.outputs[0].shape, shape) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << what;
    expect_near_all(s.exact.outputs[0], reference(x, scale, bias, groups, eps, per_group), what);
  }
}

TEST(GroupNorm, ZeroExtents) {
  // N = 0, a 0 spatial extent, C = 0: empty outputs; the kernel writes nothing.
  for (Shape shape : {Shape{0, 4, 3}, Shape{2, 4, 0}, Shape{1, 4, 3, 0}, Shape{0, 4}}) {
    OpResult r = run_op("GroupNormalization",
                        {make_tensor<float>(shape, {}), make_tensor<float>({2}, {1, 1}), make_tensor<float>({2}, {0, 0})},
                        groups_attr(2));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
    EXPECT_EQ(r.outputs[0].shape, shape);
    EXPECT_TRUE(r.outputs[0].bytes.empty());
  }
  OpResult r = run_op("GroupNormalization",
                      {make_tensor<float>({3, 0, 2}, {}), make_tensor<float>({0}, {}), make_tensor<float>({0}, {})},
                      groups_attr(2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{3, 0, 2}));
  // Size 1 everywhere.
  r = run_op("GroupNormalization",
             {make_tensor<float>({1, 1, 1}, {7}), make_tensor<float>({1}, {2}), make_tensor<float>({1}, {0.5f})},
             groups_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0.5f}));
}

TEST(GroupNorm, Errors) {
  Tensor x = make_tensor<float>({1, 6, 2}, std::vector<float>(12, 1));
  Tensor v2 = make_tensor<float>({2}, {1, 1}), v3 = make_tensor<float>({3}, {1, 1, 1});
  Tensor v6 = make_tensor<float>({6}, std::vector<float>(6, 1));
  auto status = [](const std::vector<Tensor>& in, const AttrStore& a) {
    return run_op("GroupNormalization", in, a).status;
  };
  EXPECT_TRUE(has_text(status({x, v2, v2}, AttrStore()), "node 'test' (GroupNormalization): needs attribute num_groups"));
  EXPECT_TRUE(has_text(status({x, v2, v2}, groups_attr(0)), "num_groups 0 must be in [1, 2^20]"));
  EXPECT_TRUE(has_text(status({x, v2, v2}, groups_attr(-3)), "num_groups -3 must be in [1, 2^20]"));
  EXPECT_TRUE(has_text(status({x, make_tensor<float>({4}, {1, 1, 1, 1}), make_tensor<float>({4}, {1, 1, 1, 1})},
                              groups_attr(4)),
                       "node 'test' (GroupNormalization): size 6 must be divisible by 4 (the channels of input "
                       "[1, 6, 2] split into num_groups = 4 groups)"));
  EXPECT_TRUE(has_text(status({x, v2, v2}, groups_attr(3)),
                       "sizes 2 and 6 must be equal (scale [2] must have num_groups = 3 entries (opset 18) or one per "
                       "channel of input [1, 6, 2] (opset 21))"));
  EXPECT_TRUE(has_text(status({x, v3, v6}, groups_attr(3)),
                       "sizes 6 and 3 must be equal (bias [6] must have as many entries as scale [3])"));
  EXPECT_TRUE(has_text(status({x, v6, v3}, groups_attr(3)), "bias [3] must have as many entries as scale [6]"));
  EXPECT_TRUE(has_text(status({x, make_tensor<float>({3, 1}, {1, 1, 1}), v3}, groups_attr(3)),
                       "scale [3, 1] must have rank 1 (num_groups or C entries)"));
  EXPECT_TRUE(has_text(status({make_tensor<float>({6}, std::vector<float>(6, 1)), v3, v3}, groups_attr(3)),
                       "input [6] must have rank >= 2 (N, C, ...)"));
  EXPECT_TRUE(has_text(status({x, v3}, groups_attr(3)), "expects 3 inputs, got 2"));
  EXPECT_TRUE(has_text(status({make_tensor<int64_t>({1, 3}, {1, 2, 3}), v3, v3}, groups_attr(3)),
                       "input #0 has dtype i64, expected f32"));
  // The kernel refuses what bind would have refused, writing nothing.
  std::vector<Tensor> out(1);
  out[0].shape = {1, 6, 2};
  EXPECT_EQ(run_kernel("GroupNormalization", {x, make_tensor<float>({4}, {1, 1, 1, 1}),
                                              make_tensor<float>({4}, {1, 1, 1, 1})},
                       &out, groups_attr(3)),
            kernels::KernelStatus::kInvalidValue);
  EXPECT_EQ(out[0].bytes, std::vector<unsigned char>(48, 0xCD));
}

TEST(GroupNormSymbolic, ShapeGuardsAndRunsBelowTheBound) {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 64, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 64, 1}));
  ExprId ch = pool.dim(pool.add_dim({"C", 1, 32, 1}));
  ExprId six = pool.constant(6), three = pool.constant(3);
  // Constant C, symbolic spatial dims: no guard either way.
  auto per_group = sym_input(DType::kF32, {three});
  SymResult r = infer(pool, "GroupNormalization", {sym_input(DType::kF32, {batch, six, h, w}), per_group, per_group},
                      groups_attr(3));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 6, H, W]");
  EXPECT_EQ(guards_text(pool, r), "");
  // Symbolic C: divisibility by num_groups is guarded; a [C] scale needs no other guard, a
  // per-group scale neither; a scale of another constant length is tied to C.
  auto per_channel = sym_input(DType::kF32, {ch});
  SymResult g = infer(pool, "GroupNormalization", {sym_input(DType::kF32, {batch, ch, w}), per_channel, per_channel},
                      groups_attr(4));
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(g.shape, "[batch, C, W]");
  EXPECT_EQ(guards_text(pool, g), "C % 4 == 0");
  g = infer(pool, "GroupNormalization", {sym_input(DType::kF32, {batch, ch, w}), per_group, per_group},
            groups_attr(3));
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(pool, g), "C % 3 == 0");
  auto eight = sym_input(DType::kF32, {pool.constant(8)});
  g = infer(pool, "GroupNormalization", {sym_input(DType::kF32, {batch, ch, w}), eight, eight}, groups_attr(2));
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(pool, g), "C % 2 == 0; 8 == C");

  // The kernel at dims far below the bound, per group and per channel.
  std::mt19937 rng(5);
  for (bool by_group : {true, false}) {
    Tensor scale = random_f32(rng, {by_group ? 3 : 6}), bias = random_f32(rng, {by_group ? 3 : 6});
    for (Shape dims : {Shape{1, 1, 1, 6}, Shape{2, 5, 7, 6}, Shape{8, 1, 9, 6}, Shape{3, 13, 2, 6}}) {
      std::vector<Tensor> out(1);
      out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
      ASSERT_EQ(out[0].shape, (Shape{dims[0], 6, dims[1], dims[2]}));
      Tensor x = random_f32(rng, out[0].shape);
      ASSERT_EQ(run_kernel("GroupNormalization", {x, scale, bias}, &out, groups_attr(3)), kernels::KernelStatus::kOk);
      expect_near_all(out[0], reference(x, scale, bias, 3, 1e-5, by_group), by_group ? "per group" : "per channel");
    }
  }
}

}  // namespace
}  // namespace kiln::testing
