// Add, Sub, Mul, Div, Pow, Max, Min: hand cases, seeded broadcast sweep against a double
// reference, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "op_test_util.h"

namespace kiln::testing {
namespace {

TEST(Binary, HandComputedBroadcast) {
  Tensor a = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make_tensor<float>({3}, {10, 20, 30});
  OpResult r = run_op("Add", {a, b});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));

  Tensor col = make_tensor<float>({2, 1}, {2, 4});
  r = run_op("Div", {a, col});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0.5f, 1, 1.5f, 1, 1.25f, 1.5f}));
}

TEST(Binary, IntegerOps) {
  Tensor a = make_tensor<int64_t>({4}, {7, -7, 3, 2});
  Tensor b = make_tensor<int64_t>({4}, {2, 2, 3, 10});
  EXPECT_EQ(run_op("Div", {a, b}).outputs[0].values<int64_t>(), (std::vector<int64_t>{3, -3, 1, 0}));
  EXPECT_EQ(run_op("Pow", {a, b}).outputs[0].values<int64_t>(), (std::vector<int64_t>{49, 49, 27, 1024}));
  EXPECT_EQ(run_op("Max", {a, b}).outputs[0].values<int64_t>(), (std::vector<int64_t>{7, 2, 3, 10}));
  Tensor z = make_tensor<int64_t>({1}, {0});
  EXPECT_EQ(run_op("Div", {a, z}).kernel, kernels::KernelStatus::kInvalidValue);
}

double reference(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Pow") return std::pow(a, b);
  if (op == "Max") return std::max(a, b);
  return std::min(a, b);
}

TEST(Binary, RandomBroadcastSweep) {
  std::mt19937 rng(1234);
  const char* ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};
  for (int iter = 0; iter < 200; ++iter) {
    std::string op = ops[iter % 7];
    int rank = 1 + static_cast<int>(rng() % 5);
    std::vector<int64_t> out = random_shape(rng, rank, 6);
    // Each operand drops leading axes and sets some axes to 1.
    std::vector<int64_t> sa = broadcastable_shape(rng, out), sb = broadcastable_shape(rng, out);
    float lo = op == "Pow" ? 0.1f : -2.f;
    Tensor a = random_f32(rng, sa, lo, 2.f), b = random_f32(rng, sb, op == "Div" ? 0.5f : lo, 2.f);
    OpResult r = run_op(op.c_str(), {a, b});
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    const Tensor& y = r.outputs[0];
    // Reference: the broadcast output shape and values from first principles.
    const std::vector<int64_t> expect = broadcast_shape({&sa, &sb});
    ASSERT_EQ(y.shape, expect);
    auto index_into = [&](const std::vector<int64_t>& s, int64_t flat) { return broadcast_source(expect, s, flat); };
    for (int64_t i = 0; i < y.numel(); ++i) {
      double want = reference(op, a.at(index_into(sa, i)), b.at(index_into(sb, i)));
      ASSERT_NEAR(y.at(i), want, 1e-5 * (1 + std::abs(want))) << op << " at " << i;
    }
  }
}

TEST(Binary, Errors) {
  Tensor a = make_tensor<float>({2, 3}, std::vector<float>(6, 1));
  Tensor b = make_tensor<float>({2, 4}, std::vector<float>(8, 1));
  OpResult r = run_op("Mul", {a, b});
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("cannot broadcast"), std::string::npos) << r.status.message();
  Tensor i = make_tensor<int64_t>({2, 3}, std::vector<int64_t>(6, 1));
  r = run_op("Add", {a, i});
  EXPECT_NE(r.status.message().find("different dtypes f32 and i64"), std::string::npos) << r.status.message();
  EXPECT_FALSE(run_op("Add", {a}).status.ok());
}

}  // namespace
}  // namespace kiln::testing
