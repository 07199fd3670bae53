// Softmax and LogSoftmax: hand cases, stability at large inputs, a seeded sweep over ranks and
// axes against a double reference (also run in oversized slots), the same for the pre-13
// coerce_2d view, errors, symbolic shape.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {


TEST(Softmax, HandComputed) {
  Tensor x = make_tensor<float>({3}, {1, 2, 3});
  OpResult r = run_op("Softmax", {x});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.outputs[0].at(i), std::exp(i + 1.0) / s, 1e-7);
  r = run_op("LogSoftmax", {x});
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(r.outputs[0].at(i), i + 1.0 - std::log(s), 1e-6);

  // axis 0 of [[1, 5], [1, 1]]: columns normalize separately.
  Tensor m = make_tensor<float>({2, 2}, {1, 5, 1, 1});
  r = run_op("Softmax", {m}, axis_attr(0));
  double e4 = std::exp(4.0);
  std::vector<double> want = {0.5, e4 / (e4 + 1), 0.5, 1 / (e4 + 1)};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.outputs[0].at(i), want[i], 1e-7) << i;
}

TEST(Softmax, StableAtLargeInputs) {
  Tensor x = make_tensor<float>({1, 3}, {1000, 1001, -1000});
  std::vector<float> y = run_op("Softmax", {x}).outputs[0].values<float>();
  EXPECT_NEAR(y[0], 1 / (1 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(y[1], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(y[2], 0.f);
  std::vector<float> l = run_op("LogSoftmax", {x}).outputs[0].values<float>();
  EXPECT_NEAR(l[1], -std::log1p(std::exp(-1.0)), 1e-4);
  EXPECT_NEAR(l[2], -2001 - std::log1p(std::exp(-1.0)), 1e-2);  // finite, not -inf
}

TEST(Softmax, RandomSweepOverAxes) {
  std::mt19937 rng(99);
  for (int iter = 0; iter < 200; ++iter) {
    const char* op = iter % 2 ? "LogSoftmax" : "Softmax";
    int rank = 1 + iter / 2 % 5;
    std::vector<int64_t> shape = random_shape(rng, rank, 6);
    int64_t axis = static_cast<int64_t>(rng() % (2 * rank)) - rank;  // [-rank, rank)
    Tensor x = random_f32(rng, shape, -8.f, 8.f);
    SlotRun s = run_op_in_slots(op, {x}, axis_attr(axis));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, shape);
    // Reference: for each element, walk its line along the axis in double precision.
    int64_t a = axis < 0 ? axis + rank : axis;
    int64_t stride = strides_of(shape)[a], n = shape[a];
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t start = i - (i / stride % n) * stride;
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, x.at(start + j * stride));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x.at(start + j * stride) - m);
      double want = iter % 2 ? x.at(i) - m - std::log(sum) : std::exp(x.at(i) - m) / sum;
      ASSERT_NEAR(y.at(i), want, 1e-5 * (1 + std::abs(want))) << op << " axis " << axis << " at " << i;
    }
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

core::AttrStore coerce_attr() { return core::AttrStore().set_int("coerce_2d", 1); }

TEST(Softmax, Coerce2dHandComputed) {
  // Before opset 13: [2, 2, 2] viewed as [2, 4] (default axis 1), each row of 4 normalized.
  Tensor x = make_tensor<float>({2, 2, 2}, {0, 1, 2, 3, 3, 3, 3, 3});
  OpResult r = run_op("Softmax", {x}, coerce_attr());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 2, 2}));
  double s = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.outputs[0].at(i), std::exp(i) / s, 1e-7) << i;
  for (int i = 4; i < 8; ++i) EXPECT_NEAR(r.outputs[0].at(i), 0.25, 1e-7) << i;
  // axis 0 makes the whole tensor one row; axis 2 (= -1) matches opset-13 semantics.
  r = run_op("LogSoftmax", {x}, coerce_attr().set_int("axis", 0));
  double all = s + 4 * std::exp(3.0);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(r.outputs[0].at(i), x.at(i) - std::log(all), 1e-6) << i;
  r = run_op("Softmax", {x}, coerce_attr().set_int("axis", -1));
  OpResult plain = run_op("Softmax", {x});
  EXPECT_EQ(r.outputs[0].values<float>(), plain.outputs[0].values<float>());
}

TEST(Softmax, Coerce2dRandomSweep) {
  std::mt19937 rng(1213);
  for (int iter = 0; iter < 160; ++iter) {
    const bool log = iter % 2;
    const int rank = 1 + iter / 2 % 5;
    std::vector<int64_t> shape = random_shape(rng, rank, 5);
    core::AttrStore attrs = coerce_attr();
    int64_t a = 1;  // the default axis
    if (rank < 2 || rng() % 3) {
      const int64_t axis = static_cast<int64_t>(rng() % (2 * rank)) - rank;
      attrs.set_int("axis", axis);
      a = axis < 0 ? axis + rank : axis;
    }
    Tensor x = random_f32(rng, shape, -8.f, 8.f);
    SlotRun s = run_op_in_slots(log ? "LogSoftmax" : "Softmax", {x}, attrs);
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    // Reference: rows of prod(shape[a:]) contiguous elements.
    int64_t row = 1;
    for (int k = static_cast<int>(a); k < rank; ++k) row *= shape[k];
    for (int64_t start = 0; start < x.numel(); start += row) {
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < row; ++j) m = std::max(m, x.at(start + j));
      for (int64_t j = 0; j < row; ++j) sum += std::exp(x.at(start + j) - m);
      for (int64_t j = 0; j < row; ++j) {
        double v = x.at(start + j), want = log ? v - m - std::log(sum) : std::exp(v - m) / sum;
        ASSERT_NEAR(y.at(start + j), want, 1e-5 * (1 + std::abs(want))) << "iter " << iter << " at " << start + j;
      }
    }
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(Softmax, Errors) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 1));
  OpResult r = run_op("Softmax", {x}, axis_attr(2));
  EXPECT_NE(r.status.message().find("node 'test' (Softmax): axis 2 is out of range for rank 2"), std::string::npos)
      << r.status.message();
  r = run_op("LogSoftmax", {x}, axis_attr(-3));
  EXPECT_NE(r.status.message().find("axis -3 is out of range for rank 2"), std::string::npos) << r.status.message();
  r = run_op("Softmax", {make_tensor<int64_t>({2}, {1, 2})});
  EXPECT_NE(r.status.message().find("input #0 has dtype i64, expected f32"), std::string::npos) << r.status.message();
  r = run_op("Softmax", {x, x});
  EXPECT_NE(r.status.message().find("expects 1 inputs, got 2"), std::string::npos) << r.status.message();
  r = run_op("Softmax", {make_tensor<float>({4}, {1, 2, 3, 4})}, coerce_attr());  // default axis 1 needs rank 2
  EXPECT_NE(r.status.message().find("axis 1 is out of range for rank 1"), std::string::npos) << r.status.message();
  r = run_op("Softmax", {make_tensor<float>({}, {1})});
  EXPECT_NE(r.status.message().find("must have rank >= 1"), std::string::npos) << r.status.message();
}

TEST(Softmax, SymbolicShape) {
  core::ExprPool pool;
  core::ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  core::ExprId seq = pool.dim(pool.add_dim({"seq", 1, 128, 1}));
  for (const char* name : {"Softmax", "LogSoftmax"}) {
    core::AttrStore attrs = axis_attr(1);
    kernels::ShapeCtx c(pool, attrs.view());
    c.inputs.resize(1);
    c.inputs[0].shape = {batch, seq, pool.add(seq, pool.constant(1))};
    c.outputs.resize(1);
    Status st = kernels::find_op(name)->shape(c);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(pool.shape_to_string(c.out(0).shape), "[batch, seq, seq + 1]");
    EXPECT_TRUE(c.guards.empty());
  }
  // coerce_2d: same shape; the kernel normalizes rows of seq * (seq + 1) at the actual seq.
  core::AttrStore attrs = coerce_attr();
  kernels::ShapeCtx c(pool, attrs.view());
  c.inputs.resize(1);
  c.inputs[0].shape = {batch, seq, pool.add(seq, pool.constant(1))};
  c.outputs.resize(1);
  ASSERT_TRUE(kernels::find_op("Softmax")->shape(c).ok());
  EXPECT_EQ(pool.shape_to_string(c.out(0).shape), "[batch, seq, seq + 1]");
  std::mt19937 rng(5);
  for (int64_t s : {1, 2, 5}) {
    Tensor x = random_f32(rng, {2, s, s + 1});
    std::vector<Tensor> out(1);
    out[0].shape = x.shape;
    ASSERT_EQ(run_kernel("Softmax", {x}, &out, attrs), kernels::KernelStatus::kOk);
    for (int64_t b = 0; b < 2; ++b) {
      double sum = 0;
      for (int64_t j = 0; j < s * (s + 1); ++j) sum += out[0].at(b * s * (s + 1) + j);
      EXPECT_NEAR(sum, 1.0, 1e-5) << "seq " << s;
    }
  }
}

}  // namespace
}  // namespace kiln::testing
