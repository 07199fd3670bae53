// ReduceMean, ReduceSum, ReduceMax: hand cases, axes as attribute or input, a seeded sweep of
// shapes and axis sets against a double reference (also run in oversized slots), errors and
// symbolic shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bound_slot_util.h"

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
}

TEST(Reduce, MaxPropagatesNan) {
  Tensor x = make_tensor<float>({4}, {1, std::numeric_limits<float>::quiet_NaN(), 3, 2});
  EXPECT_TRUE(std::isnan(run_op("ReduceMax", {x}).outputs[0].values<float>()[0]));
}

TEST(Reduce, RandomSweep) {
  std::mt19937 rng(4242);
  const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
  for (int iter = 0; iter < 300; ++iter) {
    std::string op = ops[iter % 3];
    int rank = 1 + iter / 3 % 5;
    std::vector<int64_t> shape = random_shape(rng, rank, 6);
    bool as_int = op != "ReduceMean" && iter % 4 == 0;
    Tensor x = random_f32(rng, shape, -3.f, 3.f);
    if (as_int) {
      std::vector<int64_t> v(x.numel());
      for (int64_t i = 0; i < x.numel(); ++i) v[i] = static_cast<int64_t>(x.data<float>()[i] * 100);
      x = make_tensor<int64_t>(shape, v);
    }
    // A random subset of the axes (empty = all), written negative half of the time.
    std::vector<int64_t> axes;
    std::vector<bool> reduced(rank, false);
    for (int k = 0; k < rank; ++k)
      if (rng() % 2) {
        axes.push_back(rng() % 2 ? k - rank : k);
        reduced[k] = true;
      }
    if (axes.empty()) reduced.assign(rank, true);
    int64_t keep = rng() % 2;
    core::AttrStore attrs;
    attrs.set_int("keepdims", keep);
    std::vector<Tensor> inputs = {x};
    if (iter % 5 == 0) {
      inputs.push_back(axes_tensor(axes));
    } else if (!axes.empty()) {
      attrs.set_ints("axes", axes);
    }
    SlotRun s = run_op_in_slots(op.c_str(), inputs, attrs);
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    // Reference: expected shape, then every input element folded into its output slot.
    std::vector<int64_t> kept_shape, want_shape;
    for (int k = 0; k < rank; ++k) {
      kept_shape.push_back(reduced[k] ? 1 : shape[k]);
      if (!reduced[k] || keep) want_shape.push_back(kept_shape.back());
    }
    ASSERT_EQ(y.shape, want_shape) << op;
    std::vector<double> acc(y.numel(), op == "ReduceMax" ? -INFINITY : 0.0), abs_sum(y.numel(), 0.0);
    std::vector<int64_t> in_strides = strides_of(shape), out_strides = strides_of(kept_shape);
    int64_t count = x.numel() / y.numel();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t o = 0;
      for (int k = 0; k < rank; ++k)
        if (!reduced[k]) o += i / in_strides[k] % shape[k] * out_strides[k];
      acc[o] = op == "ReduceMax" ? std::max(acc[o], x.at(i)) : acc[o] + x.at(i);
      abs_sum[o] += std::abs(x.at(i));
    }
    for (int64_t o = 0; o < y.numel(); ++o) {
      double want = op == "ReduceMean" ? acc[o] / count : acc[o];
      ASSERT_NEAR(y.at(o), want, 1e-6 * (1 + abs_sum[o])) << op << " at " << o;
    }
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
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

}  // namespace
}  // namespace kiln::testing
