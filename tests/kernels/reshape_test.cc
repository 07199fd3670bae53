// Reshape, Flatten, Squeeze, Unsqueeze (view ops): hand cases, a seeded sweep of random
// shapes and dtypes, errors, and symbolic shapes over Dims with their guards.
#include <gtest/gtest.h>

#include <algorithm>

#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;

Tensor iota_f32(Shape shape) {
  Tensor t = make_tensor<float>(shape, {});
  t.bytes.resize(static_cast<size_t>(t.numel()) * 4);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}


/// Runs a view op and checks the output shape and that the bytes are input 0's.
void expect_view(const char* op, const std::vector<Tensor>& in, const core::AttrStore& attrs, const Shape& want) {
  OpResult r = run_op(op, in, attrs);
  ASSERT_TRUE(r.status.ok()) << op << ": " << r.status.message();
  EXPECT_TRUE(r.guards.empty()) << op;
  EXPECT_EQ(r.outputs[0].shape, want) << op;
  EXPECT_EQ(r.outputs[0].dtype, in[0].dtype) << op;
  EXPECT_EQ(r.outputs[0].bytes, in[0].bytes) << op;
}

core::AttrStore none() { return core::AttrStore(); }

TEST(Reshape, HandComputed) {
  Tensor x = iota_f32({2, 3, 4});
  expect_view("Reshape", {x, i64s({4, -1})}, none(), {4, 6});
  expect_view("Reshape", {x, i64s({0, -1})}, none(), {2, 12});
  expect_view("Reshape", {x, i64s({0, 0, 2, 2})}, none(), {2, 3, 2, 2});
  expect_view("Reshape", {x, i64s({24})}, none(), {24});
  expect_view("Reshape", {x, make_tensor<int32_t>({2}, {-1, 8})}, none(), {3, 8});
  Tensor s = make_tensor<float>({1, 1}, {7});
  expect_view("Reshape", {s, i64s({})}, none(), {});  // to a scalar
  Tensor empty = make_tensor<float>({0, 3}, {});
  expect_view("Reshape", {empty, i64s({3, 0})}, core::AttrStore().set_int("allowzero", 1), {3, 0});
  expect_view("Reshape", {empty, i64s({0, 3})}, none(), {0, 3});  // 0 copies the input's 0
}

TEST(Flatten, HandComputed) {
  Tensor x = iota_f32({2, 3, 4});
  expect_view("Flatten", {x}, none(), {2, 12});
  expect_view("Flatten", {x}, core::AttrStore().set_int("axis", 0), {1, 24});
  expect_view("Flatten", {x}, core::AttrStore().set_int("axis", 3), {24, 1});
  expect_view("Flatten", {x}, core::AttrStore().set_int("axis", -1), {6, 4});
  expect_view("Flatten", {x}, core::AttrStore().set_int("axis", -3), {1, 24});
}

TEST(Squeeze, HandComputed) {
  Tensor x = iota_f32({1, 3, 1, 2});
  expect_view("Squeeze", {x}, none(), {3, 2});
  expect_view("Squeeze", {x}, core::AttrStore().set_ints("axes", {0}), {3, 1, 2});
  expect_view("Squeeze", {x, i64s({-2})}, none(), {1, 3, 2});
  expect_view("Squeeze", {x, i64s({2, 0})}, none(), {3, 2});
  expect_view("Squeeze", {x, i64s({})}, none(), {3, 2});  // an empty list squeezes every 1
  Tensor b = make_tensor<bool>({1, 2}, {true, false});
  expect_view("Squeeze", {b}, none(), {2});
}

TEST(Unsqueeze, HandComputed) {
  Tensor x = iota_f32({3, 2});
  expect_view("Unsqueeze", {x}, core::AttrStore().set_ints("axes", {0, 3}), {1, 3, 2, 1});
  expect_view("Unsqueeze", {x, i64s({-1})}, none(), {3, 2, 1});
  expect_view("Unsqueeze", {x, i64s({1, -1})}, none(), {3, 1, 2, 1});
  Tensor s = make_tensor<int64_t>({}, {5});
  expect_view("Unsqueeze", {s, i64s({0})}, none(), {1});
}

TEST(Views, RandomSweep) {
  std::mt19937 rng(2024);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape shape = random_shape(rng, rank, 5);
    Tensor x = random_tensor(rng, dtypes[iter % 4], shape);
    const int64_t numel = x.numel();

    // Reshape: a random factorization of numel, one entry maybe -1, leading entries maybe 0.
    Shape target;
    for (int64_t rest = numel; rest > 1;) {
      std::vector<int64_t> divisors;
      for (int64_t d = 2; d <= rest; ++d)
        if (rest % d == 0) divisors.push_back(d);
      int64_t d = target.size() == 5 ? rest : divisors[rng() % divisors.size()];
      target.push_back(d);
      rest /= d;
    }
    if (target.empty() || rng() % 4 == 0) target.insert(target.begin() + rng() % (target.size() + 1), 1);
    Shape spec = target;
    if (rng() % 2) spec[rng() % spec.size()] = -1;
    for (size_t k = 0; k < spec.size() && k < shape.size(); ++k)
      if (spec[k] == shape[k] && rng() % 3 == 0) spec[k] = 0;
    expect_view("Reshape", {x, i64s(spec)}, none(), target);

    // Flatten at every axis.
    int64_t axis = static_cast<int64_t>(rng() % (rank + 1));
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= shape[k];
    expect_view("Flatten", {x}, core::AttrStore().set_int("axis", axis < rank && rng() % 2 ? axis - rank : axis),
                {outer, numel / outer});

    // Unsqueeze then Squeeze the same axes round-trips.
    const int add = 1 + static_cast<int>(rng() % 3);
    Shape axes, bigger;
    std::vector<int64_t> positions(rank + add);
    for (int k = 0; k < rank + add; ++k) positions[k] = k;
    std::shuffle(positions.begin(), positions.end(), rng);
    axes.assign(positions.begin(), positions.begin() + add);
    for (int k = 0, next = 0; k < rank + add; ++k)
      bigger.push_back(std::count(axes.begin(), axes.end(), k) ? 1 : shape[next++]);
    expect_view("Unsqueeze", {x, i64s(axes)}, none(), bigger);
    Tensor y = x;
    y.shape = bigger;
    expect_view("Squeeze", {y, i64s(axes)}, none(), shape);
    Shape no_ones;
    for (int64_t d : bigger)
      if (d != 1) no_ones.push_back(d);
    expect_view("Squeeze", {y}, none(), no_ones);
  }
}

TEST(Views, Errors) {
  Tensor x = iota_f32({2, 3, 4});
  EXPECT_TRUE(has_text(run_op("Reshape", {x, i64s({5, 5})}).status,
                       "cannot reshape [2, 3, 4] (24 elements) into [5, 5] (25 elements)"));
  EXPECT_TRUE(has_text(run_op("Reshape", {x, i64s({5, -1})}).status,
                       "24 is not divisible by 5, the product of the other dims"));
  EXPECT_TRUE(has_text(run_op("Reshape", {x, i64s({-1, -1})}).status, "has more than one -1"));
  EXPECT_TRUE(has_text(run_op("Reshape", {x, i64s({-2, 12})}).status, "element 0 is -2"));
  EXPECT_TRUE(has_text(run_op("Reshape", {x, i64s({0, 0, 0, 0})}).status, "is 0 (copy input dim 3)"));
  EXPECT_TRUE(has_text(run_op("Reshape", {x}).status, "node 'test' (Reshape): expects 2 inputs, got 1"));
  EXPECT_TRUE(has_text(run_op("Reshape", {x, make_tensor<float>({1}, {24})}).status, "has dtype f32, expected i64"));
  EXPECT_TRUE(has_text(run_op("Flatten", {x}, core::AttrStore().set_int("axis", 4)).status,
                       "axis 4 is out of range [-3, 3] for an input of rank 3"));
  EXPECT_TRUE(has_text(run_op("Flatten", {x, x}).status, "expects 1 inputs, got 2"));
  EXPECT_TRUE(has_text(run_op("Squeeze", {x, i64s({1})}).status, "cannot squeeze axis 1 of [2, 3, 4]: its size is 3"));
  EXPECT_TRUE(has_text(run_op("Squeeze", {x, i64s({3})}).status, "axis 3 is out of range for rank 3"));
  EXPECT_TRUE(has_text(run_op("Unsqueeze", {x}).status, "needs axes"));
  EXPECT_TRUE(has_text(run_op("Squeeze", {x, i64s({0}), x}).status, "expects 1 to 2 inputs, got 3"));
  EXPECT_TRUE(has_text(run_op("Unsqueeze", {x, i64s({1, 1})}).status, "axis 1 is listed twice"));
  EXPECT_TRUE(
      has_text(run_op("Unsqueeze", {x, i64s({4, 5, 6, 7, 8, 9})}).status, "output rank 9 is above the limit 8"));
}

TEST(ReshapeSymbolic, BatchTimesFourThenInfer) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq, s.c(64)});
  SymResult r = infer(p, "Reshape", {x, sym_values_input(p, {p.mul(s.batch, s.c(4)), s.c(-1)})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[4*batch, 16*seq]");
  EXPECT_TRUE(r.guards.empty());  // the element counts are provably equal

  r = infer(p, "Reshape", {x, sym_values_input(p, {s.c(0), s.c(0), s.c(8), s.c(-1)})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 8, 8]");
  EXPECT_TRUE(r.guards.empty());

  Tensor spec = i64s({-1, 64});
  r = infer(p, "Reshape", {x, const_input(p, spec)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch*seq, 64]");
}

TEST(ReshapeSymbolic, GuardWhenCountsCannotBeProven) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq});
  Tensor spec = i64s({-1, 3});
  SymResult r = infer(p, "Reshape", {x, const_input(p, spec)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[floordiv(batch*seq,3), 3]");
  ASSERT_EQ(r.guards.size(), 1u);
  EXPECT_EQ(r.guards[0].op, kernels::Guard::Op::kDivisible);  // stated as batch*seq % 3 == 0
  EXPECT_EQ(r.guards[0].context, "to reshape [batch, seq] into [-1, 3]");
  EXPECT_TRUE(guard_holds(p, r.guards[0], {2, 6}));
  EXPECT_FALSE(guard_holds(p, r.guards[0], {2, 7}));

  // A symbolic target without -1: [seq, batch] from [batch, seq] is fine, [seq, seq] needs a guard.
  r = infer(p, "Reshape", {x, sym_values_input(p, {s.seq, s.batch})});
  EXPECT_EQ(r.shape, "[seq, batch]");
  EXPECT_TRUE(r.guards.empty());
  r = infer(p, "Reshape", {x, sym_values_input(p, {s.seq, s.seq})});
  ASSERT_EQ(r.guards.size(), 1u);
  EXPECT_TRUE(guard_holds(p, r.guards[0], {5, 5}));
  EXPECT_FALSE(guard_holds(p, r.guards[0], {4, 5}));

  // Provably impossible: [batch, 3] vs [batch, 2] never match.
  auto y = sym_input(DType::kF32, {s.batch, s.c(3)});
  r = infer(p, "Reshape", {y, sym_values_input(p, {s.batch, s.c(2)})});
  EXPECT_TRUE(has_text(r.status, "can never be equal to reshape [batch, 3] into [batch, 2]"));
  // A symbolic element that might be 0 or -1 has no meaning at export.
  r = infer(p, "Reshape", {x, sym_values_input(p, {p.sub(s.seq, s.c(1)), s.c(-1)})});
  EXPECT_TRUE(has_text(r.status, "(seq - 1) may be 0 or negative"));
  r = infer(p, "Reshape", {x, sym_input(DType::kI64, {s.c(2)})});
  EXPECT_TRUE(has_text(r.status, "shape input #1 is not known at export"));
  // An element that is 0 exactly when the input dim it would copy is 0 means itself either
  // way (Swin's attention mask: a slice that is empty for the smallest inputs).
  ExprId rows = p.sub(s.seq, s.c(1));  // 0..511
  auto m = sym_input(DType::kF32, {rows, s.c(4)});
  r = infer(p, "Reshape", {m, sym_values_input(p, {rows, s.c(2), s.c(2)})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[seq - 1, 2, 2]");
  auto other = sym_input(DType::kF32, {s.seq, p.mul(rows, s.c(4))});  // dim 0 is never 0
  r = infer(p, "Reshape", {other, sym_values_input(p, {rows, s.seq, s.c(4)})});
  EXPECT_TRUE(has_text(r.status, "(seq - 1) may be 0 or negative"));
  // A positive element that ranges cannot show is proven by checking every value.
  ExprId positive = p.add(p.sub(p.mul(s.seq, s.seq), s.seq), s.c(1));
  ASSERT_LT(p.range(positive).lo, 1);
  auto w = sym_input(DType::kF32, {positive, s.c(7)});
  r = infer(p, "Reshape", {w, sym_values_input(p, {positive, s.c(-1)})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(r.guards.empty());
}

TEST(ViewsSymbolic, FlattenSqueezeUnsqueeze) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq, s.c(64)});
  EXPECT_EQ(infer(p, "Flatten", {x}, core::AttrStore().set_int("axis", 2)).shape, "[batch*seq, 64]");
  EXPECT_EQ(infer(p, "Flatten", {x}, core::AttrStore().set_int("axis", 0)).shape, "[1, 64*batch*seq]");
  EXPECT_EQ(infer(p, "Flatten", {x}).shape, "[batch, 64*seq]");

  auto y = sym_input(DType::kF32, {s.batch, s.c(1), s.seq, s.c(1)});
  SymResult r = infer(p, "Squeeze", {y});
  EXPECT_EQ(r.shape, "[batch, seq]");  // symbolic dims stay
  EXPECT_TRUE(r.guards.empty());
  r = infer(p, "Squeeze", {y}, core::AttrStore().set_ints("axes", {0, 1}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[seq, 1]");
  ASSERT_EQ(r.guards.size(), 1u);  // squeezing batch requires batch == 1
  EXPECT_EQ(p.to_string(r.guards[0].lhs), "batch");
  EXPECT_TRUE(p.is_const_value(r.guards[0].rhs, 1));
  EXPECT_TRUE(guard_holds(p, r.guards[0], {1, 9}));
  EXPECT_FALSE(guard_holds(p, r.guards[0], {2, 9}));
  auto big = sym_input(DType::kF32, {p.add(s.batch, s.c(1))});  // never 1
  EXPECT_TRUE(has_text(infer(p, "Squeeze", {big}, core::AttrStore().set_ints("axes", {0})).status,
                       "can never be equal to squeeze axis 0 of [batch + 1]"));

  Tensor axes = i64s({0, -1});
  EXPECT_EQ(infer(p, "Unsqueeze", {sym_input(DType::kBool, {s.batch, s.seq}), const_input(p, axes)}).shape,
            "[1, batch, seq, 1]");
}

}  // namespace
}  // namespace kiln::testing
