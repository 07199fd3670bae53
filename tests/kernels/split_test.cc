// Split: hand cases for every way of giving the sizes, a seeded sweep of random shapes, axes
// and dtypes against a reference written here, errors, and symbolic shapes (with their
// guards) checked against the kernel below the bound.
#include <gtest/gtest.h>

#include <numeric>

#include "guard_text_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;


/// Per output, the input elements it copies, for pieces `sizes` along `axis`.
std::vector<std::vector<int64_t>> reference(const Shape& shape, int64_t axis, const Shape& sizes) {
  std::vector<std::vector<int64_t>> from(sizes.size());
  const Shape is = strides_of(shape);
  int64_t offset = 0;
  for (size_t p = 0; p < sizes.size(); ++p) {
    Shape piece = shape;
    piece[axis] = sizes[p];
    const Shape ps = strides_of(piece);
    int64_t n = 1;
    for (int64_t d : piece) n *= d;
    for (int64_t i = 0; i < n; ++i) {
      int64_t src = 0;
      for (size_t k = 0; k < shape.size(); ++k) {
        int64_t idx = i / ps[k] % piece[k];
        src += (static_cast<int64_t>(k) == axis ? idx + offset : idx) * is[k];
      }
      from[p].push_back(src);
    }
    offset += sizes[p];
  }
  return from;
}

/// Symbolic shape inference with `n` outputs; returns every output's shape as text.
struct SplitSym {
  Status status;
  std::vector<kernels::SymTensor> outputs;
  std::vector<kernels::Guard> guards;
  std::vector<std::string> shapes;
};
SplitSym infer_split(core::ExprPool& pool, std::vector<kernels::SymTensor> inputs, size_t n,
                     const core::AttrStore& attrs = core::AttrStore()) {
  kernels::ShapeCtx c(pool, attrs.view());
  c.node_name = "test";
  c.op_type = "Split";
  c.inputs = std::move(inputs);
  c.outputs.resize(n);
  SplitSym r;
  r.status = kernels::find_op("Split")->shape(c);
  r.outputs = c.outputs;
  r.guards = c.guards;
  if (r.status.ok())
    for (const auto& o : c.outputs) r.shapes.push_back(pool.shape_to_string(o.shape));
  return r;
}

std::string guard_list(const core::ExprPool& pool, const std::vector<kernels::Guard>& guards) {
  std::string s;
  for (const kernels::Guard& g : guards) s += (s.empty() ? "" : "; ") + guard_text(pool, g);
  return s;
}

TEST(Split, HandComputed) {
  Tensor x = make_tensor<float>({2, 6}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  using V = std::vector<float>;
  // Equal split by the number of outputs.
  OpResult r = run_op("Split", {x}, axis_attr(1), 3);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.outputs.size(), 3u);
  EXPECT_EQ(r.outputs[0].values<float>(), (V{0, 1, 6, 7}));
  EXPECT_EQ(r.outputs[1].values<float>(), (V{2, 3, 8, 9}));
  EXPECT_EQ(r.outputs[2].values<float>(), (V{4, 5, 10, 11}));
  // Sizes as input #1 (opset 13+), including an empty piece.
  r = run_op("Split", {x, i64s({1, 0, 5})}, axis_attr(-1), 3);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 1}));
  EXPECT_EQ(r.outputs[1].shape, (Shape{2, 0}));
  EXPECT_EQ(r.outputs[2].values<float>(), (V{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}));
  // Sizes as attribute (before opset 13), default axis 0.
  r = run_op("Split", {x}, core::AttrStore().set_ints("split", {1, 1}), 2);
  EXPECT_EQ(r.outputs[0].values<float>(), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(r.outputs[1].values<float>(), (V{6, 7, 8, 9, 10, 11}));
  // num_outputs (opset 18): pieces of ceil(6 / 4) = 2, the last one smaller.
  r = run_op("Split", {x}, axis_attr(1).set_int("num_outputs", 4), 4);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[2].values<float>(), (V{4, 5, 10, 11}));
  EXPECT_EQ(r.outputs[3].shape, (Shape{2, 0}));
  r = run_op("Split", {make_tensor<int64_t>({5}, {1, 2, 3, 4, 5})}, core::AttrStore().set_int("num_outputs", 2), 2);
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (std::vector<int64_t>{4, 5}));
  // One output: a copy.
  r = run_op("Split", {x}, core::AttrStore(), 1);
  EXPECT_EQ(r.outputs[0].bytes, x.bytes);
}

TEST(Split, RandomSweep) {
  std::mt19937 rng(31337);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Shape shape = random_shape(rng, rank, 6);
    const int64_t axis = static_cast<int64_t>(rng() % (2 * rank)) - rank;
    const int64_t a = axis < 0 ? axis + rank : axis, d = shape[a];
    Tensor x = random_tensor(rng, dtypes[iter % 4], shape);
    core::AttrStore attrs = axis_attr(axis);
    std::vector<Tensor> inputs = {x};
    Shape sizes;
    switch (iter % 3) {
      case 0: {  // explicit sizes (input or attribute), zeros allowed
        int64_t left = d;
        const int64_t n = 1 + static_cast<int64_t>(rng() % 4);
        for (int64_t p = 0; p + 1 < n; ++p) {
          sizes.push_back(static_cast<int64_t>(rng() % (left + 1)));
          left -= sizes.back();
        }
        sizes.push_back(left);
        if (rng() % 2) inputs.push_back(i64s(sizes));
        else attrs.set_ints("split", sizes);
        break;
      }
      case 1: {  // equal pieces: a divisor of d
        int64_t n = 1 + static_cast<int64_t>(rng() % d);
        while (d % n != 0) --n;
        sizes.assign(n, d / n);
        break;
      }
      default: {  // num_outputs: ceil(d / n), the last one smaller (never negative)
        int64_t n = 1 + static_cast<int64_t>(rng() % d);
        while ((n - 1) * ((d + n - 1) / n) > d) --n;
        const int64_t chunk = (d + n - 1) / n;
        sizes.assign(n, chunk);
        sizes.back() = d - (n - 1) * chunk;
        attrs.set_int("num_outputs", n);
      }
    }
    const std::string what = "iter " + std::to_string(iter);
    OpResult r = run_op("Split", inputs, attrs, sizes.size());
    ASSERT_TRUE(r.status.ok()) << what << ": " << r.status.message();
    ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk) << what;
    std::vector<std::vector<int64_t>> from = reference(shape, a, sizes);
    for (size_t p = 0; p < sizes.size(); ++p) {
      Shape want = shape;
      want[a] = sizes[p];
      ASSERT_EQ(r.outputs[p].shape, want) << what << " output " << p;
      expect_picked(r.outputs[p], x, from[p], what + " output " + std::to_string(p));
    }
  }
}

TEST(Split, Errors) {
  Tensor x = make_tensor<float>({2, 6}, std::vector<float>(12, 0));
  auto status = [&](std::vector<Tensor> in, const core::AttrStore& a, size_t n) {
    return run_op("Split", in, a, n).status;
  };
  EXPECT_TRUE(has_text(status({x, i64s({2, 3})}, axis_attr(1), 2),
                       "node 'test' (Split): sizes 5 and 6 must be equal for the split sizes to cover along "
                       "axis 1 of [2, 6]"));
  EXPECT_TRUE(has_text(status({x, i64s({2, 4})}, axis_attr(1), 3), "split has 2 sizes for 3 outputs"));
  EXPECT_TRUE(has_text(status({x, i64s({-1, 7})}, axis_attr(1), 2), "size -1 must be at least 0 for split size #0"));
  EXPECT_TRUE(has_text(status({x}, axis_attr(1), 4),
                       "size 6 must be divisible by 4 to split it into 4 equal pieces along axis 1"));
  EXPECT_TRUE(has_text(status({x}, axis_attr(1).set_int("num_outputs", 3), 2),
                       "num_outputs is 3 but the node has 2 outputs"));
  EXPECT_TRUE(has_text(status({x}, axis_attr(1).set_int("num_outputs", 5), 5),
                       "size -2 must be at least 0 for 5 pieces of ceil(6/5) to fit along axis 1"));
  EXPECT_TRUE(has_text(status({x}, axis_attr(2), 2), "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(status({x, i64s({1, 1})}, core::AttrStore().set_ints("split", {1, 1}), 2),
                       "split given both as attribute and as input #1; keep one"));
  EXPECT_TRUE(has_text(status({x, make_tensor<float>({2}, {1, 1})}, core::AttrStore(), 2),
                       "split input #1 has dtype f32, expected i64"));
  EXPECT_TRUE(
      has_text(status({make_tensor<float>({}, {1})}, core::AttrStore(), 1), "cannot split a scalar (rank 0)"));
  EXPECT_TRUE(has_text(status({x}, core::AttrStore(), 0), "needs at least one output"));
  SymPool s;
  SplitSym r = infer_split(s.pool, {sym_input(DType::kF32, {s.seq}), sym_input(DType::kI64, {s.c(2)})}, 2);
  EXPECT_TRUE(has_text(r.status,
                       "split input #1 must be a constant or computed from shapes"));
}

TEST(SplitSymbolic, ShapesAndGuards) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq, s.c(12)});
  // Equal split of a symbolic axis: guarded divisibility, floordiv sizes.
  SplitSym r = infer_split(p, {x}, 2, axis_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shapes, (std::vector<std::string>{"[batch, floordiv(seq,2), 12]", "[batch, floordiv(seq,2), 12]"}));
  EXPECT_EQ(guard_list(p, r.guards), "seq % 2 == 0");
  // Equal split of a constant axis: nothing to guard.
  r = infer_split(p, {x}, 3, axis_attr(-1));
  EXPECT_EQ(r.shapes[2], "[batch, seq, 4]");
  EXPECT_TRUE(r.guards.empty());
  // Sizes computed from shapes: [1, seq - 1] covers seq exactly.
  r = infer_split(p, {x, sym_values_input(p, {s.c(1), p.sub(s.seq, s.c(1))})}, 2, axis_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shapes, (std::vector<std::string>{"[batch, 1, 12]", "[batch, seq - 1, 12]"}));
  EXPECT_TRUE(r.guards.empty()) << guard_list(p, r.guards);  // seq >= 1, so seq - 1 >= 0
  // Constant sizes on a symbolic axis: the sum must equal it at bind.
  Tensor held = i64s({100, 28});
  r = infer_split(p, {x, const_input(p, held)}, 2, axis_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shapes[1], "[batch, 28, 12]");
  EXPECT_EQ(guard_list(p, r.guards), "128 == seq");
  // num_outputs on a symbolic axis.
  r = infer_split(p, {x}, 3, axis_attr(1).set_int("num_outputs", 3));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shapes[0], "[batch, ceildiv(seq,3), 12]");
  EXPECT_EQ(guard_list(p, r.guards).find("seq - 2*ceildiv(seq,3) >= 0"), 0u) << guard_list(p, r.guards);
}

// The bug class that hides at the bound: evaluate the symbolic pieces at many dim values
// where the guards hold, then run the kernel on exactly those sizes.
TEST(SplitSymbolic, MatchesKernelBelowTheBound) {
  std::mt19937 rng(8);
  for (int mode = 0; mode < 3; ++mode) {
    for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{4}}) {
      SymPool s;
      core::ExprPool& p = s.pool;
      core::AttrStore attrs = axis_attr(1);
      std::vector<kernels::SymTensor> in = {sym_input(DType::kI32, {s.batch, s.seq})};
      if (mode == 1) attrs.set_int("num_outputs", static_cast<int64_t>(n));
      std::vector<ExprId> given;
      if (mode == 2) {  // sizes 1, 2, ..., and the rest
        ExprId rest = s.seq;
        for (size_t i = 0; i + 1 < n; ++i) {
          given.push_back(s.c(static_cast<int64_t>(i + 1)));
          rest = p.sub(rest, given.back());
        }
        given.push_back(rest);
        in.push_back(sym_values_input(p, given));
      }
      SplitSym r = infer_split(p, in, n, attrs);
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      int checked = 0;
      for (int64_t seq : {1, 2, 3, 5, 6, 12, 13, 100, 511, 512}) {
        for (int64_t batch : {1, 3}) {
          bool holds = true;
          for (const kernels::Guard& g : r.guards) holds = holds && guard_holds(p, g, {batch, seq});
          if (!holds) continue;
          ++checked;
          std::vector<Tensor> out(n);
          Shape sizes;
          for (size_t i = 0; i < n; ++i) {
            out[i].dtype = DType::kI32;
            out[i].shape = eval_shape(p, r.outputs[i].shape, {batch, seq});
            ASSERT_EQ(out[i].shape[0], batch);
            sizes.push_back(out[i].shape[1]);
          }
          ASSERT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), seq);
          Tensor x = random_tensor(rng, DType::kI32, {batch, seq});
          const std::string what = "mode " + std::to_string(mode) + " n " + std::to_string(n) + " at seq " +
                                   std::to_string(seq);
          std::vector<Tensor> inputs = {x};
          if (mode == 2) inputs.push_back(i64s(sizes));  // what bind materializes from the expressions
          ASSERT_EQ(run_kernel("Split", inputs, &out, attrs), kernels::KernelStatus::kOk) << what;
          std::vector<std::vector<int64_t>> from = reference({batch, seq}, 1, sizes);
          for (size_t i = 0; i < n; ++i) expect_picked(out[i], x, from[i], what);
        }
      }
      EXPECT_GT(checked, 0);
    }
  }
}

TEST(Split, KernelRejectsInconsistentShapes) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 0));
  std::vector<Tensor> out(2);
  out[0].shape = {2, 1};
  out[1].shape = {2, 1};  // 1 + 1 != 3
  EXPECT_EQ(run_kernel("Split", {x}, &out, axis_attr(1)), kernels::KernelStatus::kInvalidValue);
  out[1].shape = {1, 2};  // dim 0 differs
  EXPECT_EQ(run_kernel("Split", {x}, &out, axis_attr(1)), kernels::KernelStatus::kInvalidValue);
}

}  // namespace
}  // namespace kiln::testing
