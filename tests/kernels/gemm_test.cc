// Gemm: hand cases, a seeded sweep of transposes, scalars and every C broadcast against a
// double reference, errors, and symbolic shapes with their guards.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "op_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

TEST(Gemm, HandComputed) {
  Tensor a = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make_tensor<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  OpResult r = run_op("Gemm", {a, b});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 5, 10, 11}));

  // alpha * A*B + beta * C with C [2] broadcast over rows.
  Tensor c = make_tensor<float>({2}, {100, 200});
  r = run_op("Gemm", {a, b, c}, AttrStore().set_float("alpha", 2.f).set_float("beta", 0.5f));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{58, 110, 70, 122}));

  // Both transposed: A^T is [2,3] from A [3,2], B^T is [3,2] from B [2,3].
  Tensor at = make_tensor<float>({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor bt = make_tensor<float>({2, 3}, {1, 0, 1, 0, 1, 1});
  Tensor col = make_tensor<float>({2, 1}, {1, -1});
  r = run_op("Gemm", {at, bt, col}, AttrStore().set_int("transA", 1).set_int("transB", 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{5, 6, 9, 10}));

  // beta = 0 ignores C entirely, even NaNs in it.
  Tensor nan = make_tensor<float>({1}, {std::nanf("")});
  r = run_op("Gemm", {a, b, nan}, AttrStore().set_float("beta", 0.f));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 5, 10, 11}));
}

// Gemm in double from the definition, indexing A, B and C with explicit bounds.
std::vector<double> reference_gemm(const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb, double alpha,
                                   double beta, int64_t* m_out, int64_t* n_out) {
  int64_t m = ta ? a.shape[1] : a.shape[0], k_len = ta ? a.shape[0] : a.shape[1];
  int64_t n = tb ? b.shape[0] : b.shape[1];
  *m_out = m;
  *n_out = n;
  std::vector<double> y;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < k_len; ++k) {
        double av = ta ? a.at(k * m + i) : a.at(i * k_len + k);
        double bv = tb ? b.at(j * k_len + k) : b.at(k * n + j);
        acc += av * bv;
      }
      double cv = 0;
      if (c) {
        // C's own coordinates: a size-1 (or missing) axis always reads index 0.
        const std::vector<int64_t>& s = c->shape;
        int64_t ci = s.size() == 2 && s[0] != 1 ? i : 0;
        int64_t cj = !s.empty() && s.back() != 1 ? j : 0;
        int64_t cols = s.empty() ? 1 : s.back();
        cv = c->at(ci * cols + cj);
      }
      y.push_back(alpha * acc + beta * cv);
    }
  return y;
}

TEST(Gemm, RandomSweepAgainstReference) {
  std::mt19937 rng(4242);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 300; ++iter) {
    int64_t m = pick(1, 8), k_len = pick(1, 9), n = pick(1, 8);
    bool ta = pick(0, 1), tb = pick(0, 1);
    Tensor a = random_f32(rng, ta ? std::vector<int64_t>{k_len, m} : std::vector<int64_t>{m, k_len});
    Tensor b = random_f32(rng, tb ? std::vector<int64_t>{n, k_len} : std::vector<int64_t>{k_len, n});
    const std::vector<std::vector<int64_t>> c_shapes = {{}, {n}, {1}, {m, n}, {1, n}, {m, 1}, {1, 1}};
    int c_kind = static_cast<int>(pick(-1, 6));  // -1: no C
    Tensor c = c_kind >= 0 ? random_f32(rng, c_shapes[c_kind]) : absent();
    AttrStore attrs;
    double alpha = 1, beta = 1;
    if (pick(0, 1)) attrs.set_float("alpha", static_cast<float>(alpha = pick(-3, 3) * 0.5));
    if (pick(0, 1)) attrs.set_float("beta", static_cast<float>(beta = pick(-3, 3) * 0.5));
    if (ta || pick(0, 1)) attrs.set_int("transA", ta);
    if (tb || pick(0, 1)) attrs.set_int("transB", tb);
    std::vector<Tensor> inputs = {a, b};
    if (c_kind >= 0 || pick(0, 1)) inputs.push_back(c);  // sometimes an explicitly omitted C
    int64_t wm = 0, wn = 0;
    std::vector<double> want = reference_gemm(a, b, c_kind >= 0 ? &c : nullptr, ta, tb, alpha, beta, &wm, &wn);
    SlotRun s = run_op_in_slots("Gemm", inputs, attrs);
    ASSERT_TRUE(s.exact.status.ok()) << "iter " << iter << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, (std::vector<int64_t>{wm, wn})) << "iter " << iter;
    EXPECT_TRUE(s.tails_intact) << "iter " << iter;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(s.exact.outputs[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << "iter " << iter;
      ASSERT_EQ(s.outputs[0].at(i), s.exact.outputs[0].at(i)) << "slotted run differs, iter " << iter;
    }
  }
}

TEST(Gemm, Errors) {
  auto ones = [](std::vector<int64_t> s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return make_tensor<float>(s, std::vector<float>(n, 1.f));
  };
  Tensor a = ones({2, 3}), b = ones({3, 4});
  EXPECT_TRUE(has_text(run_op("Gemm", {ones({1, 2, 3}), b}).status, "input #0 [1, 2, 3] must have rank 2"));
  EXPECT_TRUE(has_text(run_op("Gemm", {a, ones({4})}).status, "input #1 [4] must have rank 2"));
  EXPECT_TRUE(has_text(run_op("Gemm", {a, b}, AttrStore().set_int("transB", 1)).status,
                       "sizes 3 and 4 must be equal (inner dimensions of A [2, 3] transA=0 and B [3, 4] transB=1)"));
  EXPECT_TRUE(has_text(run_op("Gemm", {a, b, ones({3})}).status,
                       "sizes 3 and 4 must be equal (C [3] must broadcast to [2, 4])"));
  EXPECT_TRUE(has_text(run_op("Gemm", {a, b, ones({1, 2, 4})}).status, "C [1, 2, 4] must have rank 0, 1 or 2"));
  Tensor i = make_tensor<int64_t>({2, 3}, std::vector<int64_t>(6, 1));
  EXPECT_TRUE(has_text(run_op("Gemm", {i, b}).status, "node 'test' (Gemm): input #0 has dtype i64, expected f32"));
}

TEST(Gemm, Symbolic) {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId feat = pool.dim(pool.add_dim({"feat", 1, 256, 1}));
  auto k = [&](int64_t v) { return pool.constant(v); };
  auto f32 = [](std::vector<ExprId> s) { return sym_input(DType::kF32, std::move(s)); };
  // A classifier head: [batch, 128] x [10, 128]^T + [10].
  SymResult r = infer(pool, "Gemm", {f32({batch, k(128)}), f32({k(10), k(128)}), f32({k(10)})},
                      AttrStore().set_int("transB", 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 10]");
  EXPECT_EQ(guards_text(pool, r), "");

  // A symbolic inner size needs a guard; C [batch, 1] broadcasts provably.
  r = infer(pool, "Gemm", {f32({k(16), batch}), f32({feat, k(10)}), f32({batch, k(1)})},
            AttrStore().set_int("transA", 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 10]");
  EXPECT_EQ(guards_text(pool, r), "16 == feat");
}

}  // namespace
}  // namespace kiln::testing
