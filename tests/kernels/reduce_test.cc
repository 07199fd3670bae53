// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum, ReduceLogSumExp: hand cases (some checked against ONNX
// Runtime 1.30), axes as attribute or input, noop_with_empty_axes, empty reductions, a
// seeded sweep of shapes, axis sets and dtypes against a double reference written here (one
// table row per op; also run in oversized slots), errors, symbolic shapes, and the kernel
// run at shapes evaluated far below the bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

/// A rank-1 i64 axes tensor; an empty one holds no bytes (make_tensor would memcpy from null).
Tensor axes_tensor(const std::vector<int64_t>& axes) {
  if (!axes.empty()) return make_tensor<int64_t>({static_cast<int64_t>(axes.size())}, axes);
  Tensor t;
  t.dtype = DType::kI64;
  t.shape = {0};
  return t;
}

core::AttrStore axes_attr(std::vector<int64_t> axes, int64_t keepdims = 1) {
  core::AttrStore a;
  a.set_ints("axes", std::move(axes)).set_int("keepdims", keepdims);
  return a;
}

/// Sums of |x| and x*x over the elements folded into one output, for error bounds.
struct Mag {
  double abs_sum = 0, sq_sum = 0;
  int64_t n = 0;
};

/// One reduction in double precision: out = finish(fold(...fold(start, x0)..., xn-1), n), and
/// how far the f32 kernel may be from it.
struct RefOp {
  const char* name;
  bool ints;  ///< takes i64 and i32 as well as f32
  float lo, hi;  ///< sweep inputs: uniform in [lo, hi), with a random sign if `signed_mag`
  bool signed_mag;
  double int_scale;  ///< integer sweep inputs: round(x * int_scale)
  double start;
  double (*fold)(double acc, double v);
  double (*finish)(double acc, int64_t n);
  double (*tol)(double want, const Mag& m);
};

double keep_acc(double acc, int64_t) { return acc; }
double add(double acc, double v) { return acc + v; }
double sum_tol(double, const Mag& m) { return 1e-6 * (1 + m.abs_sum); }
double exact(double, const Mag&) { return 0; }

const RefOp kOps[] = {
    {"ReduceSum", true, -3, 3, false, 100, 0, add, keep_acc, sum_tol},
    {"ReduceMean", false, -3, 3, false, 100, 0, add, [](double acc, int64_t n) { return acc / n; }, sum_tol},
    {"ReduceMax", true, -3, 3, false, 100, -INFINITY, [](double acc, double v) { return std::max(acc, v); },
     keep_acc, exact},
    {"ReduceMin", true, -3, 3, false, 100, INFINITY, [](double acc, double v) { return std::min(acc, v); },
     keep_acc, exact},
    // Factors near +-1 keep products of thousands of elements finite; each f32 multiply
    // rounds by at most 2^-24 relative.
    {"ReduceProd", true, 0.9f, 1.1f, true, 1, 1, [](double acc, double v) { return acc * v; }, keep_acc,
     [](double want, const Mag& m) { return 1.2e-7 * (m.n + 1) * std::abs(want); }},
    {"ReduceL1", true, -3, 3, false, 100, 0, [](double acc, double v) { return acc + std::abs(v); }, keep_acc,
     sum_tol},
    {"ReduceL2", false, -3, 3, false, 100, 0, [](double acc, double v) { return acc + v * v; },
     [](double acc, int64_t) { return std::sqrt(acc); },
     [](double, const Mag& m) { return 1e-6 * (1 + std::sqrt(m.sq_sum)); }},
    {"ReduceSumSquare", true, -3, 3, false, 100, 0, [](double acc, double v) { return acc + v * v; }, keep_acc,
     [](double, const Mag& m) { return 1e-6 * (1 + m.sq_sum); }},
    // Positive inputs: the log of a sum <= 0 is NaN or -inf (checked by hand below).
    {"ReduceLogSum", false, 0.01f, 3, false, 100, 0, add, [](double acc, int64_t) { return std::log(acc); },
     [](double want, const Mag& m) { return 1e-6 * (1 + m.abs_sum / std::exp(want)); }},
    // The reference sums exp(x) directly (no max shift): double has the range for |x| <= 3.
    {"ReduceLogSumExp", false, -3, 3, false, 100, 0, [](double acc, double v) { return acc + std::exp(v); },
     [](double acc, int64_t) { return std::log(acc); },
     [](double want, const Mag&) { return 1e-6 * (1 + std::abs(want)); }},
};

/// Reference outputs (row-major over the kept shape) and tolerances, reducing x over the axes
/// marked in `reduced` (none marked: each element alone, as noop_with_empty_axes = 1).
struct Ref {
  std::vector<int64_t> kept_shape;  ///< the input shape with reduced axes set to 1
  std::vector<double> want, tol;
};
Ref reference(const RefOp& op, const Tensor& x, const std::vector<bool>& reduced) {
  Ref r;
  const std::vector<int64_t>& shape = x.shape;
  int64_t n_out = 1, count = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    r.kept_shape.push_back(reduced[k] ? 1 : shape[k]);
    (reduced[k] ? count : n_out) *= shape[k];
  }
  std::vector<double> acc(n_out, op.start);
  std::vector<Mag> mag(n_out);
  std::vector<int64_t> in_strides = strides_of(shape), out_strides = strides_of(r.kept_shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = 0;
    for (size_t k = 0; k < shape.size(); ++k)
      if (!reduced[k]) o += i / in_strides[k] % shape[k] * out_strides[k];
    acc[o] = op.fold(acc[o], x.at(i));
    mag[o].abs_sum += std::abs(x.at(i));
    mag[o].sq_sum += x.at(i) * x.at(i);
  }
  for (int64_t o = 0; o < n_out; ++o) {
    mag[o].n = count;
    r.want.push_back(op.finish(acc[o], count));
    r.tol.push_back(op.tol(r.want.back(), mag[o]));
  }
  return r;
}

/// |got - want| <= tol; infinities must match exactly and NaN matches NaN.
::testing::AssertionResult matches(double got, double want, double tol) {
  if (std::isnan(want) ? std::isnan(got) : std::isinf(want) ? got == want : std::abs(got - want) <= tol)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want << " (tolerance " << tol << ")";
}

TEST(Reduce, HandComputed) {
  Tensor x = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  OpResult r = run_op("ReduceSum", {x}, axes_attr({1}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{6, 15}));
  r = run_op("ReduceSum", {x}, axes_attr({-1}, 0));
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2}));
  r = run_op("ReduceMax", {x}, axes_attr({0}));
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 5, 6}));
  r = run_op("ReduceMean", {x});  // no axes: all of them, kept as 1
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3.5f}));
  r = run_op("ReduceMean", {x}, core::AttrStore().set_int("keepdims", 0));
  EXPECT_TRUE(r.outputs[0].shape.empty());
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3.5f}));
  // Middle axis of [2, 2, 2].
  Tensor c = make_tensor<float>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(run_op("ReduceMean", {c}, axes_attr({1}, 0)).outputs[0].values<float>(), (std::vector<float>{2, 3, 6, 7}));
  EXPECT_EQ(run_op("ReduceMax", {c}, axes_attr({0, 2})).outputs[0].values<float>(), (std::vector<float>{6, 8}));
}

TEST(Reduce, AxesAsInput) {
  Tensor x = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  OpResult r = run_op("ReduceSum", {x, make_tensor<int64_t>({1}, {0})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{5, 7, 9}));
  // Empty axes: all axes, or the identity with noop_with_empty_axes = 1.
  Tensor none = axes_tensor({});
  r = run_op("ReduceSum", {x, none}, core::AttrStore().set_int("keepdims", 0));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{21}));
  r = run_op("ReduceSum", {x, none}, core::AttrStore().set_int("noop_with_empty_axes", 1));
  EXPECT_EQ(r.outputs[0].shape, x.shape);
  EXPECT_EQ(r.outputs[0].values<float>(), x.values<float>());
  r = run_op("ReduceSum", {x, absent()}, core::AttrStore().set_int("noop_with_empty_axes", 1));
  EXPECT_EQ(r.outputs[0].values<float>(), x.values<float>());
}

TEST(Reduce, Integers) {
  Tensor x = make_tensor<int64_t>({2, 2}, {-5, 3, 7, -1});
  EXPECT_EQ(run_op("ReduceSum", {x}, axes_attr({1})).outputs[0].values<int64_t>(), (std::vector<int64_t>{-2, 6}));
  EXPECT_EQ(run_op("ReduceMax", {x}, axes_attr({0})).outputs[0].values<int64_t>(), (std::vector<int64_t>{7, 3}));
  Tensor y = make_tensor<int32_t>({3}, {-4, -9, -2});
  EXPECT_EQ(run_op("ReduceMax", {y}).outputs[0].values<int32_t>(), (std::vector<int32_t>{-2}));
  EXPECT_EQ(run_op("ReduceMin", {x}, axes_attr({1})).outputs[0].values<int64_t>(), (std::vector<int64_t>{-5, -1}));
  EXPECT_EQ(run_op("ReduceMin", {y}).outputs[0].values<int32_t>(), (std::vector<int32_t>{-9}));
  EXPECT_EQ(run_op("ReduceProd", {x}, axes_attr({0})).outputs[0].values<int64_t>(), (std::vector<int64_t>{-35, -3}));
  EXPECT_EQ(run_op("ReduceL1", {y}).outputs[0].values<int32_t>(), (std::vector<int32_t>{15}));
  EXPECT_EQ(run_op("ReduceSumSquare", {x}, axes_attr({1})).outputs[0].values<int64_t>(),
            (std::vector<int64_t>{34, 50}));
  // Integers wrap (two's complement): 2^16 * 2^16 is 0 in i32, as numpy computes it.
  Tensor w = make_tensor<int32_t>({2}, {65536, 65536});
  EXPECT_EQ(run_op("ReduceProd", {w}).outputs[0].values<int32_t>(), (std::vector<int32_t>{0}));
  EXPECT_EQ(run_op("ReduceSumSquare", {w}).outputs[0].values<int32_t>(), (std::vector<int32_t>{0}));
}

TEST(Reduce, MaxAndMinPropagateNan) {
  Tensor x = make_tensor<float>({4}, {1, std::numeric_limits<float>::quiet_NaN(), 3, 2});
  EXPECT_TRUE(std::isnan(run_op("ReduceMax", {x}).outputs[0].values<float>()[0]));
  EXPECT_TRUE(std::isnan(run_op("ReduceMin", {x}).outputs[0].values<float>()[0]));
  Tensor y = make_tensor<float>({3}, {std::numeric_limits<float>::quiet_NaN(), -7, 3});  // NaN first, then stays
  EXPECT_TRUE(std::isnan(run_op("ReduceMin", {y}).outputs[0].values<float>()[0]));
  EXPECT_TRUE(std::isnan(run_op("ReduceLogSumExp", {y}).outputs[0].values<float>()[0]));
}

TEST(Reduce, HandComputedMoreOps) {
  // x = [[1, -2, 3], [0.5, 4, -1]] over axis 1; ONNX Runtime gives the same values.
  Tensor x = make_tensor<float>({2, 3}, {1, -2, 3, 0.5f, 4, -1});
  const struct {
    const char* op;
    std::vector<double> want;
  } cases[] = {
      {"ReduceMin", {-2, -1}},
      {"ReduceProd", {-6, -2}},
      {"ReduceL1", {6, 5.5}},
      {"ReduceL2", {std::sqrt(14.0), std::sqrt(17.25)}},
      {"ReduceSumSquare", {14, 17.25}},
      {"ReduceLogSum", {std::log(2.0), std::log(3.5)}},
      // max + log(sum(exp(x - max))): 3.1328452, 4.0362697.
      {"ReduceLogSumExp", {3 + std::log(1 + std::exp(-2.0) + std::exp(-5.0)),
                           4 + std::log(1 + std::exp(-3.5) + std::exp(-5.0))}},
  };
  for (const auto& c : cases) {
    OpResult r = run_op(c.op, {x}, axes_attr({1}, 0));
    ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status.message();
    ASSERT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2})) << c.op;
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(r.outputs[0].at(i), c.want[i], 1e-6 * (1 + std::abs(c.want[i]))) << c.op;
  }
  // Over axis 0, keepdims 1, and over every axis.
  OpResult r = run_op("ReduceMin", {x}, axes_attr({0}));
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0.5f, -2, -1}));
  EXPECT_EQ(run_op("ReduceProd", {x}, axes_attr({0})).outputs[0].values<float>(), (std::vector<float>{0.5f, -8, -3}));
  EXPECT_EQ(run_op("ReduceProd", {x}).outputs[0].values<float>(), (std::vector<float>{12}));
  EXPECT_EQ(run_op("ReduceSumSquare", {x}).outputs[0].values<float>(), (std::vector<float>{31.25f}));
  EXPECT_EQ(run_op("ReduceL1", {x}, axes_attr({0, 1}, 0)).outputs[0].values<float>(), (std::vector<float>{11.5f}));
  // Middle axis of [2, 2, 2], reduced axes not innermost.
  Tensor c = make_tensor<float>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(run_op("ReduceMin", {c}, axes_attr({1}, 0)).outputs[0].values<float>(), (std::vector<float>{1, 2, 5, 6}));
  EXPECT_EQ(run_op("ReduceProd", {c}, axes_attr({0, 2})).outputs[0].values<float>(), (std::vector<float>{60, 672}));
  std::vector<float> lse = run_op("ReduceLogSumExp", {c}, axes_attr({0, 2})).outputs[0].values<float>();
  ASSERT_EQ(lse.size(), 2u);
  EXPECT_NEAR(lse[0], 6 + std::log(std::exp(-5.0) + std::exp(-4.0) + std::exp(-1.0) + 1), 1e-6);
  EXPECT_NEAR(lse[1], 8 + std::log(std::exp(-5.0) + std::exp(-4.0) + std::exp(-1.0) + 1), 1e-6);
}

TEST(Reduce, LogSumExpIsStable) {
  // exp(1000) overflows f32 (and double): the max is taken out first.
  Tensor big = make_tensor<float>({2, 2}, {1000, 1000, -1000, -1000});
  std::vector<float> y = run_op("ReduceLogSumExp", {big}, axes_attr({1}, 0)).outputs[0].values<float>();
  EXPECT_NEAR(y[0], 1000 + std::log(2.0), 1e-3);
  EXPECT_NEAR(y[1], -1000 + std::log(2.0), 1e-3);
  const float inf = std::numeric_limits<float>::infinity();
  Tensor edge = make_tensor<float>({3, 2}, {-inf, -inf, inf, 1, -inf, 5});
  y = run_op("ReduceLogSumExp", {edge}, axes_attr({1}, 0)).outputs[0].values<float>();
  EXPECT_EQ(y, (std::vector<float>{-inf, inf, 5}));
  // LogSum of a sum that is not positive: log(0) = -inf, log(< 0) = NaN.
  y = run_op("ReduceLogSum", {make_tensor<float>({2, 2}, {1, -1, -2, 1})}, axes_attr({1}, 0)).outputs[0].values<float>();
  EXPECT_EQ(y[0], -inf);
  EXPECT_TRUE(std::isnan(y[1]));
}

TEST(Reduce, EmptySetsAndNoop) {
  // Reducing zero elements gives each op's start value, then finish (as ONNX Runtime, except
  // ReduceMean, where it gives 0 and Kiln 0/0).
  const float inf = std::numeric_limits<float>::infinity();
  Tensor empty = make_tensor<float>({2, 0}, {});
  const struct {
    const char* op;
    float want;
  } cases[] = {{"ReduceSum", 0},        {"ReduceMax", -inf},       {"ReduceMin", inf},
               {"ReduceProd", 1},       {"ReduceL1", 0},           {"ReduceL2", 0},
               {"ReduceSumSquare", 0},  {"ReduceLogSum", -inf},    {"ReduceLogSumExp", -inf}};
  for (const auto& c : cases) {
    OpResult r = run_op(c.op, {empty}, axes_attr({1}));
    ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status.message();
    EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 1})) << c.op;
    EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{c.want, c.want})) << c.op;
  }
  EXPECT_TRUE(std::isnan(run_op("ReduceMean", {empty}, axes_attr({1})).outputs[0].values<float>()[0]));
  EXPECT_EQ(run_op("ReduceMin", {make_tensor<int32_t>({0}, {})}).outputs[0].values<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::max()}));
  // noop_with_empty_axes reduces over no axis: each element alone (ONNX Runtime's values).
  Tensor x = make_tensor<float>({2, 2}, {1, -2, 4, 0.5f});
  core::AttrStore noop;
  noop.set_int("noop_with_empty_axes", 1);
  const struct {
    const char* op;
    std::vector<float> want;
  } noops[] = {{"ReduceMin", {1, -2, 4, 0.5f}},       {"ReduceProd", {1, -2, 4, 0.5f}},
               {"ReduceL1", {1, 2, 4, 0.5f}},         {"ReduceL2", {1, 2, 4, 0.5f}},
               {"ReduceSumSquare", {1, 4, 16, 0.25f}}, {"ReduceLogSumExp", {1, -2, 4, 0.5f}}};
  for (const auto& c : noops) {
    OpResult r = run_op(c.op, {x, axes_tensor({})}, noop);
    ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status.message();
    EXPECT_EQ(r.outputs[0].shape, x.shape) << c.op;
    EXPECT_EQ(r.outputs[0].values<float>(), c.want) << c.op;
  }
  std::vector<float> y = run_op("ReduceLogSum", {x}, noop).outputs[0].values<float>();
  EXPECT_EQ(y[0], 0.f);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_FLOAT_EQ(y[2], std::log(4.f));
}

TEST(Reduce, RandomSweep) {
  std::mt19937 rng(4242);
  constexpr int kNumOps = sizeof(kOps) / sizeof(kOps[0]);
  for (int iter = 0; iter < 100 * kNumOps; ++iter) {
    const RefOp& op = kOps[iter % kNumOps];
    const int round = iter / kNumOps;  // picks rank, dtype and how axes are given, per op
    int rank = 1 + round % 5;
    std::vector<int64_t> shape = random_shape(rng, rank, 6);
    const DType dtype = !op.ints || round % 4 == 1 || round % 4 == 3 ? DType::kF32
                        : round % 4 == 0                              ? DType::kI64
                                                                      : DType::kI32;
    if (dtype == DType::kF32 && round % 7 == 6) shape[rng() % rank] = 0;  // empty input
    Tensor x = random_f32(rng, shape, op.lo, op.hi);
    if (op.signed_mag)
      for (int64_t i = 0; i < x.numel(); ++i)
        if (rng() % 2) x.data<float>()[i] = -x.data<float>()[i];
    if (dtype != DType::kF32) {
      std::vector<int64_t> v(x.numel());
      for (int64_t i = 0; i < x.numel(); ++i) v[i] = std::lround(x.data<float>()[i] * op.int_scale);
      if (dtype == DType::kI64) {
        x = make_tensor<int64_t>(shape, v);
      } else {
        x = make_tensor<int32_t>(shape, std::vector<int32_t>(v.begin(), v.end()));
      }
    }
    // A random subset of the axes (empty = all, or none with noop_with_empty_axes), written
    // negative half of the time.
    std::vector<int64_t> axes;
    std::vector<bool> reduced(rank, false);
    for (int k = 0; k < rank; ++k)
      if (rng() % 2) {
        axes.push_back(rng() % 2 ? k - rank : k);
        reduced[k] = true;
      }
    int64_t keep = rng() % 2;
    core::AttrStore attrs;
    attrs.set_int("keepdims", keep);
    bool noop = axes.empty() && rng() % 3 == 0;
    if (noop) attrs.set_int("noop_with_empty_axes", 1);
    else if (axes.empty()) reduced.assign(rank, true);
    std::vector<Tensor> inputs = {x};
    if (round % 5 == 0) {
      inputs.push_back(axes_tensor(axes));
    } else if (!axes.empty()) {
      attrs.set_ints("axes", axes);
    }
    const std::string what = std::string(op.name) + " iter " + std::to_string(iter);
    SlotRun s = run_op_in_slots(op.name, inputs, attrs);
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    Ref ref = reference(op, x, reduced);
    std::vector<int64_t> want_shape;
    for (int k = 0; k < rank; ++k)
      if (!reduced[k] || keep) want_shape.push_back(ref.kept_shape[k]);
    ASSERT_EQ(y.shape, want_shape) << what;
    ASSERT_EQ(y.dtype, x.dtype) << what;
    for (int64_t o = 0; o < y.numel(); ++o) ASSERT_TRUE(matches(y.at(o), ref.want[o], ref.tol[o])) << what << " at " << o;
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    EXPECT_EQ(s.outputs[0].bytes, y.bytes) << what;
  }
}

TEST(Reduce, Errors) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 1));
  OpResult r = run_op("ReduceSum", {x}, axes_attr({2}));
  EXPECT_NE(r.status.message().find("node 'test' (ReduceSum): axis 2 is out of range for rank 2"), std::string::npos)
      << r.status.message();
  r = run_op("ReduceMax", {x}, axes_attr({1, -1}));
  EXPECT_NE(r.status.message().find("axis -1 is listed twice"), std::string::npos) << r.status.message();
  r = run_op("ReduceMean", {make_tensor<int64_t>({2}, {1, 2})});
  EXPECT_NE(r.status.message().find("input #0 has dtype i64, expected f32"), std::string::npos) << r.status.message();
  r = run_op("ReduceSum", {make_tensor<bool>({2}, {true, false})});
  EXPECT_NE(r.status.message().find("dtype bool, expected f32, i64 or i32"), std::string::npos) << r.status.message();
  Tensor ax = make_tensor<int64_t>({1}, {0});
  r = run_op("ReduceSum", {x, ax, ax});
  EXPECT_NE(r.status.message().find("expects 1 to 2 inputs, got 3"), std::string::npos) << r.status.message();
  r = run_op("ReduceSum", {x, ax}, axes_attr({0}));
  EXPECT_NE(r.status.message().find("axes given both as attribute and as input #1"), std::string::npos)
      << r.status.message();
  r = run_op("ReduceSum", {x, make_tensor<float>({1}, {0})});
  EXPECT_NE(r.status.message().find("axes (input #1) has dtype f32, expected i64"), std::string::npos)
      << r.status.message();
  // The new ops share the checks; those with non-integral results take f32 only.
  for (const char* op : {"ReduceL2", "ReduceLogSum", "ReduceLogSumExp"})
    EXPECT_TRUE(has_text(run_op(op, {make_tensor<int32_t>({2}, {1, 2})}).status,
                         std::string("node 'test' (") + op + "): input #0 has dtype i32, expected f32"));
  for (const char* op : {"ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"})
    EXPECT_TRUE(has_text(run_op(op, {make_tensor<bool>({2}, {true, false})}).status,
                         std::string("node 'test' (") + op + "): input #0 has dtype bool, expected f32, i64 or i32"));
  EXPECT_TRUE(has_text(run_op("ReduceLogSumExp", {x}, axes_attr({-3})).status,
                       "node 'test' (ReduceLogSumExp): axis -3 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("ReduceProd", {x}, axes_attr({0, -2})).status, "axis -2 is listed twice"));
  EXPECT_TRUE(has_text(run_op("ReduceL1", {x, ax}, axes_attr({0})).status,
                       "axes given both as attribute and as input #1; keep one"));
}

TEST(Reduce, SymbolicShapes) {
  core::ExprPool pool;
  core::ExprId batch = pool.dim(pool.add_dim({"batch", 1, 32, 1}));
  core::ExprId seq = pool.dim(pool.add_dim({"seq", 1, 256, 1}));
  auto infer = [&](const char* op, const core::AttrStore& attrs, std::vector<Tensor*> extra = {}) {
    kernels::ShapeCtx c(pool, attrs.view());
    c.inputs.resize(1);
    c.inputs[0].shape = {batch, seq, pool.constant(7)};
    for (Tensor* t : extra) {
      kernels::SymTensor s;
      s.dtype = t->dtype;
      for (int64_t d : t->shape) s.shape.push_back(pool.constant(d));
      s.const_data = t->bytes.data();
      c.inputs.push_back(s);
    }
    c.outputs.resize(1);
    Status st = kernels::find_op(op)->shape(c);
    return st.ok() ? pool.shape_to_string(c.out(0).shape) : st.message();
  };
  EXPECT_EQ(infer("ReduceMean", axes_attr({-1, 1})), "[batch, 1, 1]");
  EXPECT_EQ(infer("ReduceMax", axes_attr({1}, 0)), "[batch, 7]");
  EXPECT_EQ(infer("ReduceSum", core::AttrStore()), "[1, 1, 1]");
  Tensor ax = make_tensor<int64_t>({1}, {0});
  EXPECT_EQ(infer("ReduceSum", core::AttrStore().set_int("keepdims", 0), {&ax}), "[seq, 7]");
  EXPECT_EQ(infer("ReduceLogSumExp", axes_attr({-1, 1})), "[batch, 1, 1]");
  EXPECT_EQ(infer("ReduceMin", axes_attr({1}, 0)), "[batch, 7]");
  EXPECT_EQ(infer("ReduceL2", core::AttrStore().set_int("keepdims", 0)), "[]");
  EXPECT_EQ(infer("ReduceProd", core::AttrStore().set_int("noop_with_empty_axes", 1)), "[batch, seq, 7]");
  EXPECT_EQ(infer("ReduceSumSquare", core::AttrStore().set_int("keepdims", 0), {&ax}), "[seq, 7]");
  // Axes that are not constant cannot be planned.
  kernels::ShapeCtx c(pool, core::Attrs());
  c.node_name = "sum";
  c.op_type = "ReduceSum";
  c.inputs.resize(2);
  c.inputs[0].shape = {batch};
  c.inputs[1].dtype = DType::kI64;
  c.inputs[1].shape = {pool.constant(1)};
  c.outputs.resize(1);
  Status st = kernels::find_op("ReduceSum")->shape(c);
  EXPECT_NE(st.message().find("node 'sum' (ReduceSum): axes (input #1) must be a constant"), std::string::npos)
      << st.message();
}

TEST(Reduce, BelowTheBound) {
  // Shapes inferred over Dims, evaluated at sizes far below the bound (and at an empty seq),
  // then every op run on buffers of exactly those sizes.
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId seq = pool.dim(pool.add_dim({"seq", 0, 300, 1}));
  Tensor over_seq = make_tensor<int64_t>({1}, {1}), over_last = make_tensor<int64_t>({1}, {-1});
  std::mt19937 rng(77);
  for (const RefOp& op : kOps) {
    for (int v = 0; v < 2; ++v) {
      const Tensor& axes = v == 0 ? over_seq : over_last;
      core::AttrStore attrs;
      attrs.set_int("keepdims", v);  // [batch, 5], or [batch, seq, 1]
      SymResult r = infer(pool, op.name, {sym_input(DType::kF32, {batch, seq, pool.constant(5)}), const_input(pool, axes)},
                          attrs);
      ASSERT_TRUE(r.status.ok()) << op.name << ": " << r.status.message();
      EXPECT_EQ(r.shape, v == 0 ? "[batch, 5]" : "[batch, seq, 1]") << op.name;
      EXPECT_TRUE(r.guards.empty()) << op.name;
      for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 0}, {2, 1}, {3, 7}, {1, 40}}) {
        const std::string what = std::string(op.name) + " batch " + std::to_string(b) + " seq " + std::to_string(s);
        Tensor x = random_f32(rng, {b, s, 5}, op.lo, op.hi);
        std::vector<Tensor> out(1);
        out[0].shape = eval_shape(pool, r.outputs[0].shape, {b, s});
        ASSERT_EQ(run_kernel(op.name, {x, axes}, &out, attrs), kernels::KernelStatus::kOk) << what;
        Ref ref = reference(op, x, {false, v == 0, v == 1});
        ASSERT_EQ(out[0].numel(), static_cast<int64_t>(ref.want.size())) << what;
        for (int64_t o = 0; o < out[0].numel(); ++o)
          ASSERT_TRUE(matches(out[0].at(o), ref.want[o], ref.tol[o])) << what << " at " << o;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::testing
