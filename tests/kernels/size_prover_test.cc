// Sizes a shape function checks ("may be negative", "0 or negative") are settled by the exact
// prover over the declared ranges and steps, not by interval bounds alone: the padding torch
// writes to reach a multiple of a stride, ceil/floor pairs and Mod, each checked at every
// value of a small range; a refusal names a dim value where the size fails; beyond the
// prover's reach the check becomes a guard.
#include <gtest/gtest.h>

#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using core::ExprId;
using V = std::vector<int64_t>;

struct LenPool {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"B", 1, 4, 1}));
  ExprId len = pool.dim(pool.add_dim({"L", 1, 64, 1}));
  ExprId c(int64_t v) { return pool.constant(v); }
};

/// ConstantOfShape of `shape` must pass with no guard and, at every (B, L), produce the
/// sizes `expect(B, L)`.
void expect_sizes(LenPool& s, const std::vector<ExprId>& shape, V (*expect)(int64_t, int64_t)) {
  core::ExprPool& p = s.pool;
  SymResult r = infer(p, "ConstantOfShape", {sym_values_input(p, shape)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.guards.empty()) << r.shape;
  for (int64_t b = 1; b <= 4; ++b)
    for (int64_t l = 1; l <= 64; ++l) {
      V got = eval_shape(p, r.outputs[0].shape, {b, l});
      ASSERT_EQ(got, expect(b, l)) << "at B = " << b << ", L = " << l << ": " << r.shape;
      for (int64_t d : got) ASSERT_GE(d, 0);
    }
}

TEST(SizeProver, StridePaddingIsNeverNegative) {
  // An audio encoder pads its input to a multiple of 8: [B, 1, 8*floordiv(L,8) - L + 8], always in [1, 8].
  LenPool s;
  core::ExprPool& p = s.pool;
  ExprId pad = p.add(p.sub(p.mul(s.c(8), p.floordiv(s.len, s.c(8))), s.len), s.c(8));
  ASSERT_LT(p.range(pad).lo, 0);  // the interval bounds alone cannot tell
  expect_sizes(s, {s.batch, s.c(1), pad}, [](int64_t b, int64_t l) { return V{b, 1, 8 * (l / 8) - l + 8}; });
  // The same padding up to the stride, as torch writes it with ceil: 8*ceildiv(L,8) - L in [0, 7].
  ExprId up = p.sub(p.mul(s.c(8), p.ceildiv(s.len, s.c(8))), s.len);
  expect_sizes(s, {up}, [](int64_t, int64_t l) { return V{(8 - l % 8) % 8}; });
}

TEST(SizeProver, CeilFloorPairsAndMod) {
  LenPool s;
  core::ExprPool& p = s.pool;
  ExprId diff = p.sub(p.ceildiv(s.len, s.c(4)), p.floordiv(s.len, s.c(4)));  // 0 or 1
  expect_sizes(s, {diff, s.batch}, [](int64_t b, int64_t l) { return V{l % 4 != 0, b}; });
  ExprId rem = p.sub(s.len, p.mul(s.c(3), p.floordiv(s.len, s.c(3))));  // L mod 3, written out
  expect_sizes(s, {rem}, [](int64_t, int64_t l) { return V{l % 3}; });
  ExprId left = p.sub(s.c(5), p.mod(s.len, s.c(5)));  // 5 - L mod 5, in [1, 5]
  expect_sizes(s, {left}, [](int64_t, int64_t l) { return V{5 - l % 5}; });

  // Tile and Expand consult the same prover.
  Tensor x = make_tensor<float>({1}, {1.f});
  SymResult t = infer(p, "Tile", {sym_input(DType::kF32, {s.c(1)}), sym_values_input(p, {diff})});
  EXPECT_TRUE(t.status.ok()) << t.status.message();
  SymResult e = infer(p, "Expand", {sym_input(DType::kF32, {s.c(1)}), sym_values_input(p, {rem})});
  EXPECT_TRUE(e.status.ok()) << e.status.message();
}

TEST(SizeProver, RefusalNamesAFailingValue) {
  LenPool s;
  core::ExprPool& p = s.pool;
  ExprId short_by = p.sub(p.sub(s.len, p.mod(s.len, s.c(8))), s.c(5));  // 8*floordiv(L,8) - 5: -5 for L < 8
  SymResult r = infer(p, "ConstantOfShape", {sym_values_input(p, {s.batch, short_by})});
  EXPECT_TRUE(has_text(r.status, "may be negative: at L = 1 it is -5")) << r.status.message();
  r = infer(p, "Expand", {sym_input(DType::kF32, {s.c(1)}), sym_values_input(p, {p.sub(s.len, s.c(3))})});
  EXPECT_TRUE(has_text(r.status, "(L - 3) may be negative: at L = 1 it is -2")) << r.status.message();
  r = infer(p, "Tile", {sym_input(DType::kF32, {s.c(1), s.c(1)}),
                        sym_values_input(p, {s.c(1), p.sub(s.c(3), s.batch)})});
  EXPECT_TRUE(has_text(r.status, "may be negative: at B = 4 it is -1")) << r.status.message();
  r = infer(p, "ConstantOfShape", {sym_values_input(p, {s.c(-2)})});
  EXPECT_TRUE(has_text(r.status, "(-2) is negative")) << r.status.message();
}

TEST(SizeProver, StepsAreHonoured) {
  // With L a multiple of 8 the padding is always 8, and L - 4 - 2*floordiv(L,2) always -4.
  core::ExprPool p;
  ExprId len = p.dim(p.add_dim({"L", 8, 64, 8}));
  ExprId pad = p.add(p.sub(p.mul(p.constant(8), p.floordiv(len, p.constant(8))), len), p.constant(8));
  SymResult ok = infer(p, "ConstantOfShape", {sym_values_input(p, {pad})});
  ASSERT_TRUE(ok.status.ok()) << ok.status.message();
  EXPECT_EQ(ok.shape, "[8]");
  ExprId odd = p.sub(p.sub(len, p.constant(4)), p.mul(p.constant(2), p.floordiv(len, p.constant(2))));
  SymResult bad = infer(p, "ConstantOfShape", {sym_values_input(p, {odd})});
  EXPECT_TRUE(has_text(bad.status, "(-4) is negative")) << bad.status.message();
}

TEST(SizeProver, BeyondTheProverAGuard) {
  // Too many assignments to check one by one: a guard, checked at bind, where the value is known.
  core::ExprPool p;
  ExprId len = p.dim(p.add_dim({"L", 1, 1000000, 1}));
  ExprId pad = p.add(p.sub(p.mul(p.constant(8), p.floordiv(len, p.constant(8))), len), p.constant(8));
  SymResult r = infer(p, "ConstantOfShape", {sym_values_input(p, {pad})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.guards.size(), 1u);
  for (int64_t l : {1, 7, 8, 9, 999999, 1000000}) EXPECT_TRUE(guard_holds(p, r.guards[0], {l})) << l;
}

TEST(SizeProver, SliceStartSignFromTheProver) {
  // A start that is always negative, though its interval straddles 0, counts from the end.
  LenPool s;
  core::ExprPool& p = s.pool;
  ExprId start = p.sub(p.sub(p.mul(s.c(8), p.floordiv(s.len, s.c(8))), s.len), s.c(1));  // in [-8, -1]
  ASSERT_GE(p.range(start).hi, 0);
  Tensor ends = make_tensor<int64_t>({1}, {std::numeric_limits<int64_t>::max()}), axes = make_tensor<int64_t>({1}, {0});
  SymResult r = infer(p, "Slice", {sym_input(DType::kF32, {s.len}), sym_values_input(p, {start}), const_input(p, ends),
                                   const_input(p, axes)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  for (int64_t l = 1; l <= 64; ++l) {
    const int64_t st = 8 * (l / 8) - l - 1, from = std::max<int64_t>(st + l, 0);
    EXPECT_EQ(eval_shape(p, r.outputs[0].shape, {1, l}), V{l - from}) << l;
  }
  // Negative for some L and not for others: refused, naming one of each.
  ExprId mixed = p.sub(s.len, s.c(10));
  r = infer(p, "Slice", {sym_input(DType::kF32, {s.len}), sym_values_input(p, {mixed}), const_input(p, ends),
                         const_input(p, axes)});
  EXPECT_TRUE(has_text(r.status, "may be negative or not (at L = 1 it is -9, at L = 64 it is not)")) << r.status.message();
}

}  // namespace
}  // namespace kiln::testing
