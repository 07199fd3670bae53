// DepthToSpace / SpaceToDepth: the ONNX examples, a seeded sweep of shapes, block sizes,
// modes and dtypes against index arithmetic written here (also inside oversized slots),
// errors, and symbolic shapes (with the divisibility guard) run far below the bound.
#include <gtest/gtest.h>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore block(int64_t b, const char* mode = nullptr) {
  core::AttrStore a;
  a.set_int("blocksize", b);
  if (mode) a.set_str("mode", mode);
  return a;
}

Tensor iota_f32(const V& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return make_tensor<float>(shape, v);
}

TEST(DepthToSpace, OnnxExamples) {
  Tensor x = iota_f32({1, 8, 2, 3});
  OpResult r = run_op("DepthToSpace", {x}, block(2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (V{1, 2, 4, 6}));
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16, 5,  17, 27, 39, 28, 40, 29, 41,
                                6,  18, 7,  19, 8,  20, 30, 42, 31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47}));
  r = run_op("DepthToSpace", {x}, block(2, "CRD"));
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10, 5,  11, 15, 21, 16, 22, 17, 23,
                                24, 30, 25, 31, 26, 32, 36, 42, 37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47}));
  // SpaceToDepth undoes DCR.
  OpResult back = run_op("SpaceToDepth", {r.outputs[0]}, block(2));
  ASSERT_TRUE(back.status.ok()) << back.status.message();
  OpResult dcr = run_op("DepthToSpace", {x}, block(2));
  EXPECT_EQ(run_op("SpaceToDepth", {dcr.outputs[0]}, block(2)).outputs[0].values<float>(), x.values<float>());
}

TEST(DepthToSpace, RandomSweep) {
  std::mt19937 rng(2718);
  for (int iter = 0; iter < 200; ++iter) {
    const int64_t b = 1 + static_cast<int64_t>(rng() % 3), n = 1 + static_cast<int64_t>(rng() % 2);
    const int64_t c = 1 + static_cast<int64_t>(rng() % 3), h = 1 + static_cast<int64_t>(rng() % 4),
                  w = 1 + static_cast<int64_t>(rng() % 5);
    const bool crd = rng() % 2;
    const DType t = iter % 3 == 0 ? DType::kI64 : iter % 3 == 1 ? DType::kBool : DType::kF32;
    // DepthToSpace [n, c*b*b, h, w] -> [n, c, h*b, w*b].
    Tensor x = random_tensor(rng, t, {n, c * b * b, h, w});
    SlotRun s = run_op_in_slots("DepthToSpace", {x}, block(b, crd ? "CRD" : "DCR"));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    const Tensor& y = s.exact.outputs[0];
    ASSERT_EQ(y.shape, (V{n, c, h * b, w * b}));
    for (int64_t in = 0; in < n; ++in)
      for (int64_t ic = 0; ic < c; ++ic)
        for (int64_t oh = 0; oh < h * b; ++oh)
          for (int64_t ow = 0; ow < w * b; ++ow) {
            const int64_t by = oh % b, bx = ow % b;
            const int64_t ch = crd ? ic * b * b + by * b + bx : (by * b + bx) * c + ic;
            const int64_t src = ((in * c * b * b + ch) * h + oh / b) * w + ow / b;
            const int64_t dst = ((in * c + ic) * h * b + oh) * w * b + ow;
            ASSERT_EQ(y.at(dst), x.at(src)) << "iter " << iter;
          }
    EXPECT_TRUE(s.tails_intact);
    EXPECT_EQ(s.outputs[0].bytes, y.bytes);
    // SpaceToDepth [n, c, h*b, w*b] -> [n, c*b*b, h, w].
    Tensor z = random_tensor(rng, t, {n, c, h * b, w * b});
    SlotRun u = run_op_in_slots("SpaceToDepth", {z}, block(b));
    ASSERT_TRUE(u.exact.status.ok()) << u.exact.status.message();
    const Tensor& q = u.exact.outputs[0];
    ASSERT_EQ(q.shape, (V{n, c * b * b, h, w}));
    for (int64_t in = 0; in < n; ++in)
      for (int64_t ch = 0; ch < c * b * b; ++ch)
        for (int64_t oh = 0; oh < h; ++oh)
          for (int64_t ow = 0; ow < w; ++ow) {
            const int64_t blk = ch / c, ic = ch % c, by = blk / b, bx = blk % b;
            const int64_t src = ((in * c + ic) * h * b + oh * b + by) * w * b + ow * b + bx;
            ASSERT_EQ(q.at(((in * c * b * b + ch) * h + oh) * w + ow), z.at(src)) << "iter " << iter;
          }
    EXPECT_TRUE(u.tails_intact);
    EXPECT_EQ(u.outputs[0].bytes, q.bytes);
  }
}

TEST(DepthToSpace, Errors) {
  Tensor x = iota_f32({1, 8, 2, 3});
  EXPECT_TRUE(has_text(run_op("DepthToSpace", {x}).status,
                       "node 'test' (DepthToSpace): missing required attribute 'blocksize'"));
  EXPECT_TRUE(has_text(run_op("DepthToSpace", {x}, block(0)).status, "blocksize 0 must be in [1, 1024]"));
  EXPECT_TRUE(has_text(run_op("DepthToSpace", {x}, block(2, "RCD")).status, "mode 'RCD' must be DCR or CRD"));
  EXPECT_TRUE(has_text(run_op("DepthToSpace", {x}, block(3)).status,
                       "(channels of [1, 8, 2, 3] must be a multiple of blocksize^2 = 9)"));
  EXPECT_TRUE(has_text(run_op("SpaceToDepth", {x}, block(2)).status,
                       "(width of [1, 8, 2, 3] must be a multiple of blocksize 2)"));
  EXPECT_TRUE(has_text(run_op("SpaceToDepth", {iota_f32({8, 2, 3})}, block(2)).status,
                       "input [8, 2, 3] must have rank 4 (NCHW)"));
}

TEST(DepthToSpaceSymbolic, ShapesGuardsAndRunsBelowTheBound) {
  core::ExprPool p;
  ExprId h = p.dim(p.add_dim({"H", 2, 64, 2})), w = p.dim(p.add_dim({"W", 1, 64, 1}));
  SymResult d = infer(p, "DepthToSpace", {sym_input(DType::kF32, {p.constant(1), p.constant(12), h, w})}, block(2));
  ASSERT_TRUE(d.status.ok()) << d.status.message();
  EXPECT_EQ(d.shape, "[1, 3, 2*H, 2*W]");
  EXPECT_TRUE(d.guards.empty());
  SymResult s = infer(p, "SpaceToDepth", {sym_input(DType::kF32, {p.constant(1), p.constant(3), h, w})}, block(2));
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_EQ(s.shape, "[1, 12, floordiv(H,2), floordiv(W,2)]");
  ASSERT_EQ(s.guards.size(), 1u);  // H has step 2; W needs W % 2 == 0
  EXPECT_TRUE(guard_holds(p, s.guards[0], {4, 6}));
  EXPECT_FALSE(guard_holds(p, s.guards[0], {4, 7}));
  std::mt19937 rng(9);
  for (V dims : {V{2, 1}, V{6, 9}, V{64, 64}}) {
    Tensor x = random_f32(rng, {1, 12, dims[0], dims[1]});
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kF32;
    out[0].shape = eval_shape(p, d.outputs[0].shape, dims);
    ASSERT_EQ(run_kernel("DepthToSpace", {x}, &out, block(2)), kernels::KernelStatus::kOk);
    EXPECT_EQ(out[0].values<float>(), run_op("DepthToSpace", {x}, block(2)).outputs[0].values<float>());
    std::vector<Tensor> back(1);
    back[0].dtype = DType::kF32;
    back[0].shape = {1, 12, dims[0], dims[1]};
    ASSERT_EQ(run_kernel("SpaceToDepth", {out[0]}, &back, block(2)), kernels::KernelStatus::kOk);
    EXPECT_EQ(back[0].values<float>(), x.values<float>()) << dims[0] << "x" << dims[1];
  }
}

}  // namespace
}  // namespace kiln::testing
