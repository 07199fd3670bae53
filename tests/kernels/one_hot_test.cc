// OneHot: the ONNX examples (no axis, axis, negative indices, negative axis), a seeded sweep
// of ranks, axes, depths and index/depth/value dtypes against one-hot rows written here (also
// inside oversized slots), errors, and symbolic depths run far below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;


/// Expected output (as doubles) of one_hot(indices, depth, axis) with values [off, on]:
/// indices cast to int64 (truncated), negative ones + depth, out-of-range ones all off.
std::vector<double> reference(const Tensor& idx, int64_t depth, int64_t axis, double off, double on, V* out_shape) {
  V shape = idx.shape;
  shape.insert(shape.begin() + axis, depth);
  *out_shape = shape;
  const V os = strides_of(shape), is = strides_of(idx.shape);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    int64_t src = 0, hot = -1;
    for (size_t k = 0, j = 0; k < shape.size(); ++k) {
      const int64_t coord = e / os[k] % shape[k];
      if (static_cast<int64_t>(k) == axis) hot = coord;
      else src += coord * is[j++];
    }
    const double t = std::trunc(idx.at(src));
    const bool in_range = t >= static_cast<double>(-depth) && t < static_cast<double>(depth);
    const int64_t h = in_range ? static_cast<int64_t>(t < 0 ? t + static_cast<double>(depth) : t) : -1;
    y[e] = h == hot ? on : off;
  }
  return y;
}

std::vector<float> floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

TEST(OneHot, OnnxExamples) {
  // one_hot_without_axis: int64 indices, f32 depth 12, int32 values [2, 5].
  OpResult r = run_op("OneHot", {make_tensor<int64_t>({3}, {0, 7, 8}), make_tensor<float>({}, {12.f}),
                                 make_tensor<int32_t>({2}, {2, 5})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);
  EXPECT_EQ(r.outputs[0].shape, (V{3, 12}));
  std::vector<int32_t> want(36, 2);
  want[0] = want[12 + 7] = want[24 + 8] = 5;
  EXPECT_EQ(r.outputs[0].values<int32_t>(), want);

  // one_hot_with_axis (axis 1) and one_hot_with_negative_axis (axis -2): f32 indices.
  Tensor idx = make_tensor<float>({2, 2}, {1, 9, 2, 4});
  Tensor ten = make_tensor<float>({}, {10.f}), values = make_tensor<float>({2}, {1, 3});
  for (int64_t axis : {1, -2}) {
    r = run_op("OneHot", {idx, ten, values}, axis_attr(axis));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(r.outputs[0].shape, (V{2, 10, 2}));
    std::vector<float> y(40, 1.f);
    y[1 * 2 + 0] = y[9 * 2 + 1] = y[20 + 2 * 2 + 0] = y[20 + 4 * 2 + 1] = 3.f;  // [i, index, j]
    EXPECT_EQ(r.outputs[0].values<float>(), y) << axis;
  }

  // one_hot_negative_indices: -7 and -8 count from the end of depth 10.
  r = run_op("OneHot", {make_tensor<int64_t>({3}, {0, -7, -8}), ten, values}, axis_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  std::vector<float> y(30, 1.f);
  y[0] = y[10 + 3] = y[20 + 2] = 3.f;
  EXPECT_EQ(r.outputs[0].values<float>(), y);

  // Outside [-depth, depth - 1]: an all-off row. Axis 0, i32 indices, i64 depth, bool values.
  r = run_op("OneHot", {make_tensor<int32_t>({4}, {3, -4, 2, -3}), make_tensor<int64_t>({1}, {3}),
                        make_tensor<bool>({2}, {false, true})},
             axis_attr(0));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (V{3, 4}));
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0}));

  // f32 indices and depth are cast to int64 (truncated): 1.7 -> 1, -0.5 -> 0, depth 3.9 -> 3.
  r = run_op("OneHot", {make_tensor<float>({3}, {1.7f, -0.5f, NAN}), make_tensor<float>({1}, {3.9f}),
                        make_tensor<int64_t>({2}, {0, 1})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1, 0, 0, 0, 0, 0}));

  // A scalar index gives a 1-D row.
  r = run_op("OneHot", {make_tensor<int64_t>({}, {-1}), make_tensor<int32_t>({}, {4}), values});
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 1, 1, 3}));
}

TEST(OneHot, RandomSweep) {
  std::mt19937 rng(4242);
  const DType index_types[] = {DType::kI64, DType::kI32, DType::kF32};
  const DType value_types[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = static_cast<int>(rng() % 4);
    const V shape = random_shape(rng, rank, 4);
    const int64_t depth = 1 + static_cast<int64_t>(rng() % 6);
    const int64_t axis = static_cast<int64_t>(rng() % (rank + 1)), given = rng() % 2 ? axis : axis - rank - 1;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    // Indices in [-depth - 2, depth + 2): some out of range; f32 ones sometimes fractional.
    const DType it = index_types[iter % 3];
    std::vector<double> raw(static_cast<size_t>(n));
    for (auto& v : raw) {
      v = static_cast<double>(static_cast<int64_t>(rng() % (2 * depth + 4)) - depth - 2);
      if (it == DType::kF32 && rng() % 3 == 0) v += v < 0 ? -0.5 : 0.5;
    }
    Tensor idx = it == DType::kI64   ? make_tensor<int64_t>(shape, std::vector<int64_t>(raw.begin(), raw.end()))
                 : it == DType::kI32 ? make_tensor<int32_t>(shape, std::vector<int32_t>(raw.begin(), raw.end()))
                                     : make_tensor<float>(shape, std::vector<float>(raw.begin(), raw.end()));
    const V depth_shape = rng() % 2 ? V{} : V{1};
    Tensor depth_t = iter % 4 == 0   ? make_tensor<float>(depth_shape, {static_cast<float>(depth) + 0.25f})
                     : iter % 4 == 1 ? make_tensor<int32_t>(depth_shape, {static_cast<int32_t>(depth)})
                                     : make_tensor<int64_t>(depth_shape, {depth});
    Tensor values = random_tensor(rng, value_types[iter % 4], {2});
    SlotRun s = run_op_in_slots("OneHot", {idx, depth_t, values}, axis_attr(given));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk);
    V want_shape;
    const std::vector<double> want = reference(idx, depth, axis, values.at(0), values.at(1), &want_shape);
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, want_shape) << iter;
    ASSERT_EQ(y.dtype, values.dtype);
    for (int64_t e = 0; e < y.numel(); ++e) ASSERT_EQ(y.at(e), want[e]) << "iter " << iter << " at " << e;
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact) << iter;
    EXPECT_EQ(s.outputs[0].bytes, y.bytes) << iter;
  }
}

TEST(OneHot, Errors) {
  Tensor idx = make_tensor<int64_t>({2}, {0, 1});
  Tensor depth = make_tensor<int64_t>({}, {3});
  Tensor values = make_tensor<float>({2}, {0, 1});
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, depth}).status, "node 'test' (OneHot): expects 3 inputs, got 2"));
  EXPECT_TRUE(has_text(run_op("OneHot", {make_tensor<bool>({1}, {true}), depth, values}).status,
                       "indices input #0 has dtype bool, expected f32, i64 or i32"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, make_tensor<bool>({}, {true}), values}).status,
                       "depth input #1 has dtype bool, expected f32, i64 or i32"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, make_tensor<int64_t>({2}, {3, 3}), values}).status,
                       "depth [2] must hold one element"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, depth, make_tensor<float>({3}, {0, 1, 2})}).status,
                       "values [3] must be [2] ([off, on])"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, depth, make_tensor<float>({1, 2}, {0, 1})}).status,
                       "values [1, 2] must be [2] ([off, on])"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, make_tensor<int64_t>({}, {0}), values}).status,
                       "depth 0 must be at least 1"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, make_tensor<float>({1}, {0.5f}), values}).status,
                       "depth 0 must be at least 1"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, make_tensor<float>({1}, {INFINITY}), values}).status,
                       "is not a usable size"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, depth, values}, axis_attr(2)).status, "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("OneHot", {idx, depth, values}, axis_attr(-3)).status, "axis -3 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("OneHot", {make_tensor<int64_t>({1, 1, 1, 1, 1, 1, 1, 1}, {0}), depth, values}).status,
                       "output rank 9 is above the limit 8"));
  // depth sets the output size: a run-time depth is an export error.
  core::ExprPool p;
  EXPECT_TRUE(has_text(
      infer(p, "OneHot", {const_input(p, idx), sym_input(DType::kI64, {}), const_input(p, values)}).status,
      "depth input #1 sets the output size, so it must be a constant or computed from input shapes"));
  // A depth that disagrees with the output bind fixed is refused at run time.
  std::vector<Tensor> out(1);
  out[0].shape = {2, 4};
  EXPECT_EQ(run_kernel("OneHot", {idx, depth, values}, &out), kernels::KernelStatus::kInvalidValue);
}

TEST(OneHotSymbolic, DepthFromShapesRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  // Labels [batch, seq] with a constant depth.
  Tensor five = make_tensor<int64_t>({1}, {5});
  Tensor values = make_tensor<float>({2}, {0, 1});
  SymResult r = infer(p, "OneHot", {sym_input(DType::kI64, {s.batch, s.seq}), const_input(p, five), const_input(p, values)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 5]");
  EXPECT_TRUE(r.guards.empty());
  // depth = seq (from Shape), inserted at axis 1: every position one-hot over the sequence.
  SymResult d = infer(p, "OneHot", {sym_input(DType::kI32, {s.batch, s.seq}), sym_values_input(p, {s.seq}),
                                    const_input(p, values)},
                      axis_attr(1));
  ASSERT_TRUE(d.status.ok()) << d.status.message();
  EXPECT_EQ(d.shape, "[batch, seq, seq]");
  EXPECT_TRUE(d.guards.empty());
  // depth = seq - 4 must be a size: guarded.
  SymResult g = infer(p, "OneHot", {sym_input(DType::kI64, {s.batch}), sym_values_input(p, {p.sub(s.seq, s.c(4))}),
                                    const_input(p, values)});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(g.shape, "[batch, seq - 4]");
  EXPECT_EQ(guards_text(p, g), "seq - 4 >= 1");
  EXPECT_TRUE(guard_holds(p, g.guards[0], {1, 5}));
  EXPECT_FALSE(guard_holds(p, g.guards[0], {1, 4}));

  std::mt19937 rng(5);
  for (V dims : {V{1, 1}, V{3, 7}, V{2, 40}, V{8, 512}}) {
    const V out_shape = eval_shape(p, d.outputs[0].shape, dims);
    std::vector<int32_t> pos(static_cast<size_t>(dims[0] * dims[1]));
    for (auto& v : pos) v = static_cast<int32_t>(rng() % (2 * dims[1] + 2)) - static_cast<int32_t>(dims[1]) - 1;
    Tensor idx = make_tensor<int32_t>(dims, pos);
    // Slots sized for the bound (8 x 512 x 512 floats), far above these shapes.
    SlotRun run = run_op_in_slots("OneHot", {idx, make_tensor<int64_t>({1}, {dims[1]}), values}, axis_attr(1),
                                  size_t{8} * 512 * 512 * 4);
    ASSERT_TRUE(run.exact.status.ok()) << run.exact.status.message();
    ASSERT_EQ(run.exact.outputs[0].shape, out_shape);
    ASSERT_EQ(run.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(run.tails_intact);
    V shape;
    EXPECT_EQ(run.outputs[0].values<float>(), floats(reference(idx, dims[1], 1, 0, 1, &shape)));
    EXPECT_EQ(shape, out_shape);
  }
}

}  // namespace
}  // namespace kiln::testing
