// GatherElements: the ONNX examples, a seeded sweep of ranks, axes (negative too), index
// shapes and dtypes against index math written here (also inside oversized slots), errors
// (shape time and run time), and symbolic shapes with guards run far below the bound.
#include <gtest/gtest.h>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;


/// For each output element (indices' shape), the data element it copies.
std::vector<int64_t> reference(const V& data, const V& idx_shape, const std::vector<int64_t>& idx, int64_t axis) {
  const V ds = strides_of(data), os = strides_of(idx_shape);
  int64_t n = 1;
  for (int64_t d : idx_shape) n *= d;
  std::vector<int64_t> from(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    int64_t src = 0;
    for (size_t k = 0; k < idx_shape.size(); ++k) {
      int64_t coord = e / os[k] % idx_shape[k];
      if (static_cast<int64_t>(k) == axis) coord = idx[e] < 0 ? idx[e] + data[k] : idx[e];
      src += coord * ds[k];
    }
    from[e] = src;
  }
  return from;
}

TEST(GatherElements, OnnxExamples) {
  OpResult r = run_op("GatherElements", {make_tensor<float>({2, 2}, {1, 2, 3, 4}),
                                         make_tensor<int64_t>({2, 2}, {0, 0, 1, 0})},
                      axis_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
  EXPECT_EQ(r.outputs[0].shape, (V{2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 1, 4, 3}));

  Tensor nine = make_tensor<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  r = run_op("GatherElements", {nine, make_tensor<int32_t>({2, 3}, {1, 2, 0, 2, 0, 0})});  // axis 0 by default
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (V{2, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 8, 3, 7, 2, 3}));
  // gather_elements_negative_indices.
  r = run_op("GatherElements", {nine, make_tensor<int64_t>({2, 3}, {-1, -2, 0, -2, 0, 0})}, axis_attr(0));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{7, 5, 3, 4, 2, 3}));
  // Indices smaller than data on the other axis, axis counted from the end, i64 data.
  r = run_op("GatherElements", {make_tensor<int64_t>({2, 3}, {10, 11, 12, 13, 14, 15}),
                                make_tensor<int64_t>({1, 4}, {2, -1, 0, 0})},
             axis_attr(-1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{12, 12, 10, 10}));
  // Empty indices give an empty output.
  r = run_op("GatherElements", {nine, make_tensor<int64_t>({0, 3}, {})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  EXPECT_EQ(r.outputs[0].shape, (V{0, 3}));
}

TEST(GatherElements, RandomSweep) {
  std::mt19937 rng(2718);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    const V shape = random_shape(rng, rank, 5);
    const int64_t axis = static_cast<int64_t>(rng() % rank);
    V idx_shape(shape.size());
    for (int k = 0; k < rank; ++k)  // at most data's size off the axis; any size on it
      idx_shape[k] = k == axis ? 1 + static_cast<int64_t>(rng() % 4) : 1 + static_cast<int64_t>(rng() % shape[k]);
    int64_t n = 1;
    for (int64_t d : idx_shape) n *= d;
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (auto& v : idx) v = static_cast<int64_t>(rng() % (2 * shape[axis])) - shape[axis];  // [-D, D)
    Tensor data = random_tensor(rng, dtypes[iter % 4], shape);
    Tensor indices = make_tensor<int64_t>(idx_shape, idx);
    if (iter % 3 == 1) indices = make_tensor<int32_t>(idx_shape, std::vector<int32_t>(idx.begin(), idx.end()));
    SlotRun s = run_op_in_slots("GatherElements", {data, indices}, axis_attr(rng() % 2 ? axis : axis - rank));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk);
    ASSERT_EQ(s.exact.outputs[0].shape, idx_shape);
    ASSERT_EQ(s.exact.outputs[0].dtype, data.dtype);
    expect_picked(s.exact.outputs[0], data, reference(shape, idx_shape, idx, axis),
                  "gather_elements " + std::to_string(iter));
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact) << iter;
    EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << iter;
  }
}

TEST(GatherElements, Errors) {
  Tensor data = make_tensor<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor idx = make_tensor<int64_t>({1, 1}, {0});
  EXPECT_TRUE(has_text(run_op("GatherElements", {data}).status,
                       "node 'test' (GatherElements): expects 2 inputs, got 1"));
  EXPECT_TRUE(has_text(run_op("GatherElements", {data, make_tensor<float>({1, 1}, {0})}).status,
                       "indices input #1 has dtype f32, expected i64 or i32"));
  EXPECT_TRUE(has_text(run_op("GatherElements", {data, make_tensor<int64_t>({1}, {0})}).status,
                       "indices [1] must have the rank of data [3, 2] (2)"));
  EXPECT_TRUE(has_text(run_op("GatherElements", {make_tensor<float>({}, {1}), make_tensor<int64_t>({}, {0})}).status,
                       "cannot gather from a scalar (rank 0)"));
  EXPECT_TRUE(has_text(run_op("GatherElements", {data, idx}, axis_attr(2)).status, "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("GatherElements", {data, idx}, axis_attr(-3)).status, "axis -3 is out of range for rank 2"));
  // Off the axis, indices may not be longer than data.
  EXPECT_TRUE(has_text(run_op("GatherElements", {data, make_tensor<int64_t>({1, 3}, {0, 0, 0})}).status,
                       "size 2 must be at least 3 for axis 1 of indices [1, 3] and data [3, 2]"));
  // Constant indices are checked at export.
  EXPECT_TRUE(has_text(run_op("GatherElements", {data, make_tensor<int64_t>({1, 2}, {0, 3})}).status,
                       "size 3 must be at least 4 for index 3 on axis 0 of [3, 2]"));
  EXPECT_TRUE(has_text(run_op("GatherElements", {data, make_tensor<int32_t>({1, 1}, {-3})}, axis_attr(1)).status,
                       "size 2 must be at least 3 for index -3 on axis 1 of [3, 2]"));

  // Run-time indices out of range: the kernel reports it instead of reading out of bounds.
  for (int64_t bad : {3, -4, 100}) {
    std::vector<Tensor> out(1);
    out[0].shape = {1, 2};
    EXPECT_EQ(run_kernel("GatherElements", {data, make_tensor<int64_t>({1, 2}, {0, bad})}, &out),
              kernels::KernelStatus::kInvalidValue)
        << bad;
    EXPECT_EQ(run_kernel("GatherElements", {data, make_tensor<int32_t>({1, 2}, {static_cast<int32_t>(bad), 0})}, &out),
              kernels::KernelStatus::kInvalidValue)
        << bad;
    EXPECT_EQ(out[0].bytes, std::vector<unsigned char>(8, 0xCD)) << "no partial output";
  }
  // Operands that bind would have refused are refused, not overrun.
  std::vector<Tensor> out(1);
  out[0].shape = {1, 3};
  EXPECT_EQ(run_kernel("GatherElements", {data, make_tensor<int64_t>({1, 3}, {0, 0, 0})}, &out),
            kernels::KernelStatus::kInvalidValue);
}

TEST(GatherElementsSymbolic, ShapesGuardsAndRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  // torch.gather(scores [batch, seq, 4], 2, ids [batch, seq, 2]): provably fits.
  SymResult r = infer(p, "GatherElements",
                      {sym_input(DType::kF32, {s.batch, s.seq, s.c(4)}), sym_input(DType::kI64, {s.batch, s.seq, s.c(2)})},
                      axis_attr(2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 2]");
  EXPECT_TRUE(r.guards.empty());
  // The gathered axis may have any size; a longer axis elsewhere is guarded.
  SymResult g = infer(p, "GatherElements",
                      {sym_input(DType::kF32, {s.batch, s.c(6)}), sym_input(DType::kI32, {s.c(3), s.seq})}, axis_attr(1));
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(g.shape, "[3, seq]");
  EXPECT_EQ(guards_text(p, g), "batch >= 3");
  EXPECT_EQ(g.guards[0].context, "for axis 0 of indices [3, seq] and data [batch, 6]");
  EXPECT_TRUE(guard_holds(p, g.guards[0], {3, 1}));
  EXPECT_FALSE(guard_holds(p, g.guards[0], {2, 1}));
  // Never satisfiable: an export error.
  EXPECT_TRUE(has_text(infer(p, "GatherElements",
                             {sym_input(DType::kF32, {s.batch, s.c(6)}), sym_input(DType::kI64, {s.c(9), s.c(1)})},
                             axis_attr(1))
                           .status,
                       "size batch must be at least 9"));

  std::mt19937 rng(77);
  for (V dims : {V{1, 1}, V{3, 7}, V{2, 100}, V{8, 512}}) {
    const V data_shape{dims[0], dims[1], 4}, idx_shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(idx_shape, (V{dims[0], dims[1], 2}));
    std::vector<int64_t> ids(static_cast<size_t>(dims[0] * dims[1] * 2));
    for (auto& v : ids) v = static_cast<int64_t>(rng() % 8) - 4;
    Tensor data = random_tensor(rng, DType::kF32, data_shape);
    // Slots sized for the bound (8 x 512 x 4 floats), far above these shapes.
    SlotRun run = run_op_in_slots("GatherElements", {data, make_tensor<int64_t>(idx_shape, ids)}, axis_attr(2),
                                  8 * 512 * 4 * 4);
    ASSERT_TRUE(run.exact.status.ok()) << run.exact.status.message();
    ASSERT_EQ(run.exact.outputs[0].shape, idx_shape);
    ASSERT_EQ(run.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(run.tails_intact);
    expect_picked(run.outputs[0], data, reference(data_shape, idx_shape, ids, 2), "at seq " + std::to_string(dims[1]));
  }
}

}  // namespace
}  // namespace kiln::testing
