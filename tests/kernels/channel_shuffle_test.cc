// ChannelShuffle (export's, from a Reshape-Transpose-Reshape): a seeded sweep of ranks, groups
// and dtypes against index arithmetic written here (also inside oversized slots), the errors,
// and a symbolic channel count (its divisibility guard) run far below the bound.
#include <gtest/gtest.h>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore groups(int64_t g) {
  core::AttrStore a;
  a.set_int("groups", g);
  return a;
}

TEST(ChannelShuffle, TwoGroupsInterleaveTheHalves) {
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor x = make_tensor<float>({1, 6, 2}, v);  // channels 0..5, two values each
  OpResult r = run_op("ChannelShuffle", {x}, groups(2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (V{1, 6, 2}));
  // output channels: 0, 3, 1, 4, 2, 5
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
}

TEST(ChannelShuffle, RandomSweep) {
  std::mt19937 rng(1618);
  for (int iter = 0; iter < 200; ++iter) {
    const int64_t g = 1 + static_cast<int64_t>(rng() % 4), per = 1 + static_cast<int64_t>(rng() % 5);
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3), c = g * per;
    const int rank = 2 + static_cast<int>(rng() % 4);
    V shape = {n, c};
    for (int k = 2; k < rank; ++k) shape.push_back(1 + static_cast<int64_t>(rng() % 4));
    int64_t inner = 1;
    for (int k = 2; k < rank; ++k) inner *= shape[k];
    const DType t = iter % 3 == 0 ? DType::kI64 : iter % 3 == 1 ? DType::kBool : DType::kF32;
    Tensor x = random_tensor(rng, t, shape);
    SlotRun s = run_op_in_slots("ChannelShuffle", {x}, groups(g));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, shape);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < per; ++i)
        for (int64_t k = 0; k < g; ++k)
          for (int64_t e = 0; e < inner; ++e)
            ASSERT_EQ(y.at((b * c + i * g + k) * inner + e), x.at((b * c + k * per + i) * inner + e)) << "iter " << iter;
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(ChannelShuffle, Errors) {
  std::mt19937 r3(3);
  Tensor x = random_f32(r3, {1, 6, 2, 2});
  EXPECT_TRUE(has_text(run_op("ChannelShuffle", {x}).status, "groups 0 must be in [1, 2^24]"));
  EXPECT_TRUE(has_text(run_op("ChannelShuffle", {x}, groups(4)).status,
                       "(channels of [1, 6, 2, 2] must be a multiple of groups = 4)"));
  std::mt19937 rng(4);
  EXPECT_TRUE(has_text(run_op("ChannelShuffle", {random_f32(rng, {6})}, groups(2)).status,
                       "input [6] must have rank >= 2 (N, C, ...)"));
}

TEST(ChannelShuffleSymbolic, GuardsTheChannelsAndRunsBelowTheBound) {
  core::ExprPool p;
  ExprId c = p.dim(p.add_dim({"C", 2, 64, 2})), h = p.dim(p.add_dim({"H", 1, 64, 1}));
  SymResult s = infer(p, "ChannelShuffle", {sym_input(DType::kF32, {p.constant(2), c, h})}, groups(3));
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_EQ(s.shape, "[2, C, H]");
  ASSERT_EQ(s.guards.size(), 1u);  // C % 3 == 0
  EXPECT_TRUE(guard_holds(p, s.guards[0], {6, 1}));
  EXPECT_FALSE(guard_holds(p, s.guards[0], {8, 1}));
  std::mt19937 rng(9);
  for (V dims : {V{6, 1}, V{12, 5}, V{60, 64}}) {
    Tensor x = random_f32(rng, {2, dims[0], dims[1]});
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kF32;
    out[0].shape = eval_shape(p, s.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("ChannelShuffle", {x}, &out, groups(3)), kernels::KernelStatus::kOk);
    EXPECT_EQ(out[0].values<float>(), run_op("ChannelShuffle", {x}, groups(3)).outputs[0].values<float>());
  }
}

}  // namespace
}  // namespace kiln::testing
