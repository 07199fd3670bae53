// Max, Min, Sum, Mean with 1..N inputs: hand cases, a seeded broadcast sweep against a
// double reference (also inside oversized slots), errors, and symbolic shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include <algorithm>
#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;

TEST(Variadic, HandComputed) {
  Tensor a = make_tensor<float>({2, 2}, {1, 5, -3, 0});
  Tensor b = make_tensor<float>({2}, {2, 4});
  Tensor c = make_tensor<float>({}, {3});
  OpResult r = run_op("Max", {a, b, c});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 5, 3, 4}));
  EXPECT_EQ(run_op("Min", {a, b, c}).outputs[0].values<float>(), (std::vector<float>{1, 3, -3, 0}));
  EXPECT_EQ(run_op("Sum", {a, b, c}).outputs[0].values<float>(), (std::vector<float>{6, 12, 2, 7}));
  EXPECT_EQ(run_op("Mean", {a, b, c}).outputs[0].values<float>(), (std::vector<float>{2, 4, 2.f / 3, 7.f / 3}));
  EXPECT_EQ(run_op("Sum", {a}).outputs[0].values<float>(), a.values<float>());  // one input: a copy
  EXPECT_EQ(run_op("Mean", {b, b}).outputs[0].values<float>(), b.values<float>());

  // Broadcast to a shape no single input has.
  Tensor col = make_tensor<int64_t>({2, 1}, {10, 20}), row = make_tensor<int64_t>({3}, {1, 2, 3});
  r = run_op("Sum", {row, col});
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 3}));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{11, 12, 13, 21, 22, 23}));
  Tensor i32 = make_tensor<int32_t>({3}, {-1, 7, 2});
  EXPECT_EQ(run_op("Max", {i32, make_tensor<int32_t>({1}, {2})}).outputs[0].values<int32_t>(),
            (std::vector<int32_t>{2, 7, 2}));
}

double reference(const std::string& op, const std::vector<double>& v) {
  double acc = v[0];
  for (size_t k = 1; k < v.size(); ++k) {
    if (op == "Max") acc = std::max(acc, v[k]);
    else if (op == "Min") acc = std::min(acc, v[k]);
    else acc += v[k];
  }
  return op == "Mean" ? acc / static_cast<double>(v.size()) : acc;
}

// The non-finite rule: NaN wins in Max and Min whichever input holds it (torch.maximum);
// infinities order as numbers.
TEST(Variadic, NanWinsInEitherPosition) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = make_tensor<float>({4}, {nan, 1, -INFINITY, 2});
  Tensor b = make_tensor<float>({4}, {1, nan, 5, INFINITY});
  for (const char* op : {"Max", "Min"}) {
    OpResult r = run_op(op, {a, b, b});
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    const std::vector<float> y = r.outputs[0].values<float>();
    EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1])) << op;
    EXPECT_EQ(y[2], std::string(op) == "Max" ? 5.f : -INFINITY) << op;
    EXPECT_EQ(y[3], std::string(op) == "Max" ? INFINITY : 2.f) << op;
  }
}

TEST(Variadic, RandomBroadcastSweep) {
  std::mt19937 rng(808);
  const char* ops[] = {"Max", "Min", "Sum", "Mean"};
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32};
  for (int iter = 0; iter < 300; ++iter) {
    const std::string op = ops[iter % 4];
    const DType t = op == "Mean" ? DType::kF32 : dtypes[iter % 3];
    const int rank = static_cast<int>(rng() % 5);
    Shape out = random_shape(rng, rank, 5);
    const int n = 1 + static_cast<int>(rng() % 4);
    std::vector<Tensor> ins;
    std::vector<Shape> shapes;
    for (int i = 0; i < n; ++i) {  // each drops leading axes and sets some to 1
      Shape s(out.begin() + static_cast<int64_t>(rng() % (rank + 1)), out.end());
      for (auto& d : s)
        if (rng() % 3 == 0) d = 1;
      shapes.push_back(s);
      ins.push_back(random_tensor(rng, t, s));
    }
    size_t wr = 0;  // the broadcast of all operand shapes
    for (const Shape& s : shapes) wr = std::max(wr, s.size());
    Shape want(wr, 1);
    for (const Shape& s : shapes)
      for (size_t k = 0; k < s.size(); ++k) want[wr - s.size() + k] = std::max(want[wr - s.size() + k], s[k]);
    SlotRun sr = run_op_in_slots(op.c_str(), ins);
    ASSERT_TRUE(sr.exact.status.ok()) << sr.exact.status.message();
    const Tensor& y = sr.exact.outputs[0];
    ASSERT_EQ(y.shape, want) << op;
    ASSERT_EQ(y.dtype, t);
    const Shape os = strides_of(want);
    for (int64_t e = 0; e < y.numel(); ++e) {
      std::vector<double> v;
      for (int i = 0; i < n; ++i) {
        const Shape& s = shapes[i];
        const Shape ss = strides_of(s);
        int64_t off = 0;
        for (size_t k = 0; k < s.size(); ++k) {
          const size_t ko = wr - s.size() + k;
          if (s[k] != 1) off += e / os[ko] % want[ko] * ss[k];
        }
        v.push_back(ins[i].at(off));
      }
      const double expect = reference(op, v);
      ASSERT_NEAR(y.at(e), expect, 1e-5 * (1 + std::abs(expect))) << op << " iter " << iter << " at " << e;
    }
    EXPECT_EQ(sr.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(sr.tails_intact) << op;
    EXPECT_EQ(sr.outputs[0].bytes, y.bytes) << op;
  }
}

TEST(Variadic, Errors) {
  Tensor a = make_tensor<float>({2, 3}, std::vector<float>(6, 1));
  Tensor i = make_tensor<int64_t>({2, 3}, std::vector<int64_t>(6, 1));
  EXPECT_TRUE(has_text(run_op("Sum", {}).status, "node 'test' (Sum): expects at least 1 input, got 0"));
  EXPECT_TRUE(has_text(run_op("Max", {a, a, i}).status,
                       "input #2 has dtype i64 but input #0 has f32; all inputs must share one dtype"));
  EXPECT_TRUE(has_text(run_op("Mean", {i, i}).status, "accepts only f32 operands (ONNX defines Mean for floats)"));
  EXPECT_TRUE(has_text(run_op("Min", {a, make_tensor<float>({4}, {1, 2, 3, 4})}).status, "cannot broadcast"));
  Tensor b = make_tensor<bool>({1}, {true});
  EXPECT_TRUE(has_text(run_op("Sum", {b}).status, "does not accept bool operands"));
  EXPECT_TRUE(has_text(run_op("Max", {a, absent()}).status, "input #1 is required but missing"));
}

TEST(VariadicSymbolic, ShapesGuardsAndRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.c(1), s.seq});
  auto y = sym_input(DType::kF32, {s.c(4), s.c(1)});
  auto z = sym_input(DType::kF32, {s.seq});
  SymResult r = infer(p, "Sum", {x, y, z});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 4, seq]");
  EXPECT_TRUE(r.guards.empty());
  SymResult g = infer(p, "Max", {x, sym_input(DType::kF32, {s.batch, s.c(1), s.c(1)}), y,
                                 sym_input(DType::kF32, {s.c(2), s.c(1), s.c(1)})});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(g.shape, "[2, 4, seq]");
  EXPECT_EQ(guards_text(p, g), "batch == 2");

  std::mt19937 rng(9);
  for (Shape dims : {Shape{1, 1}, Shape{3, 7}, Shape{8, 512}}) {
    std::vector<Tensor> ins = {random_tensor(rng, DType::kF32, {dims[0], 1, dims[1]}),
                               random_tensor(rng, DType::kF32, {4, 1}), random_tensor(rng, DType::kF32, {dims[1]})};
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Mean", ins, &out), kernels::KernelStatus::kOk);
    for (int64_t b = 0; b < dims[0]; ++b)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t q = 0; q < dims[1]; ++q) {
          const double want = (ins[0].at(b * dims[1] + q) + ins[1].at(j) + ins[2].at(q)) / 3;
          ASSERT_NEAR(out[0].at((b * 4 + j) * dims[1] + q), want, 1e-5);
        }
  }
}

}  // namespace
}  // namespace kiln::testing
