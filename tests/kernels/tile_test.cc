// Tile: hand cases, a seeded sweep of shapes, repeats and dtypes against index math written
// here (also inside oversized slots), errors, and symbolic repeats run below the bound.
#include <gtest/gtest.h>

#include "bound_slot_util.h"
#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;


/// For each output element, the input element it copies: each index modulo the input dim.
std::vector<int64_t> tiled_from(const V& in, const V& out) {
  const V os = strides_of(out), is = strides_of(in);
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<int64_t> from(n, 0);
  for (int64_t e = 0; e < n; ++e)
    for (size_t k = 0; k < in.size(); ++k) from[e] += e / os[k] % out[k] % in[k] * is[k];
  return from;
}

TEST(Tile, HandComputed) {
  Tensor x = make_tensor<float>({2, 2}, {1, 2, 3, 4});
  OpResult r = run_op("Tile", {x, i64s({2, 3})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (V{4, 6}));
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  r = run_op("Tile", {make_tensor<int64_t>({3}, {7, 8, 9}), make_tensor<int32_t>({1}, {2})});
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{7, 8, 9, 7, 8, 9}));
  r = run_op("Tile", {x, i64s({0, 1})});
  EXPECT_EQ(r.outputs[0].shape, (V{0, 2}));
  r = run_op("Tile", {make_tensor<bool>({}, {true}), i64s({})});
  EXPECT_EQ(r.outputs[0].shape, (V{}));
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{1}));
}

TEST(Tile, RandomSweep) {
  std::mt19937 rng(2024);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    V in = random_shape(rng, rank, 4), reps(rank), out(rank);
    for (int k = 0; k < rank; ++k) {
      reps[k] = static_cast<int64_t>(rng() % 4);
      if (rng() % 4) reps[k] = 1 + reps[k];  // mostly non-zero
      out[k] = in[k] * reps[k];
    }
    Tensor x = random_tensor(rng, dtypes[iter % 4], in);
    SlotRun s = run_op_in_slots("Tile", {x, i64s(reps)});
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, out);
    expect_picked(s.exact.outputs[0], x, tiled_from(in, out), "iter " + std::to_string(iter));
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes);
  }
}

TEST(Tile, Errors) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 0));
  EXPECT_TRUE(has_text(run_op("Tile", {x, i64s({2})}).status,
                       "node 'test' (Tile): repeats [2] has 1 elements but the input [2, 3] has rank 2"));
  EXPECT_TRUE(has_text(run_op("Tile", {x, i64s({1, -1})}).status, "repeats [1, -1] element 1 (-1) is negative"));
  EXPECT_TRUE(has_text(run_op("Tile", {x, make_tensor<float>({2}, {1, 1})}).status,
                       "repeats input #1 has dtype f32, expected i64"));
  SymPool s;
  auto unknown = sym_input(DType::kI64, {s.c(1)});
  EXPECT_TRUE(has_text(infer(s.pool, "Tile", {sym_input(DType::kF32, {s.seq}), unknown}).status,
                       "repeats input #1 must be a 1-D constant or computed from input shapes"));
  std::vector<Tensor> out(1);
  out[0].shape = {2, 6};  // repeats say [4, 3]
  EXPECT_EQ(run_kernel("Tile", {x, i64s({2, 1})}, &out), kernels::KernelStatus::kInvalidValue);
}

TEST(TileSymbolic, SymbolicRepeatsRunBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult r = infer(p, "Tile", {sym_input(DType::kI32, {s.batch, s.c(3)}), sym_values_input(p, {s.c(2), s.seq})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[2*batch, 3*seq]");
  EXPECT_TRUE(r.guards.empty());
  EXPECT_EQ(values_of(p, infer(p, "Tile", {sym_values_input(p, {s.batch, s.seq}), sym_values_input(p, {s.c(2)})})),
            "[batch, seq, batch, seq]");
  std::mt19937 rng(8);
  for (V dims : {V{1, 1}, V{3, 5}, V{8, 512}}) {
    Tensor x = random_tensor(rng, DType::kI32, {dims[0], 3});
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kI32;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Tile", {x, i64s({2, dims[1]})}, &out), kernels::KernelStatus::kOk);
    expect_picked(out[0], x, tiled_from(x.shape, out[0].shape), "tile below the bound");
  }
}

}  // namespace
}  // namespace kiln::testing
