// Trilu: the ONNX examples (upper and lower, positive and negative k, k beyond the matrix),
// a seeded sweep over batch shapes, k and dtypes against the (i, j) rule written here (also
// inside oversized slots), errors, and symbolic shapes run far below the bound.
#include <gtest/gtest.h>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore upper(int64_t u) { return core::AttrStore().set_int("upper", u); }
Tensor k_scalar(int64_t k) { return make_tensor<int64_t>({}, {k}); }

TEST(Trilu, OnnxExamples) {
  const std::vector<float> x = {4, 7, 3, 7, 9, 1, 2, 8, 6, 9, 9, 4, 0, 8, 7, 4, 3, 4, 2, 4};  // [4, 5]
  Tensor t = make_tensor<float>({4, 5}, x);
  OpResult r = run_op("Trilu", {t});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{4, 7, 3, 7, 9, 0, 2, 8, 6, 9, 0, 0, 0, 8, 7, 0, 0, 0, 2, 4}));
  r = run_op("Trilu", {t, k_scalar(-1)});
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{4, 7, 3, 7, 9, 1, 2, 8, 6, 9, 0, 4, 0, 8, 7, 0, 0, 4, 2, 4}));
  r = run_op("Trilu", {t}, upper(0));
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{4, 0, 0, 0, 0, 1, 2, 0, 0, 0, 9, 4, 0, 0, 0, 4, 3, 4, 2, 0}));
  r = run_op("Trilu", {t, k_scalar(1)}, upper(0));
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{4, 7, 0, 0, 0, 1, 2, 8, 0, 0, 9, 4, 0, 8, 0, 4, 3, 4, 2, 4}));
  r = run_op("Trilu", {t, k_scalar(6)});  // beyond the last column: all zero
  EXPECT_EQ(r.outputs[0].values<float>(), std::vector<float>(20, 0.f));
  r = run_op("Trilu", {t, k_scalar(-7)}, upper(0));  // before the first column: all zero
  EXPECT_EQ(r.outputs[0].values<float>(), std::vector<float>(20, 0.f));
}

TEST(Trilu, RandomSweep) {
  std::mt19937 rng(1414);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    V shape = random_shape(rng, 2 + static_cast<int>(rng() % 3), 5);
    const int64_t rows = shape[shape.size() - 2], cols = shape.back();
    const int64_t k = static_cast<int64_t>(rng() % 13) - 6;
    const int64_t up = rng() % 2;
    Tensor x = random_tensor(rng, dtypes[iter % 4], shape);
    const bool given = rng() % 3 != 0;  // else k is omitted, which means 0
    SlotRun s = given ? run_op_in_slots("Trilu", {x, k_scalar(k)}, upper(up)) : run_op_in_slots("Trilu", {x}, upper(up));
    const int64_t kk = given ? k : 0;
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, shape);
    for (int64_t e = 0; e < y.numel(); ++e) {
      const int64_t i = e / cols % rows, j = e % cols;
      const bool keep = up ? j - i >= kk : j - i <= kk;
      ASSERT_EQ(y.at(e), keep ? x.at(e) : 0.0) << "iter " << iter << " at " << i << "," << j << " k " << kk;
    }
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(Trilu, Errors) {
  EXPECT_TRUE(has_text(run_op("Trilu", {make_tensor<float>({3}, {1, 2, 3})}).status,
                       "node 'test' (Trilu): input [3] must have rank >= 2"));
  Tensor m = make_tensor<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(has_text(run_op("Trilu", {m, make_tensor<int32_t>({}, {1})}).status, "input #1 has dtype i32, expected i64"));
  EXPECT_TRUE(has_text(run_op("Trilu", {m, make_tensor<int64_t>({2}, {1, 2})}).status, "k [2] must be a scalar"));
}

TEST(TriluSymbolic, CausalMaskBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult r = infer(p, "Trilu", {sym_input(DType::kF32, {s.batch, s.seq, s.seq})}, upper(0));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, seq]");
  for (V dims : {V{1, 1}, V{2, 3}, V{1, 40}}) {
    const int64_t q = dims[1];
    std::vector<float> ones(static_cast<size_t>(dims[0] * q * q), 1.f);
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kF32;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Trilu", {make_tensor<float>({dims[0], q, q}, ones)}, &out, upper(0)), kernels::KernelStatus::kOk);
    for (int64_t b = 0; b < dims[0]; ++b)
      for (int64_t i = 0; i < q; ++i)
        for (int64_t j = 0; j < q; ++j) EXPECT_EQ(out[0].values<float>()[(b * q + i) * q + j], j <= i ? 1.f : 0.f);
  }
}

}  // namespace
}  // namespace kiln::testing
