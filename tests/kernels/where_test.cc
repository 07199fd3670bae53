// Where: hand cases, a seeded sweep of three-way broadcasts and dtypes against index math
// written here (also inside oversized slots), errors, and symbolic shapes.
#include <gtest/gtest.h>

#include <algorithm>

#include "bound_slot_util.h"
#include "fold_test_util.h"
#include "guard_text_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

TEST(Where, HandComputed) {
  Tensor c = make_tensor<bool>({2, 1}, {true, false});
  Tensor x = make_tensor<float>({3}, {1, 2, 3});
  Tensor y = make_tensor<float>({}, {-1});
  OpResult r = run_op("Where", {c, x, y});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (V{2, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  Tensor c2 = make_tensor<bool>({3}, {false, true, false});
  r = run_op("Where", {c2, make_tensor<int64_t>({3}, {1, 2, 3}), make_tensor<int64_t>({3}, {7, 8, 9})});
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{7, 2, 9}));
  r = run_op("Where", {c2, make_tensor<bool>({1}, {true}), make_tensor<bool>({1}, {false})});
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{0, 1, 0}));
}

TEST(Where, RandomSweep) {
  std::mt19937 rng(55);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = static_cast<int>(rng() % 5);
    V out = random_shape(rng, rank, 4);
    V sc = broadcastable_shape(rng, out), sx = broadcastable_shape(rng, out), sy = broadcastable_shape(rng, out);
    const V want = broadcast_shape({&sc, &sx, &sy});
    const DType t = dtypes[iter % 4];
    Tensor c = random_tensor(rng, DType::kBool, sc), x = random_tensor(rng, t, sx), y = random_tensor(rng, t, sy);
    SlotRun s = run_op_in_slots("Where", {c, x, y});
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& o = s.exact.outputs[0];
    ASSERT_EQ(o.shape, want);
    ASSERT_EQ(o.dtype, t);
    for (int64_t e = 0; e < o.numel(); ++e) {
      const double expect = c.at(broadcast_source(want, sc, e)) != 0 ? x.at(broadcast_source(want, sx, e)) : y.at(broadcast_source(want, sy, e));
      ASSERT_EQ(o.at(e), expect) << "iter " << iter << " at " << e;
    }
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, o.bytes);
  }
}

TEST(Where, Errors) {
  Tensor c = make_tensor<bool>({2}, {true, false});
  Tensor x = make_tensor<float>({2}, {1, 2});
  Tensor i = make_tensor<int64_t>({2}, {1, 2});
  EXPECT_TRUE(has_text(run_op("Where", {x, x, x}).status,
                       "node 'test' (Where): condition input #0 has dtype f32, expected bool"));
  EXPECT_TRUE(has_text(run_op("Where", {c, x, i}).status, "X and Y have different dtypes f32 and i64"));
  EXPECT_TRUE(has_text(run_op("Where", {c, x, make_tensor<float>({3}, {1, 2, 3})}).status, "cannot broadcast"));
  EXPECT_TRUE(has_text(run_op("Where", {c, x}).status, "expects 3 inputs, got 2"));
}

TEST(WhereSymbolic, ShapesAndGuards) {
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult r = infer(p, "Where", {sym_input(DType::kBool, {s.batch, s.c(1), s.seq}),
                                   sym_input(DType::kF32, {s.c(4), s.c(1)}), sym_input(DType::kF32, {s.seq})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 4, seq]");
  EXPECT_TRUE(r.guards.empty());
  SymResult g = infer(p, "Where", {sym_input(DType::kBool, {s.seq}), sym_input(DType::kF32, {s.batch}),
                                   sym_input(DType::kF32, {s.c(1)})});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(p, g), "seq == batch");

  std::mt19937 rng(6);
  for (V dims : {V{1, 1}, V{2, 9}, V{8, 512}}) {
    std::vector<Tensor> in = {random_tensor(rng, DType::kBool, {dims[0], 1, dims[1]}),
                              random_tensor(rng, DType::kF32, {4, 1}), random_tensor(rng, DType::kF32, {dims[1]})};
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Where", in, &out), kernels::KernelStatus::kOk);
    for (int64_t e = 0; e < out[0].numel(); ++e) {
      const V& o = out[0].shape;
      const double expect = in[0].at(broadcast_source(o, in[0].shape, e)) != 0 ? in[1].at(broadcast_source(o, in[1].shape, e))
                                                                       : in[2].at(broadcast_source(o, in[2].shape, e));
      ASSERT_EQ(out[0].at(e), expect);
    }
  }
}

}  // namespace
}  // namespace kiln::testing
