// TopK: the ONNX examples (largest, smallest, negative axis), ties and NaN, a seeded sweep of
// ranks, axes, K, flags and dtypes (many ties) against a sort written here, with both outputs
// and Values alone, inside oversized slots; errors, and symbolic K run far below the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore attrs_of(int64_t axis, int64_t largest = 1, int64_t sorted = 1) {
  return core::AttrStore().set_int("axis", axis).set_int("largest", largest).set_int("sorted", sorted);
}
Tensor k_of(int64_t k) { return make_tensor<int64_t>({1}, {k}); }

/// For each Indices element, the lane position TopK should pick: every lane sorted stably by
/// value (NaN above every number), descending for largest, ascending otherwise; the first K.
V reference(const Tensor& x, int64_t axis, int64_t k, bool largest) {
  const V& s = x.shape;
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= s[a];
  for (size_t a = static_cast<size_t>(axis) + 1; a < s.size(); ++a) inner *= s[a];
  const int64_t n = s[axis];
  V out(static_cast<size_t>(outer * k * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      auto key = [&](int64_t i) {  // (is NaN, value): NaN sorts above everything
        const double v = x.at((o * n + i) * inner + r);
        return std::pair<int, double>(std::isnan(v) ? 1 : 0, std::isnan(v) ? 0.0 : v);
      };
      V order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return largest ? key(a) > key(b) : key(a) < key(b); });
      for (int64_t j = 0; j < k; ++j) out[(o * k + j) * inner + r] = order[j];
    }
  return out;
}

/// Flat X element of each Indices element (lane position -> element of X).
V sources(const Tensor& x, int64_t axis, int64_t k, const V& picks) {
  int64_t inner = 1;
  for (size_t a = static_cast<size_t>(axis) + 1; a < x.shape.size(); ++a) inner *= x.shape[a];
  const int64_t n = x.shape[axis];
  V from(picks.size());
  for (size_t e = 0; e < picks.size(); ++e) {
    const int64_t r = static_cast<int64_t>(e) % inner, o = static_cast<int64_t>(e) / inner / k;
    from[e] = (o * n + picks[e]) * inner + r;
  }
  return from;
}

TEST(TopK, OnnxExamples) {
  Tensor x = make_tensor<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  for (int64_t axis : {1, -1}) {  // top_k, top_k_negative_axis
    OpResult r = run_op("TopK", {x, k_of(3)}, attrs_of(axis), 2);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
    EXPECT_EQ(r.outputs[0].shape, (V{3, 3}));
    EXPECT_EQ(r.outputs[1].dtype, DType::kI64);
    EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 2, 1, 7, 6, 5, 11, 10, 9}));
    EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{3, 2, 1, 3, 2, 1, 3, 2, 1}));
  }
  // top_k_smallest.
  Tensor y = make_tensor<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8});
  OpResult r = run_op("TopK", {y, k_of(3)}, attrs_of(1, 0, 1), 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 1, 2, 4, 5, 6, 8, 9, 10}));
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{0, 1, 2, 0, 1, 2, 3, 2, 1}));
  // Along axis 0 (inner lanes), i32.
  r = run_op("TopK", {make_tensor<int32_t>({3, 2}, {5, 1, 7, 0, 6, 2}), k_of(2)}, attrs_of(0), 2);
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{7, 2, 6, 1}));
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{1, 2, 2, 0}));
  // Default attributes: axis -1, largest, sorted.
  r = run_op("TopK", {make_tensor<int64_t>({4}, {-5, 9, 2, 9}), k_of(1)}, core::AttrStore(), 2);
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{9}));
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{1}));
}

TEST(TopK, TiesNanAndEdges) {
  // Equal values keep the lower index first, for largest and smallest, also with sorted = 0.
  Tensor x = make_tensor<float>({6}, {1, 3, 3, 2, 3, 1});
  for (int64_t sorted : {1, 0}) {
    OpResult r = run_op("TopK", {x, k_of(4)}, attrs_of(0, 1, sorted), 2);
    EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 3, 3, 2}));
    EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{1, 2, 4, 3}));
    r = run_op("TopK", {x, k_of(3)}, attrs_of(0, 0, sorted), 2);
    EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 1, 2}));
    EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{0, 5, 3}));
  }
  // NaN ranks above +inf: first for largest, last for smallest.
  Tensor nan = make_tensor<float>({5}, {2, NAN, INFINITY, NAN, -1});
  OpResult r = run_op("TopK", {nan, k_of(5)}, attrs_of(0), 2);
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{1, 3, 2, 0, 4}));
  r = run_op("TopK", {nan, k_of(5)}, attrs_of(0, 0), 2);
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{4, 0, 2, 1, 3}));
  EXPECT_TRUE(std::isnan(r.outputs[0].values<float>()[4]));
  // -0 and +0 are equal: index order.
  r = run_op("TopK", {make_tensor<float>({2}, {0.f, -0.f}), k_of(2)}, attrs_of(0, 0), 2);
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{0, 1}));
  // K = 0 gives empty outputs; K = the axis size sorts the whole lane.
  r = run_op("TopK", {x, k_of(0)}, attrs_of(0), 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  EXPECT_EQ(r.outputs[0].shape, (V{0}));
  r = run_op("TopK", {x, make_tensor<int64_t>({}, {6})}, attrs_of(0), 2);  // a scalar K is accepted too
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (V{1, 2, 4, 3, 0, 5}));
  // Values alone (one output) take the same elements.
  r = run_op("TopK", {x, k_of(4)}, attrs_of(0));
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 3, 3, 2}));
}

TEST(TopK, RandomSweep) {
  std::mt19937 rng(9001);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    const V shape = random_shape(rng, rank, 7);
    const int64_t axis = static_cast<int64_t>(rng() % rank), given = rng() % 2 ? axis : axis - rank;
    const int64_t k = static_cast<int64_t>(rng() % (shape[axis] + 1));
    const int64_t largest = rng() % 2, sorted = rng() % 4 == 0 ? 0 : 1;
    const DType t = dtypes[iter % 3];
    // Few distinct values, so ties are common; f32 also gets NaN and infinities.
    Tensor x = random_tensor(rng, t, shape);
    for (int64_t e = 0; e < x.numel(); ++e) {
      const int v = static_cast<int>(rng() % 9) - 4;
      if (t == DType::kI64) x.data<int64_t>()[e] = v;
      else if (t == DType::kI32) x.data<int32_t>()[e] = v;
      else x.data<float>()[e] = v == 4 ? NAN : v == -4 ? -INFINITY : v == 3 && rng() % 2 ? INFINITY : 0.5f * static_cast<float>(v);
    }
    const core::AttrStore a = attrs_of(given, largest, sorted);
    const std::string what = "iter " + std::to_string(iter);
    const V want = reference(x, axis, k, largest != 0);
    V out_shape = shape;
    out_shape[axis] = k;

    SlotRun s = run_op_in_slots("TopK", {x, k_of(k)}, a, 256, 2);
    const OpResult& exact = s.exact;
    ASSERT_TRUE(exact.status.ok()) << exact.status.message();
    ASSERT_EQ(exact.kernel, kernels::KernelStatus::kOk) << what;
    ASSERT_EQ(exact.outputs[0].shape, out_shape) << what;
    ASSERT_EQ(exact.outputs[1].shape, out_shape) << what;
    ASSERT_EQ(exact.outputs[1].values<int64_t>(), want) << what;
    expect_picked(exact.outputs[0], x, sources(x, axis, k, want), what);
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    EXPECT_EQ(s.outputs[0].bytes, exact.outputs[0].bytes) << what;
    EXPECT_EQ(s.outputs[1].bytes, exact.outputs[1].bytes) << what;

    // Values alone: the other path, in oversized slots too.
    SlotRun v = run_op_in_slots("TopK", {x, k_of(k)}, a);
    ASSERT_TRUE(v.exact.status.ok()) << v.exact.status.message();
    ASSERT_EQ(v.exact.kernel, kernels::KernelStatus::kOk) << what;
    EXPECT_EQ(v.exact.outputs[0].bytes, exact.outputs[0].bytes) << what;
    EXPECT_TRUE(v.tails_intact) << what;
    EXPECT_EQ(v.outputs[0].bytes, exact.outputs[0].bytes) << what;
  }
}

TEST(TopK, Errors) {
  Tensor x = make_tensor<float>({3, 4}, std::vector<float>(12, 1.f));
  EXPECT_TRUE(has_text(run_op("TopK", {x}, attrs_of(1), 2).status, "node 'test' (TopK): expects 2 inputs, got 1"));
  EXPECT_TRUE(has_text(run_op("TopK", {x, k_of(1)}, attrs_of(1), 3).status,
                       "expects 1 or 2 outputs (Values, Indices), got 3"));
  EXPECT_TRUE(has_text(run_op("TopK", {make_tensor<bool>({2}, {true, false}), k_of(1)}, attrs_of(0), 2).status,
                       "input #0 has dtype bool, expected f32, i64 or i32"));
  EXPECT_TRUE(has_text(run_op("TopK", {x, make_tensor<int32_t>({1}, {1})}, attrs_of(1), 2).status,
                       "input #1 has dtype i32, expected i64"));
  EXPECT_TRUE(has_text(run_op("TopK", {make_tensor<float>({}, {1}), k_of(1)}, attrs_of(0), 2).status,
                       "input #0 must have rank >= 1, got a scalar"));
  EXPECT_TRUE(has_text(run_op("TopK", {x, k_of(1)}, attrs_of(2), 2).status, "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("TopK", {x, make_tensor<int64_t>({2}, {1, 1})}, attrs_of(1), 2).status,
                       "K [2] must hold one element"));
  EXPECT_TRUE(has_text(run_op("TopK", {x, k_of(-1)}, attrs_of(1), 2).status, "K = -1 must not be negative"));
  EXPECT_TRUE(has_text(run_op("TopK", {x, k_of(5)}, attrs_of(1), 2).status,
                       "size 4 must be at least 5 for K = 5 on axis 1 of [3, 4]"));
  EXPECT_TRUE(has_text(run_op("TopK", {x, k_of(4)}, attrs_of(0), 2).status,
                       "size 3 must be at least 4 for K = 4 on axis 0 of [3, 4]"));
  // K sets the output size: a run-time K is an export error.
  core::ExprPool p;
  EXPECT_TRUE(has_text(infer(p, "TopK", {const_input(p, x), sym_input(DType::kI64, {p.constant(1)})}, attrs_of(1), 2).status,
                       "K input #1 sets the output size, so it must be a constant or computed from input shapes"));
  // A K that disagrees with the outputs bind fixed, or exceeds the axis, is refused at run time.
  std::vector<Tensor> out(2);
  out[0].shape = out[1].shape = {3, 2};
  out[1].dtype = DType::kI64;
  EXPECT_EQ(run_kernel("TopK", {x, k_of(3)}, &out, attrs_of(1)), kernels::KernelStatus::kInvalidValue);
  out[0].shape = out[1].shape = {3, 5};
  EXPECT_EQ(run_kernel("TopK", {x, k_of(5)}, &out, attrs_of(1)), kernels::KernelStatus::kInvalidValue);
  out[0].shape = out[1].shape = {3, 2};
  EXPECT_EQ(run_kernel("TopK", {x, k_of(2)}, &out, attrs_of(1)), kernels::KernelStatus::kOk);
}

TEST(TopKSymbolic, KFromShapesRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto scores = sym_input(DType::kF32, {s.batch, s.seq});
  // A constant K on a symbolic axis needs the axis to be long enough: guarded.
  Tensor five = k_of(5);
  SymResult c = infer(p, "TopK", {scores, const_input(p, five)}, attrs_of(1), 2);
  ASSERT_TRUE(c.status.ok()) << c.status.message();
  EXPECT_EQ(c.shape, "[batch, 5]");
  EXPECT_EQ(p.shape_to_string(c.outputs[1].shape), "[batch, 5]");
  EXPECT_EQ(c.outputs[1].dtype, DType::kI64);
  EXPECT_EQ(guards_text(p, c), "seq >= 5");
  EXPECT_EQ(c.guards[0].context, "for K = 5 on axis 1 of [batch, seq]");
  EXPECT_TRUE(guard_holds(p, c.guards[0], {1, 5}));
  EXPECT_FALSE(guard_holds(p, c.guards[0], {1, 4}));
  // K = seq - 2 (Shape -> Sub): fits the axis, but must not be negative.
  SymResult n = infer(p, "TopK", {scores, sym_values_input(p, {p.sub(s.seq, s.c(2))})}, attrs_of(-1), 2);
  ASSERT_TRUE(n.status.ok()) << n.status.message();
  EXPECT_EQ(n.shape, "[batch, seq - 2]");
  EXPECT_EQ(guards_text(p, n), "seq - 2 >= 0");
  // K = min(seq, 100), as detection heads compute it: provably fits, no guard.
  const ExprId k = p.min(s.seq, s.c(100));
  SymResult r = infer(p, "TopK", {scores, sym_values_input(p, {k})}, attrs_of(1, 0), 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, " + p.to_string(k) + "]");
  EXPECT_TRUE(r.guards.empty()) << guards_text(p, r);

  std::mt19937 rng(12);
  for (V dims : {V{1, 1}, V{3, 7}, V{2, 150}, V{8, 512}}) {
    const V out_shape = eval_shape(p, r.outputs[0].shape, dims);
    const int64_t kv = eval_all(p, dims)[k];
    ASSERT_EQ(out_shape, (V{dims[0], std::min<int64_t>(dims[1], 100)}));
    Tensor x = random_tensor(rng, DType::kF32, dims);
    // Slots sized for the bound (8 x 512 floats), far above these shapes.
    SlotRun run = run_op_in_slots("TopK", {x, k_of(kv)}, attrs_of(1, 0), 8 * 512 * 8, 2);
    const OpResult& exact = run.exact;
    ASSERT_TRUE(exact.status.ok()) << exact.status.message();
    ASSERT_EQ(exact.outputs[0].shape, out_shape);
    ASSERT_EQ(run.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(run.tails_intact);
    const V want = reference(x, 1, kv, false);
    EXPECT_EQ(run.outputs[1].values<int64_t>(), want) << dims[0] << "x" << dims[1];
    expect_picked(run.outputs[0], x, sources(x, 1, kv, want), "at seq " + std::to_string(dims[1]));
  }
}

}  // namespace
}  // namespace kiln::testing
