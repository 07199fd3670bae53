// Not, And, Or, Xor: truth tables, a seeded broadcast sweep against logic written here
// (also inside oversized slots), errors, and symbolic shapes.
#include <gtest/gtest.h>

#include <algorithm>

#include "bound_slot_util.h"
#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;
using Bytes = std::vector<unsigned char>;

TEST(Logic, TruthTables) {
  Tensor a = make_tensor<bool>({4}, {false, false, true, true});
  Tensor b = make_tensor<bool>({4}, {false, true, false, true});
  EXPECT_EQ(run_op("And", {a, b}).outputs[0].bytes, (Bytes{0, 0, 0, 1}));
  EXPECT_EQ(run_op("Or", {a, b}).outputs[0].bytes, (Bytes{0, 1, 1, 1}));
  EXPECT_EQ(run_op("Xor", {a, b}).outputs[0].bytes, (Bytes{0, 1, 1, 0}));
  EXPECT_EQ(run_op("Not", {a}).outputs[0].bytes, (Bytes{1, 1, 0, 0}));
  Tensor odd = make_tensor<bool>({2}, {true, true});
  odd.bytes = {2, 0xFF};  // any non-zero byte is true
  EXPECT_EQ(run_op("Xor", {odd, make_tensor<bool>({1}, {true})}).outputs[0].bytes, (Bytes{0, 0}));
  EXPECT_EQ(run_op("Not", {odd}).outputs[0].bytes, (Bytes{0, 0}));
  OpResult r = run_op("And", {make_tensor<bool>({2, 1}, {true, false}), make_tensor<bool>({3}, {true, false, true})});
  EXPECT_EQ(r.outputs[0].shape, (V{2, 3}));
  EXPECT_EQ(r.outputs[0].bytes, (Bytes{1, 0, 1, 0, 0, 0}));
}

TEST(Logic, RandomBroadcastSweep) {
  std::mt19937 rng(31);
  const char* ops[] = {"And", "Or", "Xor", "Not"};
  for (int iter = 0; iter < 300; ++iter) {
    const std::string op = ops[iter % 4];
    const int rank = static_cast<int>(rng() % 5);
    V out = random_shape(rng, rank, 4);
    V sa = op == "Not" ? out : broadcastable_shape(rng, out), sb = broadcastable_shape(rng, out);
    Tensor a = random_tensor(rng, DType::kBool, sa), b = random_tensor(rng, DType::kBool, sb);
    SlotRun s = op == "Not" ? run_op_in_slots("Not", {a}) : run_op_in_slots(op.c_str(), {a, b});
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    const V want = op == "Not" ? sa : broadcast_shape({&sa, &sb});
    ASSERT_EQ(y.shape, want);
    auto src = [&](const V& in, int64_t e) { return broadcast_source(want, in, e); };
    for (int64_t e = 0; e < y.numel(); ++e) {
      const bool x = a.bytes[src(sa, e)] != 0, z = op == "Not" ? false : b.bytes[src(sb, e)] != 0;
      const bool expect = op == "And" ? x && z : op == "Or" ? x || z : op == "Xor" ? x != z : !x;
      ASSERT_EQ(y.bytes[e], expect ? 1 : 0) << op << " iter " << iter << " at " << e;
    }
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
  }
}

TEST(Logic, Errors) {
  Tensor b = make_tensor<bool>({2}, {true, false});
  Tensor i = make_tensor<int64_t>({2}, {1, 0});
  EXPECT_TRUE(has_text(run_op("And", {b, i}).status, "node 'test' (And): input #1 has dtype i64, expected bool"));
  EXPECT_TRUE(has_text(run_op("Not", {i}).status, "node 'test' (Not): input #0 has dtype i64, expected bool"));
  EXPECT_TRUE(has_text(run_op("Or", {b, make_tensor<bool>({3}, {true, true, true})}).status, "cannot broadcast"));
  EXPECT_TRUE(has_text(run_op("Xor", {b}).status, "expects 2 inputs, got 1"));
}

TEST(LogicSymbolic, ShapesRunBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult r = infer(p, "Or", {sym_input(DType::kBool, {s.batch, s.c(1)}), sym_input(DType::kBool, {s.seq})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq]");
  EXPECT_EQ(infer(p, "Not", {sym_input(DType::kBool, {s.seq, s.batch})}).shape, "[seq, batch]");
  std::mt19937 rng(2);
  for (V dims : {V{1, 1}, V{5, 3}, V{8, 512}}) {
    Tensor a = random_tensor(rng, DType::kBool, {dims[0], 1}), b = random_tensor(rng, DType::kBool, {dims[1]});
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kBool;
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Or", {a, b}, &out), kernels::KernelStatus::kOk);
    for (int64_t i = 0; i < dims[0]; ++i)
      for (int64_t j = 0; j < dims[1]; ++j) ASSERT_EQ(out[0].bytes[i * dims[1] + j], (a.bytes[i] | b.bytes[j]) ? 1 : 0);
  }
}

}  // namespace
}  // namespace kiln::testing
