// Equal, Less, Greater, LessOrEqual, GreaterOrEqual: hand cases, a seeded broadcast sweep
// over dtypes against comparisons written here (also inside oversized slots), errors, and
// symbolic shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bound_slot_util.h"
#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;
using Bytes = std::vector<unsigned char>;

Bytes cmp(const char* op, const Tensor& a, const Tensor& b) {
  OpResult r = run_op(op, {a, b});
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dtype, DType::kBool);
  return r.outputs.empty() ? Bytes{} : r.outputs[0].bytes;
}

TEST(Compare, HandComputed) {
  Tensor a = make_tensor<float>({4}, {1, 2, 3, -0.f});
  Tensor b = make_tensor<float>({4}, {2, 2, 2, 0});
  EXPECT_EQ(cmp("Equal", a, b), (Bytes{0, 1, 0, 1}));
  EXPECT_EQ(cmp("Less", a, b), (Bytes{1, 0, 0, 0}));
  EXPECT_EQ(cmp("Greater", a, b), (Bytes{0, 0, 1, 0}));
  EXPECT_EQ(cmp("LessOrEqual", a, b), (Bytes{1, 1, 0, 1}));
  EXPECT_EQ(cmp("GreaterOrEqual", a, b), (Bytes{0, 1, 1, 1}));
  Tensor n = make_tensor<float>({1}, {std::nanf("")});
  EXPECT_EQ(cmp("Equal", n, n), (Bytes{0}));
  Tensor i = make_tensor<int64_t>({2, 1}, {5, -1}), j = make_tensor<int64_t>({3}, {-1, 5, 9});
  EXPECT_EQ(cmp("Equal", i, j), (Bytes{0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(cmp("Less", make_tensor<int32_t>({}, {3}), make_tensor<int32_t>({2}, {2, 4})), (Bytes{0, 1}));
  Tensor t = make_tensor<bool>({2}, {true, false});
  Tensor u = make_tensor<bool>({2}, {true, true});
  u.bytes[0] = 2;  // any non-zero byte is true
  EXPECT_EQ(cmp("Equal", t, u), (Bytes{1, 0}));
}

template <typename F>
bool holds(const std::string& op, F a, F b) {
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Greater") return a > b;
  if (op == "LessOrEqual") return a <= b;
  return a >= b;
}

TEST(Compare, RandomBroadcastSweep) {
  std::mt19937 rng(99);
  const char* ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const DType t = dtypes[iter % 4];
    const std::string op = t == DType::kBool ? "Equal" : ops[iter % 5];
    const int rank = static_cast<int>(rng() % 4);
    V out = random_shape(rng, rank, 4);
    V sa = broadcastable_shape(rng, out), sb = broadcastable_shape(rng, out);
    Tensor a = random_tensor(rng, t, sa), b = random_tensor(rng, t, sb);
    if (t != DType::kBool)  // plenty of ties
      for (int64_t e = 0; e < std::min(a.numel(), b.numel()); e += 2)
        std::memcpy(b.bytes.data() + e * dtype_size(t), a.bytes.data() + e * dtype_size(t), dtype_size(t));
    SlotRun s = run_op_in_slots(op.c_str(), {a, b});
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    const V want = broadcast_shape({&sa, &sb});
    ASSERT_EQ(y.shape, want);
    auto src = [&](const V& in, int64_t e) { return broadcast_source(want, in, e); };
    for (int64_t e = 0; e < y.numel(); ++e) {
      // Exact comparisons in each dtype (doubles hold every i32 and every test i64).
      const bool expect = holds(op, a.at(src(sa, e)), b.at(src(sb, e)));
      ASSERT_EQ(y.bytes[e], expect ? 1 : 0) << op << " iter " << iter << " at " << e;
    }
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(Compare, Errors) {
  Tensor b = make_tensor<bool>({1}, {true});
  Tensor f = make_tensor<float>({2}, {1, 2});
  EXPECT_TRUE(has_text(run_op("Less", {b, b}).status,
                       "node 'test' (Less): does not accept bool operands (only Equal compares bools)"));
  EXPECT_TRUE(has_text(run_op("Equal", {f, make_tensor<int64_t>({2}, {1, 2})}).status,
                       "operands have different dtypes f32 and i64"));
  EXPECT_TRUE(has_text(run_op("Greater", {f, make_tensor<float>({3}, {1, 2, 3})}).status, "cannot broadcast"));
  EXPECT_TRUE(has_text(run_op("Equal", {f}).status, "expects 2 inputs, got 1"));
}

TEST(CompareSymbolic, ShapesRunBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult r =
      infer(p, "GreaterOrEqual", {sym_input(DType::kI64, {s.batch, s.c(1)}), sym_input(DType::kI64, {s.seq})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq]");
  EXPECT_EQ(r.outputs[0].dtype, DType::kBool);
  std::mt19937 rng(1);
  for (V dims : {V{1, 1}, V{5, 3}, V{8, 512}}) {
    Tensor a = random_tensor(rng, DType::kI64, {dims[0], 1}), b = random_tensor(rng, DType::kI64, {dims[1]});
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kBool;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("GreaterOrEqual", {a, b}, &out), kernels::KernelStatus::kOk);
    for (int64_t i = 0; i < dims[0]; ++i)
      for (int64_t j = 0; j < dims[1]; ++j)
        ASSERT_EQ(out[0].bytes[i * dims[1] + j], a.data<int64_t>()[i] >= b.data<int64_t>()[j] ? 1 : 0);
  }
}

}  // namespace
}  // namespace kiln::testing
