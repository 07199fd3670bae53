// Conv: hand cases, a seeded sweep of shapes and attributes against a double N-d reference,
// errors, and symbolic shapes with their guards.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "op_test_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

TEST(Conv, HandComputed2D) {
  Tensor x = make_tensor<float>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = make_tensor<float>({1, 1, 2, 2}, {1, 0, 0, 1});
  OpResult r = run_op("Conv", {x, w});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{6, 8, 12, 14}));

  Tensor b = make_tensor<float>({1}, {10});
  EXPECT_EQ(run_op("Conv", {x, w, b}).outputs[0].values<float>(), (std::vector<float>{16, 18, 22, 24}));

  // 3x3 ones, pads 1, stride 2: each output sums a 2x2 corner of the input.
  Tensor ones = make_tensor<float>({1, 1, 3, 3}, std::vector<float>(9, 1));
  AttrStore a;
  a.set_ints("pads", {1, 1, 1, 1}).set_ints("strides", {2, 2});
  r = run_op("Conv", {x, ones}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{12, 16, 24, 28}));
}

TEST(Conv, HandComputed1DGroupsAndSamePadding) {
  Tensor x = make_tensor<float>({1, 2, 4}, {1, 2, 3, 4, 1, 1, 1, 1});
  Tensor w = make_tensor<float>({1, 2, 2}, {1, -1, 2, 0});
  OpResult r = run_op("Conv", {x, w});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 1, 1}));

  // Depthwise: group = channels.
  Tensor xd = make_tensor<float>({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor wd = make_tensor<float>({2, 1, 1, 1}, {2, 3});
  r = run_op("Conv", {xd, wd}, AttrStore().set_int("group", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{2, 4, 9, 12}));

  // One pad in total: SAME_UPPER puts it at the end, SAME_LOWER at the start.
  Tensor x1 = make_tensor<float>({1, 1, 4}, {1, 2, 3, 4});
  Tensor w1 = make_tensor<float>({1, 1, 2}, {1, 10});
  r = run_op("Conv", {x1, w1}, AttrStore().set_str("auto_pad", "SAME_UPPER"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{21, 32, 43, 4}));
  r = run_op("Conv", {x1, w1}, AttrStore().set_str("auto_pad", "SAME_LOWER"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{10, 21, 32, 43}));
}

TEST(Conv, HandComputed3D) {
  // The whole 2x2x2 input under a 2x2x2 kernel of ones: one output, the sum 1 + ... + 8.
  Tensor x = make_tensor<float>({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor ones = make_tensor<float>({1, 1, 2, 2, 2}, std::vector<float>(8, 1));
  OpResult r = run_op("Conv", {x, ones, make_tensor<float>({1}, {0.5f})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{36.5f}));

  // Pads 1 and stride 2 on every axis: each output's window holds exactly one input element.
  r = run_op("Conv", {x, ones}, AttrStore().set_ints("pads", {1, 1, 1, 1, 1, 1}).set_ints("strides", {2, 2, 2}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 2, 2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));

  // Taps along D only: y[d] = x[d] + 10 x[d + 1] at every (h, w); dilation 2 skips a plane.
  Tensor xd = make_tensor<float>({1, 1, 3, 1, 2}, {1, 2, 3, 4, 5, 6});
  Tensor wd = make_tensor<float>({1, 1, 2, 1, 1}, {1, 10});
  r = run_op("Conv", {xd, wd});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 2, 1, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{31, 42, 53, 64}));
  r = run_op("Conv", {xd, wd}, AttrStore().set_ints("dilations", {2, 1, 1}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{51, 62}));

  // One pad in total along D: SAME_UPPER puts it at the end, SAME_LOWER at the start.
  Tensor x4 = make_tensor<float>({1, 1, 4, 1, 1}, {1, 2, 3, 4});
  r = run_op("Conv", {x4, wd}, AttrStore().set_str("auto_pad", "SAME_UPPER"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{21, 32, 43, 4}));
  r = run_op("Conv", {x4, wd}, AttrStore().set_str("auto_pad", "SAME_LOWER"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{10, 21, 32, 43}));

  // Depthwise: group = channels.
  Tensor xg = make_tensor<float>({1, 2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor wg = make_tensor<float>({2, 1, 1, 1, 1}, {2, 3});
  r = run_op("Conv", {xg, wg}, AttrStore().set_int("group", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{2, 4, 9, 12}));
}

/// One convolution to check: everything the reference needs, chosen at random.
struct ConvCase {
  int64_t n = 1, c = 1, m = 1, group = 1;
  std::vector<int64_t> in, k, s, d, pads;  // pads: begins then ends
  std::string auto_pad = "NOTSET";
};

// Output size and begin pad of one axis, straight from the ONNX operator text.
void onnx_axis(const ConvCase& cc, size_t a, int64_t* out, int64_t* begin) {
  size_t nsp = cc.in.size();
  int64_t ek = cc.d[a] * (cc.k[a] - 1) + 1;
  if (cc.auto_pad == "SAME_UPPER" || cc.auto_pad == "SAME_LOWER") {
    *out = static_cast<int64_t>(std::ceil(static_cast<double>(cc.in[a]) / cc.s[a]));
    int64_t total = std::max<int64_t>(0, (*out - 1) * cc.s[a] + ek - cc.in[a]);
    *begin = cc.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    return;
  }
  bool valid = cc.auto_pad == "VALID";
  int64_t pb = valid ? 0 : cc.pads[a], pe = valid ? 0 : cc.pads[nsp + a];
  *out = static_cast<int64_t>(std::floor(static_cast<double>(cc.in[a] + pb + pe - ek) / cc.s[a])) + 1;
  *begin = pb;
}

// Direct N-d convolution in double: every output element visits every kernel tap.
std::vector<double> reference_conv(const ConvCase& cc, const Tensor& x, const Tensor& w, const Tensor* b,
                                   std::vector<int64_t>* out_shape) {
  size_t nsp = cc.in.size();
  std::vector<int64_t> out(nsp), begin(nsp);
  for (size_t a = 0; a < nsp; ++a) onnx_axis(cc, a, &out[a], &begin[a]);
  *out_shape = {cc.n, cc.m};
  out_shape->insert(out_shape->end(), out.begin(), out.end());
  int64_t out_sp = 1, k_sp = 1, in_sp = 1;
  for (size_t a = 0; a < nsp; ++a) out_sp *= out[a], k_sp *= cc.k[a], in_sp *= cc.in[a];
  int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<double> y;
  for (int64_t n = 0; n < cc.n; ++n) {
    for (int64_t m = 0; m < cc.m; ++m) {
      int64_t g = m / mg;
      for (int64_t o = 0; o < out_sp; ++o) {
        double acc = b ? b->at(m) : 0.0;
        for (int64_t ic = 0; ic < cg; ++ic) {
          for (int64_t t = 0; t < k_sp; ++t) {
            bool inside = true;
            int64_t in_flat = 0;
            int64_t orest = o, trest = t;
            for (size_t a = 0; a < nsp; ++a) {
              // Row-major decomposition: axis a's coordinate divides out the later axes.
              int64_t later_o = 1, later_k = 1, later_i = 1;
              for (size_t z = a + 1; z < nsp; ++z) later_o *= out[z], later_k *= cc.k[z], later_i *= cc.in[z];
              int64_t oc = orest / later_o, kc = trest / later_k;
              orest %= later_o;
              trest %= later_k;
              int64_t ic_coord = oc * cc.s[a] - begin[a] + kc * cc.d[a];
              if (ic_coord < 0 || ic_coord >= cc.in[a]) inside = false;
              in_flat += ic_coord * later_i;
            }
            if (!inside) continue;
            double xv = x.at(((n * cc.c) + g * cg + ic) * in_sp + in_flat);
            double wv = w.at((m * cg + ic) * k_sp + t);
            acc += xv * wv;
          }
        }
        y.push_back(acc);
      }
    }
  }
  return y;
}

/// Runs `iters` random convolutions with `nsp_lo` to `nsp_hi` spatial axes (all attributes,
/// group, bias, auto_pad) against the reference, also inside oversized slots. Counts the
/// cases that ran and those whose empty output the shape function refused.
void random_sweep(uint32_t seed, int iters, size_t nsp_lo, size_t nsp_hi, int* ran, int* rejected) {
  std::mt19937 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* modes[] = {"NOTSET", "NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
  const int64_t max_in[] = {0, 12, 8, 5};  // per spatial rank: keeps the reference quick
  for (int iter = 0; iter < iters; ++iter) {
    ConvCase cc;
    size_t nsp = pick(nsp_lo, nsp_hi);
    cc.group = pick(1, 3);
    cc.n = pick(1, 2);
    cc.c = cc.group * pick(1, 3);
    cc.m = cc.group * pick(1, 3);
    cc.auto_pad = modes[pick(0, 5)];
    for (size_t a = 0; a < nsp; ++a) {
      cc.in.push_back(pick(1, max_in[nsp]));
      cc.k.push_back(pick(1, 4));
      cc.s.push_back(pick(1, 3));
      cc.d.push_back(pick(1, 2));
    }
    for (size_t a = 0; a < 2 * nsp; ++a) cc.pads.push_back(pick(0, 2));
    AttrStore attrs;
    if (cc.group != 1 || pick(0, 1)) attrs.set_int("group", cc.group);
    if (cc.auto_pad != "NOTSET" || pick(0, 1)) attrs.set_str("auto_pad", cc.auto_pad);
    if (cc.auto_pad == "NOTSET") attrs.set_ints("pads", cc.pads);
    attrs.set_ints("strides", cc.s).set_ints("dilations", cc.d);
    if (pick(0, 1)) attrs.set_ints("kernel_shape", cc.k);

    std::vector<int64_t> xs = {cc.n, cc.c}, ws = {cc.m, cc.c / cc.group};
    xs.insert(xs.end(), cc.in.begin(), cc.in.end());
    ws.insert(ws.end(), cc.k.begin(), cc.k.end());
    Tensor x = random_f32(rng, xs), w = random_f32(rng, ws);
    Tensor b = random_f32(rng, {cc.m});
    bool with_bias = pick(0, 1);
    std::vector<Tensor> inputs = {x, w};
    if (with_bias) inputs.push_back(b);

    std::vector<int64_t> want_shape;
    std::vector<double> want = reference_conv(cc, x, w, with_bias ? &b : nullptr, &want_shape);
    bool empty = false;
    for (int64_t d : want_shape) empty |= d < 1;
    SlotRun s = run_op_in_slots("Conv", inputs, attrs);
    if (empty) {  // the output would be empty: the shape function must refuse
      ASSERT_FALSE(s.exact.status.ok()) << "iter " << iter;
      EXPECT_NE(s.exact.status.message().find("must be at least 1"), std::string::npos) << s.exact.status.message();
      ++*rejected;
      continue;
    }
    ASSERT_TRUE(s.exact.status.ok()) << "iter " << iter << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, want_shape) << "iter " << iter;
    EXPECT_TRUE(s.tails_intact) << "iter " << iter;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(s.exact.outputs[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << "iter " << iter << " at " << i;
      ASSERT_EQ(s.outputs[0].at(i), s.exact.outputs[0].at(i)) << "slotted run differs, iter " << iter;
    }
    ++*ran;
  }
}

TEST(Conv, RandomSweepAgainstReference) {
  int ran = 0, rejected = 0;
  random_sweep(20240611, 400, 1, 2, &ran, &rejected);
  EXPECT_GT(ran, 300);
  EXPECT_GT(rejected, 0);
}

TEST(Conv, RandomSweep3DAgainstReference) {
  int ran = 0, rejected = 0;
  random_sweep(20260301, 400, 3, 3, &ran, &rejected);
  EXPECT_GT(ran, 250);
  EXPECT_GT(rejected, 0);
}

TEST(Conv, Errors) {
  auto message = [](const std::vector<Tensor>& in, const AttrStore& a = AttrStore()) {
    OpResult r = run_op("Conv", in, a);
    EXPECT_FALSE(r.status.ok());
    return r.status.message();
  };
  auto zeros = [](std::vector<int64_t> s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return make_tensor<float>(s, std::vector<float>(n, 0.f));
  };
  Tensor x = zeros({1, 3, 5, 5});
  EXPECT_NE(message({x, zeros({8, 4, 3, 3})}).find("sizes 3 and 4 must be equal (input channels of [1, 3, 5, 5] "
                                                   "must equal group 1 times dim 1 of weight [8, 4, 3, 3])"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 1, 3, 3})}, AttrStore().set_int("group", 0))
                .find("attribute 'group' must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 1, 3, 3})}, AttrStore().set_int("group", 3))
                .find("size 8 must be divisible by 3 (output channels of weight [8, 1, 3, 3]"),
            std::string::npos);
  EXPECT_NE(message({zeros({1, 3, 1, 2, 5, 5}), zeros({8, 3, 1, 1, 3, 3})})
                .find("supports 1-D, 2-D and 3-D convolution (input rank 3, 4 or 5), got input [1, 3, 1, 2, 5, 5]"),
            std::string::npos);
  EXPECT_NE(message({zeros({1, 3}), zeros({8, 3})}).find("got input [1, 3]"), std::string::npos);
  Tensor x3 = zeros({1, 3, 4, 5, 5});
  EXPECT_NE(message({x3, zeros({8, 3, 3, 3})}).find("weight [8, 3, 3, 3] must have the rank of input [1, 3, 4, 5, 5]"),
            std::string::npos);
  EXPECT_NE(message({x3, zeros({8, 3, 3, 3, 3})}, AttrStore().set_ints("strides", {2, 2}))
                .find("attribute 'strides' needs 3 values, got 2"),
            std::string::npos);
  EXPECT_NE(message({x3, zeros({8, 3, 3, 3, 3})}, AttrStore().set_ints("pads", {0, 0, 0, 0}))
                .find("attribute 'pads' needs 6 values, got 4"),
            std::string::npos);
  EXPECT_NE(message({x3, zeros({8, 3, 3, 3, 3})}, AttrStore().set_ints("kernel_shape", {2, 3, 3}))
                .find("attribute 'kernel_shape' must match weight [8, 3, 3, 3, 3]"),
            std::string::npos);
  EXPECT_NE(message({x3, zeros({8, 3, 5, 3, 3})}).find("size 0 must be at least 1 (output size of spatial axis 0"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 3, 3})}).find("weight [8, 3, 3] must have the rank of input [1, 3, 5, 5]"),
            std::string::npos);
  Tensor xi = make_tensor<int64_t>({1, 3, 5, 5}, std::vector<int64_t>(75, 0));
  EXPECT_NE(message({xi, zeros({8, 3, 3, 3})}).find("node 'test' (Conv): input #0 has dtype i64, expected f32"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 3, 3, 3}), zeros({4})}).find("sizes 4 and 8 must be equal (bias length"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 3, 3, 3})}, AttrStore().set_ints("kernel_shape", {3, 2}))
                .find("attribute 'kernel_shape' must match weight [8, 3, 3, 3]"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 3, 3, 3})}, AttrStore().set_ints("strides", {2}))
                .find("attribute 'strides' needs 2 values, got 1"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 3, 3, 3})}, AttrStore().set_ints("pads", {0, 0, -1, 0}))
                .find("attribute 'pads' value -1 must be >= 0"),
            std::string::npos);
  EXPECT_NE(message({x, zeros({8, 3, 3, 3})}, AttrStore().set_str("auto_pad", "SAME"))
                .find("attribute 'auto_pad' is 'SAME', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER"),
            std::string::npos);
  EXPECT_NE(message({zeros({1, 3, 2, 5}), zeros({8, 3, 3, 3})}).find("size 0 must be at least 1"),
            std::string::npos);
  EXPECT_NE(message({x}).find("expects 2 to 3 inputs, got 1"), std::string::npos);
}

class ConvSymbolic : public ::testing::Test {
 protected:
  ExprId k(int64_t v) { return pool.constant(v); }
  /// Shape inference over f32 inputs of the given symbolic shapes.
  SymResult conv(std::vector<std::vector<ExprId>> shapes, const AttrStore& a = AttrStore()) {
    std::vector<kernels::SymTensor> in;
    for (auto& s : shapes) in.push_back(sym_input(DType::kF32, s));
    return infer(pool, "Conv", in, a);
  }
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 512, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 512, 1}));
};

TEST_F(ConvSymbolic, StridedPaddedConvIsCeilDiv) {
  AttrStore a;
  a.set_ints("pads", {1, 1, 1, 1}).set_ints("strides", {2, 2}).set_ints("kernel_shape", {3, 3});
  SymResult r = conv({{batch, k(3), h, w}, {k(16), k(3), k(3), k(3)}, {k(16)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(pool.shape_to_string(r.outputs[0].shape), "[batch, 16, ceildiv(H,2), ceildiv(W,2)]");
  EXPECT_EQ(guards_text(pool, r), "");  // ceildiv(H,2) >= 1 holds for every H >= 1

  SymResult same = conv({{batch, k(3), h, w}, {k(16), k(3), k(5), k(5)}},
                                AttrStore().set_str("auto_pad", "SAME_LOWER").set_ints("strides", {2, 2}));
  ASSERT_TRUE(same.status.ok()) << same.status.message();
  EXPECT_EQ(pool.shape_to_string(same.outputs[0].shape), "[batch, 16, ceildiv(H,2), ceildiv(W,2)]");
}

TEST_F(ConvSymbolic, ValidConvGuardsTheOutputSize) {
  SymResult r = conv({{batch, k(3), h, w}, {k(8), k(3), k(3), k(3)}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(pool.shape_to_string(r.outputs[0].shape), "[batch, 8, H - 2, W - 2]");
  EXPECT_EQ(guards_text(pool, r), "H - 2 >= 1; W - 2 >= 1");
  EXPECT_EQ(r.guards[0].node_name, "test");
  EXPECT_EQ(r.guards[0].op_type, "Conv");

  // 1-D, dilated and strided: floordiv(H - 5,3) + 1, in the pool's normal form.
  SymResult d = conv({{batch, k(2), h}, {k(4), k(2), k(3)}},
                             AttrStore().set_ints("dilations", {2}).set_ints("strides", {3}));
  ASSERT_TRUE(d.status.ok()) << d.status.message();
  EXPECT_EQ(pool.shape_to_string(d.outputs[0].shape), "[batch, 4, floordiv(H + 1,3) - 1]");
  EXPECT_EQ(guards_text(pool, d), "floordiv(H + 1,3) - 1 >= 1");
}

TEST_F(ConvSymbolic, SymbolicChannelsAreGuarded) {
  ExprId c = pool.dim(pool.add_dim({"C", 1, 64, 1}));
  SymResult r = conv({{batch, c, h, w}, {k(16), k(4), k(1), k(1)}},
                             AttrStore().set_int("group", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(guards_text(pool, r), "C == 8");
  EXPECT_EQ(pool.shape_to_string(r.outputs[0].shape), "[batch, 16, H, W]");
}

TEST_F(ConvSymbolic, BindThenExecuteBelowTheBound) {
  // Bind evaluates the stored expressions at the actual dims; the kernel then runs on buffers
  // of exactly those sizes. Both must agree with the reference at every size, not only 512.
  AttrStore a;
  a.set_ints("pads", {2, 0, 1, 1}).set_ints("strides", {2, 3}).set_ints("dilations", {1, 2});
  SymResult r = conv({{batch, k(2), h, w}, {k(3), k(2), k(3), k(2)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(guards_text(pool, r), "floordiv(W + 1,3) >= 1");
  std::mt19937 rng(5);
  for (int it = 0; it < 20; ++it) {
    int64_t hv = 1 + rng() % 40, wv = 2 + rng() % 40;
    ConvCase cc;
    cc.n = 2, cc.c = 2, cc.m = 3;
    cc.in = {hv, wv}, cc.k = {3, 2}, cc.s = {2, 3}, cc.d = {1, 2}, cc.pads = {2, 0, 1, 1};
    Tensor x = random_f32(rng, {2, 2, hv, wv}), wt = random_f32(rng, {3, 2, 3, 2});
    std::vector<int64_t> want_shape;
    std::vector<double> want = reference_conv(cc, x, wt, nullptr, &want_shape);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, {2, hv, wv});
    ASSERT_EQ(out[0].shape, want_shape) << "H=" << hv << " W=" << wv;
    ASSERT_EQ(run_kernel("Conv", {x, wt}, &out, a), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(out[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << "H=" << hv << " W=" << wv;
  }
}

/// 3-D: symbolic depth, height and width (dims in this order after batch).
class Conv3DSymbolic : public ConvSymbolic {
 protected:
  ExprId d = pool.dim(pool.add_dim({"D", 1, 64, 1}));
};

TEST_F(Conv3DSymbolic, ShapesAndGuardsPerAxis) {
  AttrStore a;
  a.set_ints("pads", {1, 1, 1, 1, 1, 1}).set_ints("strides", {2, 2, 2});
  SymResult r = conv({{batch, k(3), d, h, w}, {k(16), k(3), k(3), k(3), k(3)}, {k(16)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 16, ceildiv(D,2), ceildiv(H,2), ceildiv(W,2)]");
  EXPECT_EQ(guards_text(pool, r), "");

  SymResult same = conv({{batch, k(4), d, h, w}, {k(4), k(1), k(2), k(5), k(5)}},
                        AttrStore().set_str("auto_pad", "SAME_UPPER").set_ints("strides", {1, 2, 3}).set_int("group", 4));
  ASSERT_TRUE(same.status.ok()) << same.status.message();
  EXPECT_EQ(same.shape, "[batch, 4, D, ceildiv(H,2), ceildiv(W,3)]");
  EXPECT_EQ(guards_text(pool, same), "");

  SymResult valid = conv({{batch, k(3), d, h, w}, {k(8), k(3), k(3), k(1), k(2)}});
  ASSERT_TRUE(valid.status.ok()) << valid.status.message();
  EXPECT_EQ(valid.shape, "[batch, 8, D - 2, H, W - 1]");
  EXPECT_EQ(guards_text(pool, valid), "D - 2 >= 1; W - 1 >= 1");
}

TEST_F(Conv3DSymbolic, BindThenExecuteBelowTheBound) {
  // Every attribute differs per axis, so a slot mix-up cannot go unnoticed.
  AttrStore a;
  a.set_ints("pads", {1, 0, 2, 0, 1, 1}).set_ints("strides", {2, 1, 3}).set_ints("dilations", {1, 2, 1});
  a.set_int("group", 2);
  SymResult r = conv({{batch, k(4), d, h, w}, {k(6), k(2), k(3), k(2), k(2)}, {k(6)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(guards_text(pool, r), "floordiv(D,2) >= 1; H - 1 >= 1");  // W: floordiv(W + 1,3) + 1 >= 1 always
  std::mt19937 rng(7);
  for (int it = 0; it < 30; ++it) {
    int64_t nb = 1 + rng() % 2, dv = 2 + rng() % 9, hv = 2 + rng() % 9, wv = 1 + rng() % 12;
    if (it == 0) dv = 2, hv = 2, wv = 1;  // each axis at its smallest admissible size
    std::vector<int64_t> dims = {nb, hv, wv, dv};
    for (const kernels::Guard& g : r.guards) ASSERT_TRUE(guard_holds(pool, g, dims));
    ConvCase cc;
    cc.n = nb, cc.c = 4, cc.m = 6, cc.group = 2;
    cc.in = {dv, hv, wv}, cc.k = {3, 2, 2}, cc.s = {2, 1, 3}, cc.d = {1, 2, 1}, cc.pads = {1, 0, 2, 0, 1, 1};
    Tensor x = random_f32(rng, {nb, 4, dv, hv, wv}), wt = random_f32(rng, {6, 2, 3, 2, 2}), b = random_f32(rng, {6});
    std::vector<int64_t> want_shape;
    std::vector<double> want = reference_conv(cc, x, wt, &b, &want_shape);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
    std::string what = "D=" + std::to_string(dv) + " H=" + std::to_string(hv) + " W=" + std::to_string(wv);
    ASSERT_EQ(out[0].shape, want_shape) << what;
    ASSERT_EQ(run_kernel("Conv", {x, wt, b}, &out, a), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(out[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << what;
  }
}

}  // namespace
}  // namespace kiln::testing
