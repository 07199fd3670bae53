// Transpose: hand cases, a seeded sweep of random shapes, perms and dtypes against index
// math written here, errors, and symbolic shapes run below the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;

/// For each output element, the input element it copies.
std::vector<int64_t> reference(const Shape& in, const Shape& perm) {
  Shape out(in.size());
  for (size_t k = 0; k < in.size(); ++k) out[k] = in[perm[k]];
  Shape os = strides_of(out), is = strides_of(in);
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<int64_t> from(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (size_t k = 0; k < out.size(); ++k) src += (i / os[k] % out[k]) * is[perm[k]];
    from[i] = src;
  }
  return from;
}

core::AttrStore perm_attr(Shape perm) { return core::AttrStore().set_ints("perm", std::move(perm)); }

TEST(Transpose, HandComputed) {
  Tensor a = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  OpResult r = run_op("Transpose", {a});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{3, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));

  Tensor b = make_tensor<int64_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  r = run_op("Transpose", {b}, perm_attr({1, 0, 2}));
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 2, 2}));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{0, 1, 4, 5, 2, 3, 6, 7}));
  r = run_op("Transpose", {b}, perm_attr({2, 0, 1}));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));

  Tensor c = make_tensor<bool>({1, 3}, {true, false, true});
  r = run_op("Transpose", {c});
  EXPECT_EQ(r.outputs[0].shape, (Shape{3, 1}));
  EXPECT_EQ(r.outputs[0].bytes, c.bytes);

  Tensor s = make_tensor<int32_t>({}, {42});
  r = run_op("Transpose", {s});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{42}));
}

TEST(Transpose, RandomSweep) {
  std::mt19937 rng(77);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape shape = random_shape(rng, rank, 5);
    Shape perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Tensor x = random_tensor(rng, dtypes[iter % 4], shape);
    const bool by_default = iter % 7 == 0;
    if (by_default)
      for (int k = 0; k < rank; ++k) perm[k] = rank - 1 - k;
    OpResult r = run_op("Transpose", {x}, by_default ? core::AttrStore() : perm_attr(perm));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    Shape want(rank);
    for (int k = 0; k < rank; ++k) want[k] = shape[perm[k]];
    ASSERT_EQ(r.outputs[0].shape, want);
    ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
    expect_picked(r.outputs[0], x, reference(shape, perm), "transpose");
  }
}

// Axes long enough for the blocked path (8 x 8 blocks: full blocks and remainders on both
// axes, the odometer over the other axes), f32 and i64 (4- and 8-byte words), and i8 (rows).
TEST(Transpose, RandomSweepOfLongerAxes) {
  std::mt19937 rng(78);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 120; ++iter) {
    const int rank = 2 + static_cast<int>(rng() % 3);
    Shape shape(rank);
    for (int k = 0; k < rank; ++k) shape[k] = 1 + static_cast<int64_t>(rng() % 21);
    Shape perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Tensor x = random_tensor(rng, dtypes[iter % 4], shape);
    OpResult r = run_op("Transpose", {x}, perm_attr(perm));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
    expect_picked(r.outputs[0], x, reference(shape, perm), "transpose");
  }
}

TEST(Transpose, Errors) {
  Tensor x = make_tensor<float>({2, 3, 4}, std::vector<float>(24, 0));
  EXPECT_TRUE(has_text(run_op("Transpose", {x}, perm_attr({0, 0, 1})).status,
                       "perm [0, 0, 1] is not a permutation of [0, 3) for input [2, 3, 4] of rank 3"));
  EXPECT_TRUE(has_text(run_op("Transpose", {x}, perm_attr({1, 0})).status, "perm [1, 0] is not a permutation"));
  EXPECT_TRUE(has_text(run_op("Transpose", {x}, perm_attr({0, 1, 3})).status, "perm [0, 1, 3] is not a permutation"));
  EXPECT_TRUE(has_text(run_op("Transpose", {x}, perm_attr({0, -1, 1})).status, "is not a permutation"));
  EXPECT_TRUE(has_text(run_op("Transpose", {x, x}).status, "node 'test' (Transpose): expects 1 inputs, got 2"));
}

TEST(TransposeSymbolic, SameBytesExactlyWhenOnlySizeOneAxesMove) {
  // The claim lets the builder alias instead of copy, so it must match what the kernel
  // writes: with distinct input values, the output bytes equal the input's iff it is made.
  std::mt19937 rng(77);
  int claimed = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape dims = random_shape(rng, rank, 3);
    for (auto& d : dims)
      if (rng() % 2) d = 1;
    Shape perm(rank);
    for (int k = 0; k < rank; ++k) perm[k] = k;
    std::shuffle(perm.begin(), perm.end(), rng);
    core::ExprPool p;
    std::vector<ExprId> sym;
    for (int64_t d : dims) sym.push_back(p.constant(d));
    SymResult r = infer(p, "Transpose", {sym_input(DType::kI32, sym)}, perm_attr(perm));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<int32_t> distinct(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) distinct[e] = static_cast<int32_t>(e);
    Tensor in = make_tensor<int32_t>(dims, distinct);
    OpResult out = run_op("Transpose", {in}, perm_attr(perm));
    ASSERT_TRUE(out.status.ok());
    EXPECT_EQ(r.same_bytes, out.outputs[0].bytes == in.bytes) << "iter " << iter;
    claimed += r.same_bytes;
  }
  EXPECT_GT(claimed, 50);  // both outcomes are exercised
  EXPECT_LT(claimed, 350);
  // Symbolic sizes count as possibly > 1: [seq, 1] -> [1, seq] is the same bytes,
  // [batch, seq] -> [seq, batch] is not.
  SymPool s;
  EXPECT_TRUE(infer(s.pool, "Transpose", {sym_input(DType::kF32, {s.seq, s.c(1)})}).same_bytes);
  EXPECT_FALSE(infer(s.pool, "Transpose", {sym_input(DType::kF32, {s.batch, s.seq})}).same_bytes);
}

TEST(TransposeSymbolic, ShapesAndRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq, s.c(3)});
  SymResult r = infer(p, "Transpose", {x}, perm_attr({1, 0, 2}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[seq, batch, 3]");
  EXPECT_TRUE(r.guards.empty());
  EXPECT_EQ(infer(p, "Transpose", {x}).shape, "[3, seq, batch]");

  std::mt19937 rng(5);
  for (Shape dims : {Shape{1, 1}, Shape{3, 7}, Shape{8, 512}, Shape{2, 1}}) {
    Tensor in = random_tensor(rng, DType::kI32, {dims[0], dims[1], 3});
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kI32;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Transpose", {in}, &out, perm_attr({1, 0, 2})), kernels::KernelStatus::kOk);
    expect_picked(out[0], in, reference(in.shape, {1, 0, 2}), "transpose at batch " + std::to_string(dims[0]));
  }
}

}  // namespace
}  // namespace kiln::testing
