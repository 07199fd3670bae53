// Expand: hand cases, a seeded sweep of bidirectional broadcasts and dtypes against index
// math written here (also inside oversized slots), errors, and symbolic target shapes.
#include <gtest/gtest.h>

#include <algorithm>

#include "bound_slot_util.h"
#include "fold_test_util.h"
#include "guard_text_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;


/// For each element of `out`, the element of an operand of shape `in` it reads.
std::vector<int64_t> broadcast_from(const V& out, const V& in) {
  const size_t lead = out.size() - in.size();
  const V os = strides_of(out), is = strides_of(in);
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<int64_t> from(n, 0);
  for (int64_t e = 0; e < n; ++e)
    for (size_t k = 0; k < in.size(); ++k)
      if (in[k] != 1) from[e] += e / os[k + lead] % out[k + lead] * is[k];
  return from;
}

TEST(Expand, HandComputed) {
  Tensor x = make_tensor<float>({3, 1}, {1, 2, 3});
  OpResult r = run_op("Expand", {x, i64s({2, 1, 4})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (V{2, 3, 4}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                                              1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}));
  Tensor y = make_tensor<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  r = run_op("Expand", {y, i64s({1, 1})});  // 1s keep the input's dims
  EXPECT_EQ(r.outputs[0].shape, (V{2, 3}));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), y.values<int64_t>());
  r = run_op("Expand", {y, i64s({3})});  // a shorter shape
  EXPECT_EQ(r.outputs[0].shape, (V{2, 3}));
  r = run_op("Expand", {make_tensor<bool>({}, {true}), i64s({2})});
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{1, 1}));
  r = run_op("Expand", {make_tensor<float>({1}, {5}), i64s({0})});
  EXPECT_EQ(r.outputs[0].shape, (V{0}));
  r = run_op("Expand", {y, make_tensor<int32_t>({3}, {2, 1, 3})});
  EXPECT_EQ(r.outputs[0].shape, (V{2, 2, 3}));
}

TEST(Expand, RandomSweep) {
  std::mt19937 rng(123);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    V out = random_shape(rng, rank, 4);
    V in(out.begin() + static_cast<int64_t>(rng() % rank), out.end());
    V target(out.begin() + static_cast<int64_t>(rng() % rank), out.end());
    for (auto& d : in)
      if (rng() % 2) d = 1;
    for (size_t k = 0; k < target.size(); ++k)  // a 1 where the input has the dim
      if (rng() % 3 == 0) target[k] = 1;
    V want(std::max(in.size(), target.size()));
    for (size_t k = 0; k < want.size(); ++k) {
      const int64_t a = k + in.size() >= want.size() ? in[k + in.size() - want.size()] : 1;
      const int64_t b = k + target.size() >= want.size() ? target[k + target.size() - want.size()] : 1;
      want[k] = a == 1 ? b : a;
    }
    Tensor x = random_tensor(rng, dtypes[iter % 4], in);
    SlotRun s = run_op_in_slots("Expand", {x, i64s(target)});
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, want) << "iter " << iter;
    expect_picked(s.exact.outputs[0], x, broadcast_from(want, in), "iter " + std::to_string(iter));
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes);
  }
}

TEST(Expand, Errors) {
  Tensor x = make_tensor<float>({3}, {1, 2, 3});
  EXPECT_TRUE(has_text(run_op("Expand", {x, i64s({4})}).status, "node 'test' (Expand): cannot broadcast [3] with [4]"));
  EXPECT_TRUE(has_text(run_op("Expand", {x, i64s({-1, 3})}).status, "shape [-1, 3] element 0 (-1) is negative"));
  EXPECT_TRUE(has_text(run_op("Expand", {x, make_tensor<float>({1}, {3})}).status,
                       "shape input #1 has dtype f32, expected i64"));
  EXPECT_TRUE(has_text(run_op("Expand", {x, make_tensor<int64_t>({1, 1}, {3})}).status,
                       "shape input #1 must be 1-D, got rank 2"));
  SymPool s;
  auto unknown = sym_input(DType::kI64, {s.c(1)});
  EXPECT_TRUE(has_text(infer(s.pool, "Expand", {sym_input(DType::kF32, {s.seq}), unknown}).status,
                       "shape input #1 is not known at export"));
  // The kernel refuses an output that is not the broadcast of its actual operands.
  std::vector<Tensor> out(1);
  out[0].shape = {2, 4};
  EXPECT_EQ(run_kernel("Expand", {x, i64s({2, 3})}, &out), kernels::KernelStatus::kInvalidValue);
}

TEST(ExpandSymbolic, ShapesGuardsAndRunsBelowTheBound) {
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult r = infer(p, "Expand", {sym_input(DType::kF32, {s.c(1), s.seq}), sym_values_input(p, {s.batch, s.c(1)})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq]");
  EXPECT_TRUE(r.guards.empty());
  SymResult g = infer(p, "Expand", {sym_input(DType::kF32, {s.c(3)}), sym_values_input(p, {s.batch, s.seq})});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(g.shape, "[batch, 3]");
  EXPECT_EQ(guards_text(p, g), "3 == seq");
  auto maybe_negative = sym_values_input(p, {p.sub(s.seq, s.c(2))});
  EXPECT_TRUE(has_text(infer(p, "Expand", {sym_input(DType::kF32, {s.c(3)}), maybe_negative}).status,
                       "element 0 (seq - 2) may be negative"));

  std::mt19937 rng(4);
  for (V dims : {V{1, 1}, V{3, 9}, V{8, 512}}) {
    Tensor x = random_tensor(rng, DType::kF32, {1, dims[1]});
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(p, r.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("Expand", {x, i64s({dims[0], 1})}, &out), kernels::KernelStatus::kOk);
    expect_picked(out[0], x, broadcast_from(out[0].shape, x.shape), "expand below the bound");
  }
}

}  // namespace
}  // namespace kiln::testing
