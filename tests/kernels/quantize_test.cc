// QuantizeLinear and DequantizeLinear: rounding half to even, saturation, int8 and uint8, per
// tensor and per channel, a seeded sweep against a double-precision reference written here
// (quantize then dequantize within half a quantum), non-finite inputs refused, and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "op_test_util.h"

namespace kiln::testing {
namespace {

template <typename T>
std::vector<T> quantize(const Tensor& x, const Tensor& s, const Tensor& z, const core::AttrStore& a = core::AttrStore()) {
  OpResult r = run_op("QuantizeLinear", {x, s, z}, a);
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  if (r.outputs.empty()) return {};
  EXPECT_EQ(r.outputs[0].dtype, dtype_of<T>());
  return r.outputs[0].values<T>();
}

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturates) {
  Tensor x = make_tensor<float>({10}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 126.5f, 127.5f, 1000.f, -1000.f});
  EXPECT_EQ(quantize<int8_t>(x, make_tensor<float>({}, {1.f}), make_tensor<int8_t>({}, {0})),
            (std::vector<int8_t>{-2, -2, 0, 0, 2, 2, 126, 127, 127, -128}));
  // uint8 with zero point 128: the rounded value plus 128, saturated to [0, 255].
  EXPECT_EQ(quantize<uint8_t>(x, make_tensor<float>({}, {1.f}), make_tensor<uint8_t>({}, {128})),
            (std::vector<uint8_t>{126, 126, 128, 128, 130, 130, 254, 255, 255, 0}));
  // The zero point is added after rounding: 0.5 + 3 -> 0 + 3 (half to even), not round(3.5) = 4.
  EXPECT_EQ(quantize<int8_t>(make_tensor<float>({2}, {0.5f, 1.5f}), make_tensor<float>({}, {1.f}), make_tensor<int8_t>({}, {3})),
            (std::vector<int8_t>{3, 5}));
}

TEST(QuantizeLinear, PerChannelAlongAnAxis) {
  Tensor x = make_tensor<float>({2, 3, 2}, {1, 2, 1, 2, 1, 2, -1, -2, -1, -2, -1, -2});
  Tensor s = make_tensor<float>({3}, {0.5f, 1.f, 2.f});
  Tensor z = make_tensor<int8_t>({3}, {0, 10, -10});
  EXPECT_EQ(quantize<int8_t>(x, s, z, core::AttrStore().set_int("axis", 1)),
            (std::vector<int8_t>{2, 4, 11, 12, -10, -9, -2, -4, 9, 8, -10, -11}));
}

TEST(QuantizeLinear, SweepWithinHalfAQuantumOfTheReference) {
  std::mt19937 rng(23);
  std::normal_distribution<float> g(0.f, 40.f);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3), c = 1 + static_cast<int64_t>(rng() % 4), l = static_cast<int64_t>(rng() % 5);
    std::vector<float> xs(static_cast<size_t>(n * c * l)), scales(static_cast<size_t>(c));
    std::vector<uint8_t> zps(static_cast<size_t>(c));
    for (float& v : xs) v = g(rng);
    for (int64_t k = 0; k < c; ++k) scales[static_cast<size_t>(k)] = 0.05f + 0.5f * static_cast<float>(rng() % 8), zps[static_cast<size_t>(k)] = static_cast<uint8_t>(rng());
    Tensor x = make_tensor<float>({n, c, l}, xs), s = make_tensor<float>({c}, scales), z = make_tensor<uint8_t>({c}, zps);
    const std::vector<uint8_t> q = quantize<uint8_t>(x, s, z, core::AttrStore().set_int("axis", 1));
    ASSERT_EQ(q.size(), xs.size());
    OpResult d = run_op("DequantizeLinear", {make_tensor<uint8_t>({n, c, l}, q), s, z}, core::AttrStore().set_int("axis", 1));
    ASSERT_TRUE(d.status.ok() && d.kernel == kernels::KernelStatus::kOk);
    const std::vector<float> back = d.outputs[0].values<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const size_t ch = i / static_cast<size_t>(l) % static_cast<size_t>(c);
      const double want = std::nearbyint(static_cast<double>(xs[i]) / scales[ch]) + zps[ch];
      const double clamped = std::min(255.0, std::max(0.0, want));
      ASSERT_EQ(q[i], static_cast<uint8_t>(clamped)) << "trial " << trial << " element " << i << " x " << xs[i];
      if (want == clamped) {  // inside the range: dequantized within half a quantum of x
        ASSERT_LE(std::fabs(back[i] - xs[i]), scales[ch] * 0.5f * 1.0001f) << "trial " << trial;
      }
    }
  }
}

TEST(QuantizeLinear, NonFiniteInputsAreRefusedNotSaturated) {
  for (float v : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY}) {
    OpResult r = run_op("QuantizeLinear", {make_tensor<float>({2}, {1.f, v}), make_tensor<float>({}, {1.f}), make_tensor<int8_t>({}, {0})});
    ASSERT_TRUE(r.status.ok());
    EXPECT_EQ(r.kernel, kernels::KernelStatus::kInvalidValue) << v;
  }
}

TEST(DequantizeLinear, Int8Uint8AndInt32) {
  OpResult a = run_op("DequantizeLinear", {make_tensor<int8_t>({3}, {-128, 0, 127}), make_tensor<float>({}, {0.5f}),
                                           make_tensor<int8_t>({}, {-3})});
  ASSERT_TRUE(a.status.ok() && a.kernel == kernels::KernelStatus::kOk);
  EXPECT_EQ(a.outputs[0].values<float>(), (std::vector<float>{-62.5f, 1.5f, 65.f}));
  OpResult b = run_op("DequantizeLinear", {make_tensor<uint8_t>({2}, {0, 255}), make_tensor<float>({}, {0.25f})});
  ASSERT_TRUE(b.status.ok() && b.kernel == kernels::KernelStatus::kOk);
  EXPECT_EQ(b.outputs[0].values<float>(), (std::vector<float>{0.f, 63.75f}));
  OpResult c = run_op("DequantizeLinear", {make_tensor<int32_t>({2}, {-1000, 7}), make_tensor<float>({}, {0.01f})});
  ASSERT_TRUE(c.status.ok() && c.kernel == kernels::KernelStatus::kOk);
  EXPECT_EQ(c.outputs[0].values<float>(), (std::vector<float>{-10.f, 0.07f}));
}

TEST(QuantizeLinear, ShapeErrors) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 1.f));
  EXPECT_FALSE(run_op("QuantizeLinear", {x, make_tensor<float>({4}, {1, 1, 1, 1}), make_tensor<int8_t>({4}, {0, 0, 0, 0})},
                      core::AttrStore().set_int("axis", 1)).status.ok());  // 4 scales for 3 channels
  EXPECT_FALSE(run_op("QuantizeLinear", {x, make_tensor<float>({}, {1.f}), make_tensor<int32_t>({}, {0})}).status.ok());
  EXPECT_FALSE(run_op("QuantizeLinear", {x, make_tensor<float>({}, {1.f})}, core::AttrStore().set_int("block_size", 2)).status.ok());
  EXPECT_FALSE(run_op("DequantizeLinear", {x, make_tensor<float>({}, {1.f})}).status.ok());  // f32 x
}

}  // namespace
}  // namespace kiln::testing
