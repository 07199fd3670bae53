// Concat: hand cases, a seeded sweep of random shapes and dtypes against index math
// written here, errors, and symbolic shapes (with guards) run below the bound.
#include <gtest/gtest.h>

#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;


/// Expected output of concatenating `ins` along `axis`, element by element.
void expect_concat(const Tensor& out, const std::vector<Tensor>& ins, int64_t axis, const std::string& what) {
  Shape shape = ins[0].shape;
  shape[axis] = 0;
  for (const Tensor& t : ins) shape[axis] += t.shape[axis];
  ASSERT_EQ(out.shape, shape) << what;
  Shape os = strides_of(shape);
  const size_t es = dtype_size(out.dtype);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx(shape.size());
    for (size_t k = 0; k < shape.size(); ++k) idx[k] = i / os[k] % shape[k];
    size_t which = 0;  // walk the inputs until the axis coordinate falls inside one
    while (idx[axis] >= ins[which].shape[axis]) idx[axis] -= ins[which++].shape[axis];
    Shape is = strides_of(ins[which].shape);
    int64_t src = 0;
    for (size_t k = 0; k < shape.size(); ++k) src += idx[k] * is[k];
    ASSERT_EQ(std::memcmp(out.bytes.data() + i * es, ins[which].bytes.data() + src * es, es), 0) << what << " at " << i;
  }
}

TEST(Concat, HandComputed) {
  Tensor a = make_tensor<float>({2, 2}, {1, 2, 3, 4});
  Tensor b = make_tensor<float>({2, 1}, {5, 6});
  OpResult r = run_op("Concat", {a, b}, axis_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 2, 5, 3, 4, 6}));

  r = run_op("Concat", {a, a, a}, axis_attr(-2));
  EXPECT_EQ(r.outputs[0].shape, (Shape{6, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));

  Tensor e = make_tensor<float>({2, 0}, {});
  r = run_op("Concat", {e, b, e}, axis_attr(1));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{5, 6}));

  Tensor i = make_tensor<int64_t>({1}, {7}), j = make_tensor<int64_t>({2}, {8, 9});
  EXPECT_EQ(run_op("Concat", {i, j}, axis_attr(0)).outputs[0].values<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
  Tensor t = make_tensor<bool>({1, 1}, {true}), f = make_tensor<bool>({1, 1}, {false});
  EXPECT_EQ(run_op("Concat", {t, f}, axis_attr(1)).outputs[0].bytes, (std::vector<unsigned char>{1, 0}));
  EXPECT_EQ(run_op("Concat", {j}, axis_attr(0)).outputs[0].values<int64_t>(), (std::vector<int64_t>{8, 9}));
}

TEST(Concat, RandomSweep) {
  std::mt19937 rng(99);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape base = random_shape(rng, rank, 4);
    const int64_t axis = static_cast<int64_t>(rng() % rank);
    const int count = 1 + static_cast<int>(rng() % 4);
    std::vector<Tensor> ins;
    for (int i = 0; i < count; ++i) {
      Shape s = base;
      s[axis] = static_cast<int64_t>(rng() % 5);  // 0 included
      ins.push_back(random_tensor(rng, dtypes[iter % 4], s));
    }
    OpResult r = run_op("Concat", ins, axis_attr(rng() % 2 ? axis : axis - rank));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
    expect_concat(r.outputs[0], ins, axis, "sweep " + std::to_string(iter));
  }
}

TEST(Concat, Errors) {
  Tensor a = make_tensor<float>({2, 3}, std::vector<float>(6, 0));
  Tensor b = make_tensor<float>({2, 4}, std::vector<float>(8, 0));
  EXPECT_TRUE(has_text(run_op("Concat", {a, b}, axis_attr(0)).status,
                       "sizes 3 and 4 must be equal on dim 1 to concatenate input #0 [2, 3] with input #1 [2, 4] "
                       "along axis 0"));
  EXPECT_TRUE(run_op("Concat", {a, b}, axis_attr(1)).status.ok());
  Tensor c = make_tensor<int64_t>({2, 3}, std::vector<int64_t>(6, 0));
  EXPECT_TRUE(
      has_text(run_op("Concat", {a, c}, axis_attr(0)).status, "input #1 [2, 3] has dtype i64 but input #0 has f32"));
  Tensor d = make_tensor<float>({6}, std::vector<float>(6, 0));
  EXPECT_TRUE(has_text(run_op("Concat", {a, d}, axis_attr(0)).status,
                       "input #1 [6] has rank 1 but input #0 [2, 3] has rank 2"));
  EXPECT_TRUE(has_text(run_op("Concat", {a, a}, axis_attr(2)).status, "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("Concat", {a, a}).status, "needs the axis attribute"));
  EXPECT_TRUE(
      has_text(run_op("Concat", {}, axis_attr(0)).status, "node 'test' (Concat): expects at least 1 input, got 0"));
  EXPECT_TRUE(has_text(run_op("Concat", {a, absent()}, axis_attr(0)).status, "input #1 is required but missing"));
}

TEST(ConcatSymbolic, ShapesGuardsAndRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq});
  SymResult r = infer(p, "Concat", {x, sym_input(DType::kF32, {s.batch, s.c(3)})}, axis_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq + 3]");
  EXPECT_TRUE(r.guards.empty());
  EXPECT_EQ(infer(p, "Concat", {x, x}, axis_attr(0)).shape, "[2*batch, seq]");

  SymResult g = infer(p, "Concat", {x, sym_input(DType::kF32, {s.seq, s.c(4)})}, axis_attr(1));
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(g.shape, "[batch, seq + 4]");
  ASSERT_EQ(g.guards.size(), 1u);
  EXPECT_EQ(g.guards[0].context, "on dim 0 to concatenate input #0 [batch, seq] with input #1 [seq, 4] along axis 1");
  EXPECT_TRUE(guard_holds(p, g.guards[0], {5, 5}));
  EXPECT_FALSE(guard_holds(p, g.guards[0], {5, 6}));

  SymResult k = infer(p, "Concat", {x, sym_input(DType::kF32, {s.c(2), s.c(1)})}, axis_attr(1));
  EXPECT_EQ(k.shape, "[2, seq + 1]");  // the guarded constant wins
  ASSERT_EQ(k.guards.size(), 1u);
  EXPECT_TRUE(has_text(infer(p, "Concat", {x, sym_input(DType::kF32, {s.c(9), s.c(1)})}, axis_attr(1)).status,
                       "sizes batch and 9 can never be equal"));

  std::mt19937 rng(3);
  for (Shape dims : {Shape{1, 1}, Shape{3, 7}, Shape{8, 512}, Shape{2, 1}}) {
    std::vector<Tensor> ins = {random_tensor(rng, DType::kI64, {dims[0], dims[1]}),
                               random_tensor(rng, DType::kI64, {dims[0], 3})};
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kI64;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Concat", ins, &out, axis_attr(1)), kernels::KernelStatus::kOk);
    expect_concat(out[0], ins, 1, "concat at seq " + std::to_string(dims[1]));
  }
}

}  // namespace
}  // namespace kiln::testing
