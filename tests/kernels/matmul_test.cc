// MatMul: hand cases for every rank rule, a seeded sweep of batched/broadcast/1-D shapes
// against a double reference, errors, and symbolic shapes with their guards.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "op_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

TEST(MatMul, HandComputed) {
  Tensor a = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make_tensor<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  OpResult r = run_op("MatMul", {a, b});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 5, 10, 11}));

  Tensor v = make_tensor<float>({3}, {1, 1, 2});
  r = run_op("MatMul", {v, b});  // [3] x [3,2] -> [2]
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 3}));
  r = run_op("MatMul", {a, v});  // [2,3] x [3] -> [2]
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{9, 21}));
  r = run_op("MatMul", {v, v});  // [3] x [3] -> scalar
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{6}));

  // Batch axes broadcast: [2,1,1,2] x [3,2,1] -> [2,3,1,1].
  Tensor ba = make_tensor<float>({2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor bb = make_tensor<float>({3, 2, 1}, {1, 0, 0, 1, 1, 1});
  r = run_op("MatMul", {ba, bb});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 3, 1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 2, 3, 3, 4, 7}));
}

// Numpy matmul in double, from the definition: out[batch..., i, j] = sum_k a[.., i, k] b[.., k, j].
std::vector<double> reference_matmul(const Tensor& a, const Tensor& b, std::vector<int64_t>* out_shape) {
  std::vector<int64_t> sa = a.shape, sb = b.shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k_len = sa.back(), n = sb.back();
  size_t batch_rank = std::max(sa.size(), sb.size()) - 2;
  std::vector<int64_t> batch(batch_rank);
  auto dim_or_1 = [&](const std::vector<int64_t>& s, size_t k) {  // batch axis k aligned right
    size_t own = s.size() - 2;
    return k + own >= batch_rank ? s[k + own - batch_rank] : int64_t{1};
  };
  for (size_t k = 0; k < batch_rank; ++k) batch[k] = std::max(dim_or_1(sa, k), dim_or_1(sb, k));
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  std::vector<double> y;
  for (int64_t t = 0; t < batches; ++t) {
    // Flat element offsets of this batch's matrices (a broadcast axis contributes 0).
    int64_t a_off = 0, b_off = 0, a_scale = m * k_len, b_scale = k_len * n, rest = t;
    for (size_t k = batch_rank; k-- > 0;) {
      int64_t idx = rest % batch[k];
      rest /= batch[k];
      int64_t da = dim_or_1(sa, k), db = dim_or_1(sb, k);
      a_off += (da == 1 ? 0 : idx) * a_scale;
      b_off += (db == 1 ? 0 : idx) * b_scale;
      a_scale *= da;
      b_scale *= db;
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < k_len; ++k) acc += a.at(a_off + i * k_len + k) * b.at(b_off + k * n + j);
        y.push_back(acc);
      }
  }
  *out_shape = batch;
  if (a.shape.size() > 1) out_shape->push_back(m);
  if (b.shape.size() > 1) out_shape->push_back(n);
  return y;
}

TEST(MatMul, RandomSweepAgainstReference) {
  std::mt19937 rng(77);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 300; ++iter) {
    int64_t m = pick(1, 7), k_len = pick(1, 9), n = pick(1, 7);
    std::vector<int64_t> batch = random_shape(rng, static_cast<int>(pick(0, 3)), 3);
    // Each operand takes a suffix of the batch axes, some set to 1, or is 1-D.
    auto operand = [&](int64_t rows, int64_t cols, bool vector_ok, bool first) {
      if (vector_ok && pick(0, 4) == 0) return std::vector<int64_t>{first ? cols : rows};
      std::vector<int64_t> s(batch.begin() + pick(0, static_cast<int64_t>(batch.size())), batch.end());
      for (auto& d : s)
        if (pick(0, 2) == 0) d = 1;
      s.push_back(rows);
      s.push_back(cols);
      return s;
    };
    Tensor a = random_f32(rng, operand(m, k_len, true, true));
    Tensor b = random_f32(rng, operand(k_len, n, true, false));
    std::vector<int64_t> want_shape;
    std::vector<double> want = reference_matmul(a, b, &want_shape);
    SlotRun s = run_op_in_slots("MatMul", {a, b});
    ASSERT_TRUE(s.exact.status.ok()) << "iter " << iter << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, want_shape) << "iter " << iter;
    EXPECT_TRUE(s.tails_intact) << "iter " << iter;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(s.exact.outputs[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << "iter " << iter;
      ASSERT_EQ(s.outputs[0].at(i), s.exact.outputs[0].at(i)) << "slotted run differs, iter " << iter;
    }
  }
}

TEST(MatMul, Errors) {
  Tensor a = make_tensor<float>({2, 3}, std::vector<float>(6, 1));
  Tensor b = make_tensor<float>({4, 2}, std::vector<float>(8, 1));
  EXPECT_TRUE(has_text(run_op("MatMul", {a, b}).status,
                       "node 'test' (MatMul): sizes 3 and 4 must be equal (inner dimensions to multiply [2, 3] by [4, 2])"));
  Tensor ba = make_tensor<float>({2, 2, 3}, std::vector<float>(12, 1));
  Tensor bb = make_tensor<float>({3, 3, 2}, std::vector<float>(18, 1));
  EXPECT_TRUE(has_text(run_op("MatMul", {ba, bb}).status, "cannot broadcast [2] with [3]"));
  Tensor i = make_tensor<int64_t>({3, 2}, std::vector<int64_t>(6, 1));
  EXPECT_TRUE(has_text(run_op("MatMul", {a, i}).status, "input #1 has dtype i64, expected f32"));
  Tensor scalar = make_tensor<float>({}, {2});
  EXPECT_TRUE(has_text(run_op("MatMul", {scalar, a}).status, "input #0 is a scalar; matmul operands need rank >= 1"));
  EXPECT_TRUE(has_text(run_op("MatMul", {a}).status, "expects 2 inputs, got 1"));
}

class MatMulSymbolic : public ::testing::Test {
 protected:
  SymResult matmul(std::vector<ExprId> a, std::vector<ExprId> b) {
    return infer(pool, "MatMul", {sym_input(DType::kF32, a), sym_input(DType::kF32, b)});
  }
  ExprId k(int64_t v) { return pool.constant(v); }
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId seq = pool.dim(pool.add_dim({"seq", 1, 512, 1}));
};

TEST_F(MatMulSymbolic, Shapes) {
  SymResult r = matmul({batch, seq, k(64)}, {k(64), k(32)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 32]");
  EXPECT_EQ(guards_text(pool, r), "");

  // Attention scores: [batch, 4, seq, 16] x [batch, 4, 16, seq].
  r = matmul({batch, k(4), seq, k(16)}, {batch, k(4), k(16), seq});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 4, seq, seq]");
  EXPECT_EQ(guards_text(pool, r), "");

  r = matmul({seq}, {batch, seq, k(8)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 8]");
}

TEST_F(MatMulSymbolic, UnprovableRelationsBecomeGuards) {
  ExprId hidden = pool.dim(pool.add_dim({"hidden", 1, 128, 1}));
  ExprId other = pool.dim(pool.add_dim({"other", 1, 8, 1}));
  SymResult r = matmul({batch, seq, hidden}, {other, k(64), k(10)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 10]");
  EXPECT_EQ(guards_text(pool, r), "hidden == 64; batch == other");
  EXPECT_EQ(r.guards[0].op_type, "MatMul");

  // A dim that can never reach the other size is refused at export.
  ExprId small = pool.dim(pool.add_dim({"small", 1, 16, 1}));
  EXPECT_TRUE(has_text(matmul({seq, small}, {k(64), k(3)}).status, "sizes small and 64 can never be equal"));
}

TEST_F(MatMulSymbolic, BindThenExecuteBelowTheBound) {
  SymResult r = matmul({batch, seq, k(5)}, {k(5), k(3)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  std::mt19937 rng(3);
  for (int64_t sv : {1, 2, 7, 31, 64}) {
    Tensor a = random_f32(rng, {2, sv, 5}), b = random_f32(rng, {5, 3});
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, {2, sv});
    std::vector<int64_t> want_shape;
    std::vector<double> want = reference_matmul(a, b, &want_shape);
    ASSERT_EQ(out[0].shape, want_shape);
    ASSERT_EQ(run_kernel("MatMul", {a, b}, &out), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(out[0].at(i), want[i], 1e-4) << "seq=" << sv;
  }
}

}  // namespace
}  // namespace kiln::testing
