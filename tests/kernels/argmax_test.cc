// ArgMax, ArgMin: hand cases (ties, NaN, keepdims, select_last_index), a seeded sweep over
// ranks, axes and dtypes against a reference written here (also run in oversized slots),
// errors, and the symbolic shape with the kernel run below the bound; each for both ops.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;
using V = std::vector<int64_t>;

V arg(const char* op, const Tensor& x, const core::AttrStore& attrs, Shape* shape = nullptr) {
  OpResult r = run_op(op, {x}, attrs);
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  if (r.outputs.empty()) return {};
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);
  if (shape) *shape = r.outputs[0].shape;
  return r.outputs[0].values<int64_t>();
}

core::AttrStore attrs_of(int64_t axis, int64_t keepdims = 1, int64_t last = 0) {
  return core::AttrStore().set_int("axis", axis).set_int("keepdims", keepdims).set_int("select_last_index", last);
}

V argmax(const Tensor& x, const core::AttrStore& attrs, Shape* shape = nullptr) { return arg("ArgMax", x, attrs, shape); }
V argmin(const Tensor& x, const core::AttrStore& attrs, Shape* shape = nullptr) { return arg("ArgMin", x, attrs, shape); }

/// Whether v replaces the best m seen earlier along the axis (the reference's rule, no NaN).
bool replaces(bool is_min, bool last, double v, double m) {
  if (is_min) return last ? v <= m : v < m;
  return last ? v >= m : v > m;
}

TEST(ArgMax, HandComputed) {
  Tensor x = make_tensor<float>({2, 3}, {1, 5, 5, 7, -1, 7});
  Shape shape;
  EXPECT_EQ(argmax(x, core::AttrStore(), &shape), (V{1, 0, 1}));  // default axis 0, keepdims 1
  EXPECT_EQ(shape, (Shape{1, 3}));
  EXPECT_EQ(argmax(x, attrs_of(1, 0), &shape), (V{1, 0}));  // ties: the first index
  EXPECT_EQ(shape, (Shape{2}));
  EXPECT_EQ(argmax(x, attrs_of(-1, 1, 1), &shape), (V{2, 2}));  // ties: the last index
  EXPECT_EQ(shape, (Shape{2, 1}));
  // NaN counts as the largest; the first NaN, or the last with select_last_index.
  Tensor n = make_tensor<float>({5}, {1, NAN, 9, NAN, -INFINITY});
  EXPECT_EQ(argmax(n, attrs_of(0)), (V{1}));
  EXPECT_EQ(argmax(n, attrs_of(0, 0, 1)), (V{3}));
  EXPECT_EQ(argmax(make_tensor<float>({2}, {-INFINITY, -INFINITY}), attrs_of(0, 0, 0)), (V{0}));
  EXPECT_EQ(argmax(make_tensor<int64_t>({3}, {-5, int64_t{1} << 40, 3}), attrs_of(0)), (V{1}));
  EXPECT_EQ(argmax(make_tensor<int32_t>({2, 2}, {4, 4, 2, 8}), attrs_of(1, 1, 1)), (V{1, 1}));
  EXPECT_EQ(argmax(make_tensor<float>({1}, {3}), attrs_of(0, 0), &shape), (V{0}));
  EXPECT_EQ(shape, Shape{});
}

TEST(ArgMin, HandComputed) {
  Tensor x = make_tensor<float>({2, 3}, {1, 5, 5, 7, -1, 7});
  Shape shape;
  EXPECT_EQ(argmin(x, core::AttrStore(), &shape), (V{0, 1, 0}));  // default axis 0, keepdims 1
  EXPECT_EQ(shape, (Shape{1, 3}));
  EXPECT_EQ(argmin(x, attrs_of(1, 0), &shape), (V{0, 1}));
  EXPECT_EQ(shape, (Shape{2}));
  Tensor t = make_tensor<float>({2, 3}, {2, 2, 3, 4, 0, 0});
  EXPECT_EQ(argmin(t, attrs_of(1, 0)), (V{0, 1}));         // ties: the first index
  EXPECT_EQ(argmin(t, attrs_of(-1, 1, 1), &shape), (V{1, 2}));  // ties: the last index
  EXPECT_EQ(shape, (Shape{2, 1}));
  // NaN counts as the smallest (numpy.argmin); the first NaN, or the last with select_last_index.
  Tensor n = make_tensor<float>({5}, {1, NAN, -9, NAN, -INFINITY});
  EXPECT_EQ(argmin(n, attrs_of(0)), (V{1}));
  EXPECT_EQ(argmin(n, attrs_of(0, 0, 1)), (V{3}));
  EXPECT_EQ(argmin(make_tensor<float>({3}, {INFINITY, -INFINITY, -INFINITY}), attrs_of(0, 0, 0)), (V{1}));
  EXPECT_EQ(argmin(make_tensor<float>({3}, {INFINITY, -INFINITY, -INFINITY}), attrs_of(0, 0, 1)), (V{2}));
  // Values checked against ONNX Runtime: [3, -2, 7, -2, 5] gives 1, or 3 with select_last_index.
  Tensor o = make_tensor<float>({5}, {3, -2, 7, -2, 5});
  EXPECT_EQ(argmin(o, attrs_of(0, 0)), (V{1}));
  EXPECT_EQ(argmin(o, attrs_of(0, 0, 1)), (V{3}));
  EXPECT_EQ(argmin(make_tensor<int64_t>({3}, {-5, -(int64_t{1} << 40), 3}), attrs_of(0)), (V{1}));
  EXPECT_EQ(argmin(make_tensor<int32_t>({2, 2}, {4, 4, 8, 2}), attrs_of(1, 1, 1)), (V{1, 1}));
  EXPECT_EQ(argmin(make_tensor<int32_t>({2, 2}, {4, 4, 8, 2}), attrs_of(1, 1, 0)), (V{0, 1}));
  EXPECT_EQ(argmin(make_tensor<float>({1}, {3}), attrs_of(0, 0), &shape), (V{0}));
  EXPECT_EQ(shape, Shape{});
}

TEST(ArgMax, RandomSweep) {
  std::mt19937 rng(4711);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32};
  for (int iter = 0; iter < 480; ++iter) {
    const bool is_min = iter % 2 == 1;
    const char* op = is_min ? "ArgMin" : "ArgMax";
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape shape = random_shape(rng, rank, 6);
    const int64_t axis = static_cast<int64_t>(rng() % (2 * rank)) - rank;
    const int64_t keep = rng() % 2, last = rng() % 2;
    Tensor x = random_tensor(rng, dtypes[iter % 3], shape);
    // Few distinct values, so ties are common.
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (x.dtype == DType::kF32) x.data<float>()[i] = std::round(x.data<float>()[i] * 2);
      if (x.dtype == DType::kI32) x.data<int32_t>()[i] %= 3;
    }
    const std::string what = std::string(op) + " iter " + std::to_string(iter);
    SlotRun s = run_op_in_slots(op, {x}, attrs_of(axis, keep, last));
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    const int64_t a = axis < 0 ? axis + rank : axis, n = shape[a], stride = strides_of(shape)[a];
    Shape want_shape = shape;
    if (keep) want_shape[a] = 1;
    else want_shape.erase(want_shape.begin() + a);
    ASSERT_EQ(y.shape, want_shape) << what;
    // Reference: for each output element, walk its line along the axis in double precision.
    int64_t o = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (i / stride % n != 0) continue;  // i starts a line
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        double v = x.at(i + j * stride), m = x.at(i + best * stride);
        if (replaces(is_min, last, v, m)) best = j;
      }
      ASSERT_EQ(y.data<int64_t>()[o++], best) << what << " at " << o - 1;
    }
    EXPECT_EQ(o, y.numel());
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact) << what;
    EXPECT_EQ(s.outputs[0].bytes, y.bytes) << what;
  }
}

TEST(ArgMax, Errors) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 0));
  for (const char* op : {"ArgMax", "ArgMin"}) {
    EXPECT_TRUE(has_text(run_op(op, {x}, attrs_of(2)).status,
                         std::string("node 'test' (") + op + "): axis 2 is out of range for rank 2"));
    EXPECT_TRUE(has_text(run_op(op, {x}, attrs_of(-3)).status, "axis -3 is out of range for rank 2"));
    EXPECT_TRUE(has_text(run_op(op, {make_tensor<bool>({1}, {true})}).status,
                         "input #0 has dtype bool, expected f32, i64 or i32"));
    EXPECT_TRUE(has_text(run_op(op, {make_tensor<float>({}, {1})}).status, "must have rank >= 1, got a scalar"));
    EXPECT_TRUE(has_text(run_op(op, {x, x}).status, "expects 1 inputs, got 2"));
    EXPECT_TRUE(has_text(run_op(op, {make_tensor<float>({2, 0}, {})}, attrs_of(1)).status,
                         "size 0 must be at least 1 for axis 1 of [2, 0] to have an element to pick"));
  }
}

TEST(ArgMaxSymbolic, ShapesAndBelowTheBound) {
  for (const char* op : {"ArgMax", "ArgMin"}) {
    const bool is_min = std::string(op) == "ArgMin";
    core::ExprPool pool;
    ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
    ExprId seq = pool.dim(pool.add_dim({"seq", 0, 64, 1}));  // may be empty: guarded
    auto x = sym_input(DType::kF32, {batch, seq, pool.constant(10)});
    SymResult r = infer(pool, op, {x}, attrs_of(-1, 0));
    ASSERT_TRUE(r.status.ok()) << op << ": " << r.status.message();
    EXPECT_EQ(r.shape, "[batch, seq]") << op;
    EXPECT_TRUE(r.guards.empty()) << op;
    r = infer(pool, op, {x}, attrs_of(1));
    ASSERT_TRUE(r.status.ok()) << op << ": " << r.status.message();
    EXPECT_EQ(r.shape, "[batch, 1, 10]") << op;
    EXPECT_EQ(guards_text(pool, r), "seq >= 1") << op;
    // Below the bound: the index over seq at several actual sizes.
    std::mt19937 rng(3);
    for (int64_t s : {1, 2, 7, 64}) {
      Tensor in = random_f32(rng, {2, s, 10});
      std::vector<Tensor> out(1);
      out[0].dtype = DType::kI64;
      out[0].shape = eval_shape(pool, r.outputs[0].shape, {2, s});
      ASSERT_EQ(run_kernel(op, {in}, &out, attrs_of(1)), kernels::KernelStatus::kOk);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t k = 0; k < 10; ++k) {
          int64_t best = 0;
          for (int64_t j = 1; j < s; ++j)
            if (replaces(is_min, false, in.at((b * s + j) * 10 + k), in.at((b * s + best) * 10 + k))) best = j;
          ASSERT_EQ(out[0].data<int64_t>()[b * 10 + k], best) << op << " seq " << s;
        }
    }
  }
}

}  // namespace
}  // namespace kiln::testing
