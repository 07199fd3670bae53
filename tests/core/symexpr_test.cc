// SymExpr: simplification keeps shapes readable, ranges are sound, evaluation matches.
#include "core/symexpr.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace kiln::core {
namespace {

class SymExprTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h = p.dim(p.add_dim({"H", 1, 512, 1}));
    w = p.dim(p.add_dim({"W", 32, 512, 32}));
  }
  ExprPool p;
  ExprId h = kNoExpr, w = kNoExpr;
};

TEST_F(SymExprTest, LinearCancellation) {
  EXPECT_EQ(p.sub(p.add(h, p.constant(3)), p.constant(3)), h);
  EXPECT_TRUE(p.is_const_value(p.sub(h, h), 0));
  EXPECT_EQ(p.to_string(p.add(p.mul(p.constant(2), h), h)), "3*H");
  EXPECT_EQ(p.to_string(p.sub(h, p.constant(1))), "H - 1");
}

TEST_F(SymExprTest, ConvOutputBecomesCeilDiv) {
  // floor((H + 2*1 - 3) / 2) + 1 == ceildiv(H, 2)
  ExprId conv = p.add(p.floordiv(p.sub(p.add(h, p.constant(2)), p.constant(3)), p.constant(2)), p.constant(1));
  EXPECT_EQ(p.to_string(conv), "ceildiv(H,2)");
  ExprId pool = p.add(p.floordiv(p.sub(p.add(conv, p.constant(2)), p.constant(3)), p.constant(2)), p.constant(1));
  EXPECT_EQ(p.to_string(pool), "ceildiv(H,4)");
}

TEST_F(SymExprTest, ProductsDivideExactly) {
  ExprId numel = p.mul(p.mul(p.constant(4), h), w);
  EXPECT_EQ(p.to_string(p.floordiv(numel, p.mul(w, p.constant(2)))), "2*H");
  EXPECT_EQ(p.mul(h, w), p.mul(w, h));
}

TEST_F(SymExprTest, StepMakesModuloKnown) {
  EXPECT_TRUE(p.is_const_value(p.mod(w, p.constant(32)), 0));
  EXPECT_TRUE(p.is_const_value(p.mod(w, p.constant(8)), 0));
  EXPECT_FALSE(p.is_const(p.mod(h, p.constant(2))));
}

TEST_F(SymExprTest, RangesAndMinMax) {
  EXPECT_EQ(p.range(h).lo, 1);
  EXPECT_EQ(p.range(h).hi, 512);
  EXPECT_EQ(p.min(h, p.constant(1000)), h);
  EXPECT_EQ(p.max(h, p.constant(0)), h);
  Interval r = p.range(p.ceildiv(h, p.constant(2)));
  EXPECT_EQ(r.lo, 1);
  EXPECT_EQ(r.hi, 256);
}

TEST_F(SymExprTest, PaddingToAMultipleIsCeilDiv) {
  // torch pads x to a multiple of 7 as x + (7 - x % 7) % 7, which is 7*ceildiv(x, 7).
  ExprId x = p.floordiv(h, p.constant(4));
  ExprId pad = p.mod(p.sub(p.constant(7), p.mod(x, p.constant(7))), p.constant(7));
  ExprId padded = p.add(x, pad);
  EXPECT_EQ(p.to_string(padded), "7*ceildiv(floordiv(H,4),7)");
  EXPECT_EQ(p.to_string(p.floordiv(padded, p.constant(7))), "ceildiv(floordiv(H,4),7)");
  // PatchMerging: pad to even, then every other row: floordiv(x + x % 2 + 1, 2) = ceildiv(x, 2).
  ExprId even = p.add(x, p.mod(x, p.constant(2)));
  EXPECT_EQ(p.to_string(p.floordiv(p.add(even, p.constant(1)), p.constant(2))), "ceildiv(floordiv(H,4),2)");
  // Only the matching pair folds: x + (x % 7) stays.
  EXPECT_EQ(p.to_string(p.add(x, p.mod(x, p.constant(7)))), "floordiv(H,4) + floordiv(H,4) % 7");
  for (int64_t hv = 1; hv <= 512; ++hv) {
    std::vector<int64_t> v(p.size());
    size_t bad = 0;
    std::vector<int64_t> dims = {hv, 32};
    ASSERT_TRUE(eval_exprs(p.nodes().data(), p.nodes().size(), dims.data(), v.data(), &bad));
    const int64_t xv = hv / 4;
    EXPECT_EQ(v[padded], xv + (7 - xv % 7) % 7) << hv;
    EXPECT_EQ(v[even], xv + xv % 2) << hv;
  }
}

TEST_F(SymExprTest, AlwaysProvesWhatRangesCannot) {
  // H*H - H + 1 >= 1 for every H, though its range starts far below.
  ExprId e = p.add(p.sub(p.mul(h, h), h), p.constant(1));
  EXPECT_LT(p.range(e).lo, 1);
  EXPECT_TRUE(p.always(e, ExprPool::Relation::kGe, p.constant(1)));
  EXPECT_FALSE(p.always(e, ExprPool::Relation::kGe, p.constant(2)));  // H = 1 gives 1
  ExprId x = p.floordiv(h, p.constant(4));
  EXPECT_TRUE(p.always(p.add(x, p.mod(p.sub(p.constant(0), x), p.constant(7))), ExprPool::Relation::kDivisible,
                       p.constant(7)));
  EXPECT_TRUE(p.always(h, ExprPool::Relation::kEq, h));
  // Beyond the census limit nothing is proven that the ranges do not show.
  ExprId hh = p.mul(h, h);
  EXPECT_FALSE(p.always(hh, ExprPool::Relation::kGe, h, 100));  // 512 values of H
  EXPECT_TRUE(p.always(hh, ExprPool::Relation::kGe, h));
  EXPECT_TRUE(p.always(p.mul(h, w), ExprPool::Relation::kGe, p.constant(32), 100));  // by ranges
}

TEST_F(SymExprTest, EvaluationMatchesDirectArithmetic) {
  std::vector<ExprId> exprs = {
      p.ceildiv(h, p.constant(3)), p.floordiv(p.sub(h, p.constant(5)), p.constant(4)),
      p.mod(p.add(h, w), p.constant(7)), p.min(h, w), p.max(p.mul(h, w), p.constant(100)),
      p.floordiv(p.mul(h, w), h)};
  std::mt19937 rng(7);
  for (int it = 0; it < 100; ++it) {
    int64_t hv = 1 + rng() % 512, wv = 32 * (1 + rng() % 16);
    int64_t dims[2] = {hv, wv};
    std::vector<int64_t> out(p.size());
    ASSERT_TRUE(eval_exprs(p.nodes().data(), p.size(), dims, out.data(), nullptr));
    EXPECT_EQ(out[exprs[0]], (hv + 2) / 3);
    EXPECT_EQ(out[exprs[1]], floor_div(hv - 5, 4));
    EXPECT_EQ(out[exprs[2]], (hv + wv) % 7);
    EXPECT_EQ(out[exprs[3]], std::min(hv, wv));
    EXPECT_EQ(out[exprs[4]], std::max(hv * wv, int64_t{100}));
    EXPECT_EQ(out[exprs[5]], wv);
    for (ExprId e : exprs) {  // ranges are sound
      EXPECT_GE(out[e], p.range(e).lo);
      EXPECT_LE(out[e], p.range(e).hi);
    }
  }
}

TEST(SymExprDivision, PythonSemantics) {
  EXPECT_EQ(floor_div(-7, 2), -4);
  EXPECT_EQ(ceil_div(-7, 2), -3);
  EXPECT_EQ(floor_mod(-7, 3), 2);
  EXPECT_EQ(ceil_div(7, 2), 4);
  EXPECT_EQ(ceil_div(-7, -2), 4);
  EXPECT_EQ(floor_mod(7, -3), -2);
  // Regression: ceil_div negated its operand and floor_mod multiplied back, overflowing
  // (undefined) at the ends of the range; values can come from a damaged file.
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(ceil_div(kMin, 2), kMin / 2);
  EXPECT_EQ(ceil_div(kMax, 2), kMax / 2 + 1);
  EXPECT_EQ(floor_mod(kMin, 3), 1);  // -2^63 = 3 * floordiv + 1
  EXPECT_EQ(floor_mod(kMax, -2), -1);
}

TEST(SymExprEval, OverflowFailsInsteadOfWrapping) {
  // Regression: eval_exprs added and multiplied without checks (undefined on overflow).
  const int64_t big = int64_t{1} << 62;
  std::vector<ExprNode> nodes = {{ExprOp::kConst, -1, -1, big}, {ExprOp::kDim, 0, -1, 0},
                                 {ExprOp::kMul, 0, 1, 0}, {ExprOp::kAdd, 0, 0, 0}};
  std::vector<int64_t> out(nodes.size());
  int64_t dim = 1;
  size_t bad = 99;
  EXPECT_TRUE(eval_exprs(nodes.data(), 3, &dim, out.data(), &bad));
  EXPECT_EQ(out[2], big);
  dim = 2;
  EXPECT_FALSE(eval_exprs(nodes.data(), 3, &dim, out.data(), &bad));
  EXPECT_EQ(bad, 2u);
  dim = 1;
  EXPECT_FALSE(eval_exprs(nodes.data(), nodes.size(), &dim, out.data(), &bad));
  EXPECT_EQ(bad, 3u);
}

TEST(SymExprPool, ArithmeticPastInt64SaturatesAndIsRemembered) {
  // Regression (fuzz_onnx, UBSan): the pool multiplied coefficients and constants unchecked;
  // shape constants come from files. Each way out of int64 now saturates and sets the flag.
  const int64_t big = int64_t{1} << 40;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  {
    ExprPool p;
    ExprId n = p.dim(p.add_dim({"n", 1, 8, 1}));
    ExprId x = p.mul(p.constant(big), n);
    EXPECT_FALSE(p.overflowed());
    EXPECT_EQ(p.to_string(x), "1099511627776*n");
    p.mul(p.constant(big), x);  // 2^80*n: the coefficient leaves int64
    EXPECT_TRUE(p.overflowed());
  }
  {
    ExprPool p;
    ExprId c = p.mul(p.constant(big), p.constant(big));
    EXPECT_TRUE(p.overflowed());
    EXPECT_GT(p.const_value(c), int64_t{1} << 60);  // saturated upwards, not wrapped
  }
  {
    ExprPool p;
    ExprId n = p.dim(p.add_dim({"n", 1, 8, 1}));
    p.add(p.add(n, p.constant(kMax)), p.constant(1));
    EXPECT_TRUE(p.overflowed());
  }
  {
    ExprPool p;
    ExprId n = p.dim(p.add_dim({"n", 1, 8, 1}));
    p.sub(n, p.mul(p.constant(kMin), n));  // negating INT64_MIN
    EXPECT_TRUE(p.overflowed());
  }
  {
    ExprPool p;  // in range: untouched
    ExprId n = p.dim(p.add_dim({"n", 1, 8, 1}));
    EXPECT_EQ(p.to_string(p.sub(p.mul(p.constant(kMax / 2), n), n)), "4611686018427387902*n");
    EXPECT_FALSE(p.overflowed());
  }
}

}  // namespace
}  // namespace kiln::core

namespace kiln::core {
namespace {

TEST(SymExprSteps, StepsMakeDivisionExact) {
  ExprPool p;
  ExprId h = p.dim(p.add_dim({"H", 8, 128, 8}));
  ExprId q = p.ceildiv(h, p.constant(4));
  EXPECT_EQ(p.to_string(q), "floordiv(H,4)");
  ExprId e = p.floordiv(q, p.constant(2));
  EXPECT_EQ(p.to_string(e), "floordiv(H,8)");
  EXPECT_EQ(p.mul(p.constant(8), e), h);
  EXPECT_EQ(p.to_string(p.mul(p.constant(2), e)), "2*floordiv(H,8)");
  EXPECT_EQ(p.mul(p.constant(4), q), h);
}

}  // namespace
}  // namespace kiln::core

namespace kiln::core {
namespace {

TEST(SymExprCancel, CommonFactorsCancelInDivisions) {
  ExprPool p;
  ExprId b = p.dim(p.add_dim({"batch", 1, 8, 1}));
  ExprId l = p.dim(p.add_dim({"length", 4, 256, 1}));
  ExprId q = p.floordiv(p.mul(b, l), p.mul(p.constant(4), b));
  EXPECT_EQ(p.to_string(q), "floordiv(length,4)");
  EXPECT_EQ(p.range(q).hi, 64);
  ExprId a2, b2;
  ASSERT_TRUE(p.cancel_common(p.mul(p.constant(6), p.mul(b, l)), p.mul(p.constant(4), b), &a2, &b2));
  EXPECT_EQ(p.to_string(a2), "3*length");
  EXPECT_EQ(p.to_string(b2), "2");
  EXPECT_FALSE(p.cancel_common(l, b, &a2, &b2));
}

}  // namespace
}  // namespace kiln::core
