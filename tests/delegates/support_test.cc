// What the XNNPACK delegate takes: convolutions' window attributes land in XNNPACK's H and W
// parameters (1-D as H = 1), and 3-D convolutions stay on the portable kernels.
#include <gtest/gtest.h>

#include <vector>

#include "core/attr_store.h"
#include "delegates/xnnpack/support.h"

namespace kiln::delegates::xnnpack {
namespace {

using core::AttrStore;
using core::ExprId;

class ConvSupport : public ::testing::Test {
 protected:
  std::vector<ExprId> shape(const std::vector<int64_t>& dims) {
    std::vector<ExprId> s;
    for (int64_t d : dims) s.push_back(pool.constant(d));
    return s;
  }
  /// plan_op for a Conv or ConvTranspose of input `x` and constant weights `w`.
  Result<OpPlan> plan(const char* op, const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                      const std::vector<int64_t>& y, const AttrStore& a = AttrStore()) {
    Operand xo, wo;
    xo.shape = shape(x);
    wo.shape = shape(w);
    wo.const_data = weights;
    std::vector<std::vector<ExprId>> out = {shape(y)};
    return plan_op(op, a.view(), {xo, wo}, out, pool.nodes().data());
  }
  core::ExprPool pool;
  const float weights[1] = {0.f};  // never read: the plan looks at shapes and attributes only
};

TEST_F(ConvSupport, WindowAttributesLandOnHeightAndWidth) {
  AttrStore a;
  a.set_ints("strides", {2, 3}).set_ints("dilations", {1, 2}).set_ints("pads", {1, 2, 3, 4});
  Result<OpPlan> p = plan("Conv", {1, 4, 16, 16}, {8, 4, 3, 2}, {1, 8, 9, 6}, a);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->kind, OpKind::kConv);
  EXPECT_EQ(p->kernel_h, 3u);
  EXPECT_EQ(p->kernel_w, 2u);
  EXPECT_EQ(p->stride_h, 2u);
  EXPECT_EQ(p->stride_w, 3u);
  EXPECT_EQ(p->dilation_h, 1u);
  EXPECT_EQ(p->dilation_w, 2u);
  EXPECT_EQ(p->pad_top, 1u);
  EXPECT_EQ(p->pad_left, 2u);
  EXPECT_EQ(p->pad_bottom, 3u);
  EXPECT_EQ(p->pad_right, 4u);

  // 1-D: the one axis is W; H is the identity.
  Result<OpPlan> q = plan("ConvTranspose", {1, 4, 10}, {4, 2, 3}, {1, 2, 21},
                          AttrStore().set_ints("strides", {2}).set_ints("pads", {1, 0}).set_ints("output_padding", {1}));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->kind, OpKind::kConvTranspose);
  EXPECT_EQ(q->kernel_h, 1u);
  EXPECT_EQ(q->kernel_w, 3u);
  EXPECT_EQ(q->stride_h, 1u);
  EXPECT_EQ(q->stride_w, 2u);
  EXPECT_EQ(q->pad_top, 0u);
  EXPECT_EQ(q->pad_left, 1u);
  EXPECT_EQ(q->adjust_h, 0u);
  EXPECT_EQ(q->adjust_w, 1u);
}

TEST_F(ConvSupport, ThreeDimensionalConvolutionsAreDeclined) {
  Result<OpPlan> c = plan("Conv", {1, 4, 6, 8, 8}, {8, 4, 3, 3, 3}, {1, 8, 4, 6, 6});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnimplemented);
  EXPECT_NE(c.status().message().find("only 1-D and 2-D convolution"), std::string::npos) << c.status().message();

  Result<OpPlan> t = plan("ConvTranspose", {1, 4, 3, 4, 4}, {4, 2, 2, 2, 2}, {1, 2, 6, 8, 8},
                          AttrStore().set_ints("strides", {2, 2, 2}));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kUnimplemented);
  EXPECT_NE(t.status().message().find("only 1-D and 2-D convolution"), std::string::npos) << t.status().message();

  // Depthwise 3-D too (the depthwise path is chosen only after the rank check).
  Result<OpPlan> d = plan("Conv", {1, 4, 6, 8, 8}, {4, 1, 3, 3, 3}, {1, 4, 4, 6, 6}, AttrStore().set_int("group", 4));
  EXPECT_FALSE(d.ok());
}

// PRelu: the slope's one varying axis decides the layout (channels: channels-last; the last
// axis: plain); one value runs in either, as a LeakyRelu over the whole tensor; a slope along
// another axis, or two, is declined.
TEST_F(ConvSupport, PReluLayoutFollowsTheSlopeAxis) {
  struct Case {
    std::vector<int64_t> x, slope;
    bool taken;
    Layout layout;
    size_t channels;
  };
  const Case cases[] = {{{2, 3, 5, 5}, {3, 1, 1}, true, Layout::kNhwc, 3},
                        {{2, 3, 7}, {1, 3, 1}, true, Layout::kNhwc, 3},
                        {{2, 6, 4}, {4}, true, Layout::kPlain, 4},
                        {{5, 4}, {1, 4}, true, Layout::kPlain, 4},
                        {{2, 3, 5, 5}, {1}, true, Layout::kEither, 1},
                        {{2, 3, 5, 5}, {5, 1}, false, Layout::kEither, 0},
                        {{2, 3, 5, 5}, {3, 5, 5}, false, Layout::kEither, 0}};
  for (const Case& c : cases) {
    Result<OpPlan> p = plan("PRelu", c.x, c.slope, c.x);
    ASSERT_EQ(p.ok(), c.taken) << ::testing::PrintToString(c.slope) << ": " << p.status().message();
    if (!c.taken) continue;
    const bool one = c.channels == 1;
    EXPECT_EQ(p->kind, one ? OpKind::kUnary : OpKind::kPRelu);
    if (one) EXPECT_EQ(p->unary, UnaryOp::kLeakyRelu);
    EXPECT_EQ(p->layout, c.layout) << ::testing::PrintToString(c.slope);
    EXPECT_EQ(p->channels, c.channels) << ::testing::PrintToString(c.slope);
  }
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
