// Range: hand cases, a seeded sweep of integer and float operands against a loop written
// here, errors, and sizes from symbolic start/limit run below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

Tensor s64(int64_t v) { return make_tensor<int64_t>({}, {v}); }
Tensor s32(int32_t v) { return make_tensor<int32_t>({}, {v}); }
Tensor sf(float v) { return make_tensor<float>({}, {v}); }

V range64(int64_t start, int64_t limit, int64_t delta) {
  OpResult r = run_op("Range", {s64(start), s64(limit), s64(delta)});
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  return r.outputs.empty() ? V{} : r.outputs[0].values<int64_t>();
}

TEST(Range, HandComputed) {
  EXPECT_EQ(range64(0, 5, 1), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(range64(10, 4, -3), (V{10, 7}));
  EXPECT_EQ(range64(0, 10, 3), (V{0, 3, 6, 9}));
  EXPECT_EQ(range64(1, 1, 1), (V{}));
  EXPECT_EQ(range64(5, 1, 1), (V{}));
  EXPECT_EQ(range64(-3, 3, 2), (V{-3, -1, 1}));
  OpResult r = run_op("Range", {sf(0), sf(1), sf(0.25f)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  r = run_op("Range", {s32(3), s32(-2), s32(-2)});
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{3, 1, -1}));
  r = run_op("Range", {make_tensor<int64_t>({1}, {2}), s64(4), s64(1)});  // a [1] operand reads as a scalar
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{2, 3}));
  EXPECT_TRUE(fold_matches_kernel("Range", {s64(-4), s64(9), s64(3)}));
  EXPECT_TRUE(fold_matches_kernel("Range", {s32(7), s32(-9), s32(-4)}));
}

TEST(Range, RandomSweep) {
  std::mt19937 rng(77);
  for (int iter = 0; iter < 400; ++iter) {
    const std::string it = "iter " + std::to_string(iter);
    if (iter % 4 == 3) {  // f32: start + i * delta, count from the float difference
      std::uniform_real_distribution<float> d(-10, 10);
      float start = d(rng), limit = d(rng), delta = d(rng) / 4;
      if (delta == 0) delta = 1;
      OpResult r = run_op("Range", {sf(start), sf(limit), sf(delta)});
      ASSERT_TRUE(r.status.ok()) << it << ": " << r.status.message();
      const double q = std::ceil(static_cast<double>(limit - start) / delta);
      const int64_t n = q > 0 ? static_cast<int64_t>(q) : 0;
      ASSERT_EQ(r.outputs[0].numel(), n) << it;
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(r.outputs[0].at(i), start + i * delta, 1e-4) << it;
      continue;
    }
    const int64_t start = static_cast<int64_t>(rng() % 41) - 20, limit = static_cast<int64_t>(rng() % 41) - 20;
    int64_t delta = static_cast<int64_t>(rng() % 13) - 6;
    if (delta == 0) delta = 7;
    V want;
    for (int64_t v = start; delta > 0 ? v < limit : v > limit; v += delta) want.push_back(v);
    ASSERT_EQ(range64(start, limit, delta), want) << it << ": " << start << ", " << limit << ", " << delta;
    ASSERT_TRUE(fold_matches_kernel("Range", {s64(start), s64(limit), s64(delta)})) << it;
  }
}

TEST(Range, Errors) {
  auto status = [](std::vector<Tensor> in) { return run_op("Range", in).status; };
  EXPECT_TRUE(has_text(status({s64(0), s64(5), s64(0)}), "node 'test' (Range): delta is 0"));
  EXPECT_TRUE(has_text(status({sf(0), sf(5), sf(0)}), "delta is 0"));
  EXPECT_TRUE(has_text(status({s64(0), s32(5), s64(1)}), "limit has dtype i32 but start has i64"));
  EXPECT_TRUE(
      has_text(status({s64(0), make_tensor<int64_t>({2}, {5, 6}), s64(1)}), "limit must be a scalar, got shape [2]"));
  Tensor t = make_tensor<bool>({}, {true});
  EXPECT_TRUE(has_text(status({t, t, t}), "does not accept bool operands"));
  EXPECT_TRUE(has_text(status({s64(0), s64(5)}), "expects 3 inputs, got 2"));
  SymPool s;
  core::ExprPool& p = s.pool;
  auto one = [&](ExprId e) {
    kernels::SymTensor t = sym_values_input(p, {e});
    t.shape.clear();  // a scalar
    return t;
  };
  auto unknown = sym_input(DType::kI64, {});
  EXPECT_TRUE(has_text(infer(p, "Range", {one(s.c(0)), unknown, one(s.c(1))}).status,
                       "node 'test' (Range): Range size depends on run-time data"));
  EXPECT_TRUE(has_text(infer(p, "Range", {one(s.c(0)), one(s.seq), one(s.batch)}).status,
                       "Range size depends on run-time data: delta batch must be a constant"));
  EXPECT_TRUE(has_text(infer(p, "Range", {sym_input(DType::kF32, {}), sym_input(DType::kF32, {}),
                                          sym_input(DType::kF32, {})})
                           .status,
                       "Range size depends on run-time data: start and limit must be constants or computed from "
                       "input shapes, and delta a constant"));
}

TEST(RangeSymbolic, SizesFromDimsRunBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto one = [&](ExprId e) {
    kernels::SymTensor t = sym_values_input(p, {e});
    t.shape.clear();
    return t;
  };
  auto shape = [&](ExprId a, ExprId b, ExprId c) {
    SymResult r = infer(p, "Range", {one(a), one(b), one(c)});
    EXPECT_TRUE(r.status.ok()) << r.status.message();
    return r.shape;
  };
  EXPECT_EQ(shape(s.c(0), s.seq, s.c(1)), "[seq]");
  EXPECT_EQ(shape(s.c(0), s.seq, s.c(2)), "[ceildiv(seq,2)]");
  EXPECT_EQ(shape(s.seq, s.c(0), s.c(-1)), "[seq]");
  EXPECT_EQ(shape(s.c(1), s.seq, s.c(1)), "[seq - 1]");
  EXPECT_EQ(shape(s.c(4), s.seq, s.c(1)), "[max(0,seq - 4)]");
  SymResult k = infer(p, "Range", {one(s.seq), one(p.add(s.seq, s.c(3))), one(s.c(1))});
  EXPECT_EQ(k.shape, "[3]");
  EXPECT_EQ(values_of(p, k), "[seq, seq + 1, seq + 2]");

  // start 3, limit seq, delta -2 .. and friends, checked at actual dims against the kernel.
  const int64_t starts[] = {0, 3, -2}, deltas[] = {1, 2, 3, -1, -2};
  for (int64_t a : starts)
    for (int64_t d : deltas) {
      SymResult r = infer(p, "Range", {one(s.c(a)), one(d > 0 ? s.seq : p.sub(s.c(0), s.seq)), one(s.c(d))});
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      for (int64_t seq : {1, 2, 5, 511, 512}) {
        const int64_t limit = d > 0 ? seq : -seq;
        std::vector<Tensor> out(1);
        out[0].dtype = DType::kI64;
        out[0].shape = eval_shape(p, r.outputs[0].shape, {1, seq});
        ASSERT_EQ(run_kernel("Range", {s64(a), s64(limit), s64(d)}, &out), kernels::KernelStatus::kOk)
            << r.shape << " at seq " << seq;
        V want;
        for (int64_t v = a; d > 0 ? v < limit : v > limit; v += d) want.push_back(v);
        EXPECT_EQ(out[0].values<int64_t>(), want);
      }
    }
  // f32 operands carried from shape arithmetic (Cast(float) of a dim) fold like integers.
  auto f32 = [&](ExprId e) {
    kernels::SymTensor t = one(e);
    t.dtype = DType::kF32;
    return t;
  };
  SymResult f = infer(p, "Range", {f32(s.c(1)), f32(s.seq), f32(s.c(2))});
  ASSERT_TRUE(f.status.ok()) << f.status.message();
  EXPECT_EQ(f.shape, "[floordiv(seq,2)]");
  for (int64_t seq : {1, 2, 7, 512}) {
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kF32;
    out[0].shape = eval_shape(p, f.outputs[0].shape, {1, seq});
    ASSERT_EQ(run_kernel("Range", {sf(1), sf(static_cast<float>(seq)), sf(2)}, &out), kernels::KernelStatus::kOk)
        << f.shape << " at seq " << seq;
    std::vector<float> want;
    for (int64_t v = 1; v < seq; v += 2) want.push_back(static_cast<float>(v));
    EXPECT_EQ(out[0].values<float>(), want);
  }
}

}  // namespace
}  // namespace kiln::testing
