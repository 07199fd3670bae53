// GatherND: the ONNX examples, a seeded sweep of ranks, batch_dims, tuple lengths and negative
// indices (zero extents included) against an addressing written here, out-of-range indices,
// and the shape function's refusals.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "op_test_util.h"

namespace kiln::kernels {
namespace {

using testing::view_of;

using V = std::vector<int64_t>;

KernelStatus run(const V& ds, std::vector<float> data, const V& is, std::vector<int64_t> idx, int64_t b, const V& ys,
                 std::vector<float>* y) {
  int64_t n = 1;
  for (int64_t d : ys) n *= d;
  y->assign(static_cast<size_t>(n), -7.f);
  TensorView dv = view_of(DType::kF32, ds, data.data()), iv = view_of(DType::kI64, is, idx.data()), yv = view_of(DType::kF32, ys, y->data());
  const TensorView* ins[] = {&dv, &iv};
  TensorView* outs[] = {&yv};
  core::AttrStore a;
  a.set_int("batch_dims", b);
  RunCtx c;
  c.inputs = ins;
  c.num_inputs = 2;
  c.outputs = outs;
  c.num_outputs = 1;
  c.attrs = a.view();
  return find_op("GatherND")->run(c);
}

TEST(GatherND, TheOnnxExamples) {
  std::vector<float> y;
  // data [[0,1],[2,3]], indices [[0,0],[1,1]] -> [0,3]
  ASSERT_EQ(run({2, 2}, {0, 1, 2, 3}, {2, 2}, {0, 0, 1, 1}, 0, {2}, &y), KernelStatus::kOk);
  EXPECT_EQ(y, (std::vector<float>{0, 3}));
  // indices [[1],[0]] -> rows
  ASSERT_EQ(run({2, 2}, {0, 1, 2, 3}, {2, 1}, {1, 0}, 0, {2, 2}, &y), KernelStatus::kOk);
  EXPECT_EQ(y, (std::vector<float>{2, 3, 0, 1}));
  // batch_dims 1: data [[[0,1],[2,3]],[[4,5],[6,7]]], indices [[1],[0]] -> [[2,3],[4,5]]
  ASSERT_EQ(run({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}, {2, 1}, {1, 0}, 1, {2, 2}, &y), KernelStatus::kOk);
  EXPECT_EQ(y, (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(run({2, 2}, {0, 1, 2, 3}, {1, 2}, {0, 2}, 0, {1}, &y), KernelStatus::kIndexOutOfRange);
  ASSERT_EQ(run({2, 2}, {0, 1, 2, 3}, {1, 2}, {-1, -2}, 0, {1}, &y), KernelStatus::kOk);
  EXPECT_EQ(y, (std::vector<float>{2}));
}

TEST(GatherND, MatchesAnAddressingWrittenHereOverRandomShapes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t r = 1 + static_cast<int64_t>(rng() % 4);
    const int64_t b = static_cast<int64_t>(rng() % static_cast<unsigned>(r));
    const int64_t k = 1 + static_cast<int64_t>(rng() % static_cast<unsigned>(r - b));
    V ds;
    for (int64_t a = 0; a < r; ++a) ds.push_back(1 + static_cast<int64_t>(rng() % 4));
    V is(ds.begin(), ds.begin() + b);  // batch axes
    const int64_t extra = static_cast<int64_t>(rng() % 3);
    for (int64_t a = 0; a < extra; ++a) is.push_back(static_cast<int64_t>(rng() % 4));  // 0 tuples included
    is.push_back(k);
    int64_t nd = 1, ni = 1;
    for (int64_t d : ds) nd *= d;
    for (int64_t d : is) ni *= d;
    std::vector<float> data(static_cast<size_t>(nd));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f - 3.f;
    std::vector<int64_t> idx(static_cast<size_t>(ni));
    for (int64_t t = 0; t < ni; ++t) {
      const int64_t d = ds[static_cast<size_t>(b + t % k)];
      idx[static_cast<size_t>(t)] = static_cast<int64_t>(rng() % static_cast<unsigned>(2 * d)) - d;  // negative too
    }
    V ys(is.begin(), is.end() - 1);
    ys.insert(ys.end(), ds.begin() + b + k, ds.end());
    // The reference: element by element, through strides.
    std::vector<float> want;
    int64_t batch = 1, tuples = 1, slice = 1;
    for (int64_t a = 0; a < b; ++a) batch *= ds[static_cast<size_t>(a)];
    for (size_t a = static_cast<size_t>(b); a + 1 < is.size(); ++a) tuples *= is[a];
    for (int64_t a = b + k; a < r; ++a) slice *= ds[static_cast<size_t>(a)];
    V stride(static_cast<size_t>(r), 1);
    for (int64_t a = r - 2; a >= 0; --a) stride[static_cast<size_t>(a)] = stride[static_cast<size_t>(a) + 1] * ds[static_cast<size_t>(a) + 1];
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t t = 0; t < tuples; ++t) {
        int64_t base = 0, rest = bi;
        for (int64_t a = b - 1; a >= 0; --a) {
          base += (rest % ds[static_cast<size_t>(a)]) * stride[static_cast<size_t>(a)];
          rest /= ds[static_cast<size_t>(a)];
        }
        for (int64_t j = 0; j < k; ++j) {
          int64_t v = idx[static_cast<size_t>((bi * tuples + t) * k + j)];
          if (v < 0) v += ds[static_cast<size_t>(b + j)];
          base += v * stride[static_cast<size_t>(b + j)];
        }
        for (int64_t e = 0; e < slice; ++e) want.push_back(data[static_cast<size_t>(base + e)]);
      }
    std::vector<float> y;
    ASSERT_EQ(run(ds, data, is, idx, b, ys, &y), KernelStatus::kOk) << "trial " << trial;
    ASSERT_EQ(y, want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kiln::kernels
