// Gather: hand cases, a seeded sweep of random shapes, axes, indices and dtypes against
// index math written here, errors (shape time and run time), and symbolic shapes.
#include <gtest/gtest.h>

#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;


/// For each output element, the data element it copies.
std::vector<int64_t> gather_reference(const Shape& data, const Shape& idx_shape, const std::vector<int64_t>& idx,
                               int64_t axis) {
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), idx_shape.begin(), idx_shape.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  Shape os = strides_of(out), ds = strides_of(data);
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  const int64_t q = static_cast<int64_t>(idx_shape.size());
  Shape is = strides_of(idx_shape);
  std::vector<int64_t> from(n);
  for (int64_t i = 0; i < n; ++i) {
    Shape o(out.size());
    for (size_t k = 0; k < out.size(); ++k) o[k] = i / os[k] % out[k];
    int64_t flat_idx = 0;
    for (int64_t k = 0; k < q; ++k) flat_idx += o[axis + k] * is[k];
    int64_t v = idx[flat_idx];
    if (v < 0) v += data[axis];
    int64_t src = 0;
    for (int64_t k = 0; k < static_cast<int64_t>(data.size()); ++k)
      src += (k < axis ? o[k] : k == axis ? v : o[k + q - 1]) * ds[k];
    from[i] = src;
  }
  return from;
}

TEST(Gather, HandComputed) {
  Tensor data = make_tensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  OpResult r = run_op("Gather", {data, make_tensor<int64_t>({2}, {2, 0})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{5, 6, 1, 2}));

  r = run_op("Gather", {data, make_tensor<int32_t>({2, 2}, {1, 0, -1, 1})}, axis_attr(1));
  EXPECT_EQ(r.outputs[0].shape, (Shape{3, 2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{2, 1, 2, 2, 4, 3, 4, 4, 6, 5, 6, 6}));

  r = run_op("Gather", {data, make_tensor<int64_t>({}, {-2})});  // scalar index drops the axis
  EXPECT_EQ(r.outputs[0].shape, (Shape{2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 4}));

  Tensor b = make_tensor<bool>({3}, {true, false, false});
  r = run_op("Gather", {b, make_tensor<int64_t>({4}, {0, 0, 1, -3})}, axis_attr(-1));
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{1, 1, 0, 1}));

  r = run_op("Gather", {data, make_tensor<int64_t>({0}, {})});
  EXPECT_EQ(r.outputs[0].shape, (Shape{0, 2}));
}

TEST(Gather, RandomSweep) {
  std::mt19937 rng(31337);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape shape = random_shape(rng, rank, 5);
    const int64_t axis = static_cast<int64_t>(rng() % rank);
    Shape idx_shape = random_shape(rng, static_cast<int>(rng() % 4), 3);
    int64_t n = 1;
    for (int64_t d : idx_shape) n *= d;
    std::vector<int64_t> idx(n);
    for (auto& v : idx) v = static_cast<int64_t>(rng() % (2 * shape[axis])) - shape[axis];  // [-D, D)
    Tensor data = random_tensor(rng, dtypes[iter % 4], shape);
    Tensor indices = make_tensor<int64_t>(idx_shape, idx);
    if (iter % 2) {
      std::vector<int32_t> narrow(idx.begin(), idx.end());
      indices = make_tensor<int32_t>(idx_shape, narrow);
    }
    OpResult r = run_op("Gather", {data, indices}, axis_attr(rng() % 2 ? axis : axis - rank));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
    expect_picked(r.outputs[0], data, gather_reference(shape, idx_shape, idx, axis), "gather " + std::to_string(iter));
  }
}

TEST(Gather, Errors) {
  Tensor data = make_tensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor idx = make_tensor<int64_t>({1}, {0});
  EXPECT_TRUE(has_text(run_op("Gather", {data, idx}, axis_attr(2)).status, "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("Gather", {data, make_tensor<float>({1}, {0})}).status,
                       "indices input #1 has dtype f32, expected i64 or i32"));
  EXPECT_TRUE(has_text(run_op("Gather", {data}).status, "node 'test' (Gather): expects 2 inputs, got 1"));
  EXPECT_TRUE(has_text(run_op("Gather", {make_tensor<float>({}, {1}), idx}).status, "cannot gather from a scalar"));
  // Constant indices are checked at export.
  EXPECT_TRUE(has_text(run_op("Gather", {data, make_tensor<int64_t>({2}, {0, 5})}).status,
                       "size 3 must be at least 6 for index 5 on axis 0 of [3, 2]"));
  EXPECT_TRUE(has_text(run_op("Gather", {data, make_tensor<int64_t>({1}, {-3})}, axis_attr(1)).status,
                       "size 2 must be at least 3 for index -3 on axis 1 of [3, 2]"));

  // Runtime indices out of range: the kernel reports it instead of reading out of bounds.
  for (int64_t bad : {3, -4, 100}) {
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kF32;
    out[0].shape = {2, 2};
    EXPECT_EQ(run_kernel("Gather", {data, make_tensor<int64_t>({2}, {0, bad})}, &out),
              kernels::KernelStatus::kIndexOutOfRange)
        << bad;
    EXPECT_EQ(run_kernel("Gather", {data, make_tensor<int32_t>({2}, {static_cast<int32_t>(bad), 0})}, &out),
              kernels::KernelStatus::kIndexOutOfRange)
        << bad;
  }
}

TEST(GatherSymbolic, ShapesGuardsAndRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  // Embedding lookup: runtime token ids index a constant table.
  SymResult r =
      infer(p, "Gather", {sym_input(DType::kF32, {s.c(50), s.c(4)}), sym_input(DType::kI64, {s.batch, s.seq})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 4]");
  EXPECT_TRUE(r.guards.empty());

  // A constant index on a symbolic axis needs the axis to be long enough.
  Tensor five = make_tensor<int64_t>({1}, {5});
  SymResult g =
      infer(p, "Gather", {sym_input(DType::kI32, {s.batch, s.seq, s.c(8)}), const_input(p, five)}, axis_attr(1));
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(g.shape, "[batch, 1, 8]");
  ASSERT_EQ(g.guards.size(), 1u);
  EXPECT_EQ(g.guards[0].op, kernels::Guard::Op::kGe);
  EXPECT_EQ(g.guards[0].context, "for index 5 on axis 1 of [batch, seq, 8]");
  EXPECT_TRUE(guard_holds(p, g.guards[0], {1, 6}));
  EXPECT_FALSE(guard_holds(p, g.guards[0], {1, 5}));
  Tensor last = make_tensor<int64_t>({}, {-1});  // always valid: seq >= 1
  g = infer(p, "Gather", {sym_input(DType::kI32, {s.batch, s.seq}), const_input(p, last)}, axis_attr(1));
  EXPECT_EQ(g.shape, "[batch]");
  EXPECT_TRUE(g.guards.empty());

  std::mt19937 rng(8);
  for (Shape dims : {Shape{1, 1}, Shape{3, 7}, Shape{8, 512}, Shape{2, 1}}) {
    Tensor table = random_tensor(rng, DType::kF32, {50, 4});
    std::vector<int64_t> ids(dims[0] * dims[1]);
    for (auto& v : ids) v = static_cast<int64_t>(rng() % 100) - 50;
    Tensor idx = make_tensor<int64_t>(dims, ids);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Gather", {table, idx}, &out), kernels::KernelStatus::kOk);
    expect_picked(out[0], table, gather_reference({50, 4}, dims, ids, 0), "gather at seq " + std::to_string(dims[1]));
  }
}

}  // namespace
}  // namespace kiln::testing
