// ScatterND: the ONNX examples, every reduction, a seeded sweep of ranks, index depths and
// reductions against index arithmetic written here (also inside oversized slots), errors,
// and symbolic shapes run far below the bound.
#include <gtest/gtest.h>

#include <algorithm>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore reduction(const char* r) { return core::AttrStore().set_str("reduction", r); }

std::vector<float> iota(int64_t n, float start = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST(ScatterND, OnnxExamples) {
  Tensor data = make_tensor<float>({8}, iota(8));
  Tensor idx = make_tensor<int64_t>({4, 1}, {4, 3, 1, 7});
  Tensor upd = make_tensor<float>({4}, {9, 10, 11, 12});
  OpResult r = run_op("ScatterND", {data, idx, upd});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 11, 3, 10, 9, 6, 7, 12}));
  r = run_op("ScatterND", {data, idx, upd}, reduction("add"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 13, 3, 14, 14, 6, 7, 20}));
  r = run_op("ScatterND", {data, idx, upd}, reduction("mul"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 22, 3, 40, 45, 6, 7, 96}));
  // Whole slices: data [4, 4, 4], indices [[0], [2]], updates [2, 4, 4].
  Tensor cube = make_tensor<float>({4, 4, 4}, iota(64, 0.f));
  Tensor slices = make_tensor<float>({2, 4, 4}, iota(32, 100.f));
  r = run_op("ScatterND", {cube, make_tensor<int64_t>({2, 1}, {0, 2}), slices});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  std::vector<float> want = iota(64, 0.f);
  for (int i = 0; i < 16; ++i) {
    want[i] = 100.f + static_cast<float>(i);
    want[32 + i] = 116.f + static_cast<float>(i);
  }
  EXPECT_EQ(r.outputs[0].values<float>(), want);
  // A negative index counts from the end; max and min.
  r = run_op("ScatterND", {data, make_tensor<int64_t>({2, 1}, {-1, 0}), make_tensor<float>({2}, {5, 5})},
             reduction("min"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 5}));
  r = run_op("ScatterND", {data, make_tensor<int64_t>({1, 1}, {-8}), make_tensor<float>({1}, {5})}, reduction("max"));
  EXPECT_EQ(r.outputs[0].values<float>()[0], 5.f);
}

TEST(ScatterND, RandomSweep) {
  std::mt19937 rng(1313);
  const char* reductions[] = {"none", "add", "mul", "max", "min"};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    const V dshape = random_shape(rng, rank, 4);
    const int64_t k = 1 + static_cast<int64_t>(rng() % rank);
    V prefix = random_shape(rng, static_cast<int>(rng() % 3), 3);
    V ishape = prefix;
    ishape.push_back(k);
    V ushape = prefix;
    ushape.insert(ushape.end(), dshape.begin() + k, dshape.end());
    int64_t tuples = 1, slice = 1;
    for (int64_t d : prefix) tuples *= d;
    for (size_t a = static_cast<size_t>(k); a < dshape.size(); ++a) slice *= dshape[a];
    V ix(static_cast<size_t>(tuples * k));
    for (int64_t t = 0; t < tuples; ++t)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t size = dshape[j];
        ix[t * k + j] = static_cast<int64_t>(rng() % (2 * size)) - size;  // [-size, size)
      }
    const char* red = reductions[iter % 5];
    const bool ints = iter % 3 == 0;
    auto small_ints = [&](const V& shape) {  // products of a few stay exact in double
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<int64_t> v(static_cast<size_t>(n));
      for (auto& x : v) x = static_cast<int64_t>(rng() % 7) - 3;
      return make_tensor<int64_t>(shape, v);
    };
    Tensor data = ints ? small_ints(dshape) : random_f32(rng, dshape, -3, 3);
    Tensor upd = ints ? small_ints(ushape) : random_f32(rng, ushape, -3, 3);
    SlotRun s = run_op_in_slots("ScatterND", {data, make_tensor<int64_t>(ishape, ix), upd}, reduction(red));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk);
    // Reference: apply each tuple's slice in order, in double.
    std::vector<double> want(static_cast<size_t>(data.numel()));
    for (int64_t e = 0; e < data.numel(); ++e) want[e] = data.at(e);
    const V strides = strides_of(dshape);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t base = 0;
      for (int64_t j = 0; j < k; ++j) base += (ix[t * k + j] + (ix[t * k + j] < 0 ? dshape[j] : 0)) * strides[j];
      for (int64_t e = 0; e < slice; ++e) {
        double& d = want[base + e];
        const double u = upd.at(t * slice + e);
        const std::string op = red;
        d = op == "none" ? u : op == "add" ? d + u : op == "mul" ? d * u : op == "max" ? std::max(d, u) : std::min(d, u);
      }
    }
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, dshape);
    for (int64_t e = 0; e < y.numel(); ++e)
      ASSERT_NEAR(y.at(e), want[e], 1e-4 * (1 + std::abs(want[e]))) << "iter " << iter << " (" << red << ") at " << e;
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(ScatterND, Errors) {
  Tensor data = make_tensor<float>({2, 3}, iota(6));
  Tensor idx = make_tensor<int64_t>({1, 1}, {1});
  Tensor upd = make_tensor<float>({1, 3}, {7, 8, 9});
  EXPECT_TRUE(has_text(run_op("ScatterND", {data, make_tensor<int32_t>({1, 1}, {1}), upd}).status,
                       "node 'test' (ScatterND): input #1 has dtype i32, expected i64"));
  EXPECT_TRUE(has_text(run_op("ScatterND", {data, idx, make_tensor<int64_t>({1, 3}, {1, 2, 3})}).status,
                       "updates have dtype i64 but data has f32"));
  EXPECT_TRUE(has_text(run_op("ScatterND", {data, make_tensor<int64_t>({1, 3}, {0, 0, 0}), upd}).status,
                       "indices [1, 3] address 3 axes of data [2, 3], expected 1..2"));
  EXPECT_TRUE(has_text(run_op("ScatterND", {data, idx, make_tensor<float>({3}, {7, 8, 9})}).status,
                       "updates [3] must be [1, 3] (indices.shape[:-1] + data.shape[1:])"));
  EXPECT_TRUE(has_text(run_op("ScatterND", {data, idx, make_tensor<float>({1, 2}, {7, 8})}).status,
                       "sizes 2 and 3 must be equal (updates [1, 2] must be [1, 3]"));
  EXPECT_TRUE(has_text(run_op("ScatterND", {data, idx, upd}, reduction("mean")).status,
                       "reduction 'mean' is not supported (none, add, mul, max, min)"));
  Tensor flags = make_tensor<bool>({2}, {true, false});
  EXPECT_TRUE(has_text(run_op("ScatterND", {flags, idx, make_tensor<bool>({1}, {false})}, reduction("add")).status,
                       "bool data supports reduction none only"));
  // Indices outside [-size, size) fail the run, not the shape function.
  for (int64_t bad : {2, -3}) {
    OpResult r = run_op("ScatterND", {data, make_tensor<int64_t>({1, 1}, {bad}), upd});
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(r.kernel, kernels::KernelStatus::kInvalidValue) << bad;
  }
}

TEST(ScatterNDSymbolic, ShapesAndRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  // data [batch, seq, 4], rows picked by [2, 2] index pairs, updates [2, 4].
  auto data = sym_input(DType::kF32, {s.batch, s.seq, s.c(4)});
  SymResult r = infer(p, "ScatterND", {data, sym_input(DType::kI64, {s.c(2), s.c(2)}), sym_input(DType::kF32, {s.c(2), s.c(4)})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 4]");
  EXPECT_TRUE(r.guards.empty());
  // Whole rows of a symbolic axis: updates must match it, which export guards.
  SymResult g = infer(p, "ScatterND", {data, sym_input(DType::kI64, {s.c(3), s.c(1)}), sym_input(DType::kF32, {s.c(3), s.seq, s.c(4)})});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_TRUE(g.guards.empty());
  SymResult bad = infer(p, "ScatterND", {data, sym_input(DType::kI64, {s.c(3), s.c(1)}), sym_input(DType::kF32, {s.c(3), s.c(5), s.c(4)})});
  ASSERT_TRUE(bad.status.ok()) << bad.status.message();
  ASSERT_EQ(bad.guards.size(), 1u);  // seq == 5
  std::mt19937 rng(3);
  for (V dims : {V{1, 1}, V{2, 3}, V{8, 512}}) {
    Tensor d = random_f32(rng, {dims[0], dims[1], 4});
    Tensor idx = make_tensor<int64_t>({2, 2}, {dims[0] - 1, 0, 0, dims[1] - 1});
    Tensor u = make_tensor<float>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kF32;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("ScatterND", {d, idx, u}, &out), kernels::KernelStatus::kOk);
    std::vector<float> want = d.values<float>();
    const int64_t row0 = ((dims[0] - 1) * dims[1] + 0) * 4, row1 = (0 * dims[1] + dims[1] - 1) * 4;
    for (int e = 0; e < 4; ++e) want[row0 + e] = 1.f + static_cast<float>(e);
    for (int e = 0; e < 4; ++e) want[row1 + e] = 5.f + static_cast<float>(e);
    EXPECT_EQ(out[0].values<float>(), want) << dims[0] << "x" << dims[1];
  }
}

}  // namespace
}  // namespace kiln::testing
