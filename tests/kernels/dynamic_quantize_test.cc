// DynamicQuantizeLinear over tensors large enough that its range is taken in chunks over the
// pool: the scale, zero point and every byte against a definition written here (the ONNX
// formula), the same on 1 and 2 threads; a NaN or infinity in any chunk fails the run.
#include <gtest/gtest.h>
#include <pthreadpool.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "op_test_util.h"

namespace kiln::testing {
namespace {

TEST(DynamicQuantizeLinear, LargeTensorsMatchTheDefinitionOnOneAndTwoThreads) {
  std::mt19937 rng(31);
  pthreadpool_t two = pthreadpool_create(2);
  for (int64_t n : {1, 1000, 16384 * 2 + 7, 16384 * 16 + 5, 16384 * 40}) {
    Tensor x = random_f32(rng, {n}, -3.f, 5.f);
    if (n > 100) x.data<float>()[n - 3] = -7.5f;  // the minimum in the last chunk
    float lo = 0.f, hi = 0.f;
    for (int64_t i = 0; i < n; ++i) lo = std::min(lo, x.data<float>()[i]), hi = std::max(hi, x.data<float>()[i]);
    const float scale = (hi - lo) / 255.f;
    const float z0 = std::nearbyint(std::clamp(-lo / scale, 0.f, 255.f));
    for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
      std::vector<Tensor> outs(3);
      outs[0].dtype = DType::kU8, outs[0].shape = {n};
      outs[1].dtype = DType::kF32, outs[1].shape = {};
      outs[2].dtype = DType::kU8, outs[2].shape = {};
      ASSERT_EQ(run_kernel("DynamicQuantizeLinear", {x}, &outs, core::AttrStore(), nullptr, 0, pool), kernels::KernelStatus::kOk);
      ASSERT_EQ(outs[1].data<float>()[0], scale) << n;
      ASSERT_EQ(outs[2].data<uint8_t>()[0], static_cast<uint8_t>(z0)) << n;
      for (int64_t i = 0; i < n; ++i) {
        const float q = std::clamp(std::nearbyint(x.data<float>()[i] / scale) + z0, 0.f, 255.f);
        ASSERT_EQ(outs[0].data<uint8_t>()[i], static_cast<uint8_t>(q)) << "n=" << n << " at " << i;
      }
      if (n < 100) continue;
      for (float bad : {NAN, INFINITY}) {  // late in the tensor: the last chunk
        Tensor y = x;
        y.data<float>()[n - 1] = bad;
        EXPECT_EQ(run_kernel("DynamicQuantizeLinear", {y}, &outs, core::AttrStore(), nullptr, 0, pool),
                  kernels::KernelStatus::kInvalidValue)
            << n;
      }
    }
  }
  pthreadpool_destroy(two);
}

}  // namespace
}  // namespace kiln::testing
