// ConvTranspose: hand cases, a seeded sweep of shapes and attributes against a double
// scatter reference, errors, and symbolic shapes with their guards run below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

TEST(ConvTranspose, HandComputed2D) {
  Tensor x = make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor ones = make_tensor<float>({1, 1, 2, 2}, {1, 1, 1, 1});
  OpResult r = run_op("ConvTranspose", {x, ones});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4}));

  // Stride 2 with a 2x2 kernel tiles the input: each pixel becomes a scaled copy of W.
  Tensor w = make_tensor<float>({1, 2, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 1});
  Tensor b = make_tensor<float>({2}, {10, 20});
  r = run_op("ConvTranspose", {x, w, b}, AttrStore().set_ints("strides", {2, 2}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{11, 12, 12, 14, 13, 14, 16, 18, 13, 16, 14, 18, 19, 22, 22, 26,  //
                                20, 20, 20, 20, 20, 21, 20, 22, 20, 20, 20, 20, 20, 23, 20, 24}));
}

TEST(ConvTranspose, HandComputed1DPaddingAndGroups) {
  Tensor x = make_tensor<float>({1, 1, 2}, {1, 2});
  Tensor w = make_tensor<float>({1, 1, 3}, {1, 1, 1});
  auto run = [&](const AttrStore& a) {
    OpResult r = run_op("ConvTranspose", {x, w}, a);
    EXPECT_TRUE(r.status.ok()) << r.status.message();
    return r.status.ok() ? r.outputs[0].values<float>() : std::vector<float>{};
  };
  // Full scatter with stride 2: [1, 1, 1+2, 2, 2]; pads and output_padding crop or extend it.
  EXPECT_EQ(run(AttrStore().set_ints("strides", {2})), (std::vector<float>{1, 1, 3, 2, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", {2}).set_ints("pads", {1, 1})), (std::vector<float>{1, 3, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", {2}).set_ints("output_padding", {1})),
            (std::vector<float>{1, 1, 3, 2, 2, 0}));
  // SAME: out = 2 * 2 = 4, total padding 1: SAME_UPPER crops the end, SAME_LOWER the start.
  EXPECT_EQ(run(AttrStore().set_ints("strides", {2}).set_str("auto_pad", "SAME_UPPER")),
            (std::vector<float>{1, 1, 3, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", {2}).set_str("auto_pad", "SAME_LOWER")),
            (std::vector<float>{1, 3, 2, 2}));
  // output_shape (with or without N and C) ignores pads; the odd pad goes first.
  EXPECT_EQ(run(AttrStore().set_ints("strides", {2}).set_ints("output_shape", {4}).set_ints("pads", {2, 2})),
            (std::vector<float>{1, 3, 2, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", {2}).set_ints("output_shape", {1, 1, 3})),
            (std::vector<float>{1, 3, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("dilations", {2})), (std::vector<float>{1, 2, 1, 2, 1, 2}));

  // Groups: each input channel feeds its own output channel(s).
  Tensor xg = make_tensor<float>({1, 2, 1}, {1, 2});
  Tensor wg = make_tensor<float>({2, 2, 1}, {3, 4, 5, 6});
  OpResult r = run_op("ConvTranspose", {xg, wg}, AttrStore().set_int("group", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 4, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 4, 10, 12}));
}

TEST(ConvTranspose, HandComputed3D) {
  // Stride 2 with a 2x2x2 kernel of ones: every input element becomes a 2x2x2 block.
  Tensor x = make_tensor<float>({1, 1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor ones = make_tensor<float>({1, 1, 2, 2, 2}, std::vector<float>(8, 1));
  OpResult r = run_op("ConvTranspose", {x, ones, make_tensor<float>({1}, {0.5f})},
                      AttrStore().set_ints("strides", {2, 2, 2}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 4, 4, 4}));
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t w = 0; w < 4; ++w)
        EXPECT_EQ(r.outputs[0].at((d * 4 + h) * 4 + w), x.at((d / 2 * 2 + h / 2) * 2 + w / 2) + 0.5)
            << d << "," << h << "," << w;

  // The 1-D cases of HandComputed1DPaddingAndGroups, along D (H = W = 1).
  Tensor xd = make_tensor<float>({1, 1, 2, 1, 1}, {1, 2});
  Tensor wd = make_tensor<float>({1, 1, 3, 1, 1}, {1, 1, 1});
  auto run = [&](const AttrStore& a) {
    OpResult rr = run_op("ConvTranspose", {xd, wd}, a);
    EXPECT_TRUE(rr.status.ok()) << rr.status.message();
    return rr.status.ok() ? rr.outputs[0].values<float>() : std::vector<float>{};
  };
  const std::vector<int64_t> s2 = {2, 1, 1};
  EXPECT_EQ(run(AttrStore().set_ints("strides", s2)), (std::vector<float>{1, 1, 3, 2, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", s2).set_ints("pads", {1, 0, 0, 1, 0, 0})),
            (std::vector<float>{1, 3, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", s2).set_ints("output_padding", {1, 0, 0})),
            (std::vector<float>{1, 1, 3, 2, 2, 0}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", s2).set_str("auto_pad", "SAME_UPPER")),
            (std::vector<float>{1, 1, 3, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", s2).set_str("auto_pad", "SAME_LOWER")),
            (std::vector<float>{1, 3, 2, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", s2).set_ints("output_shape", {4, 1, 1}).set_ints("pads", {2, 0, 0, 2, 0, 0})),
            (std::vector<float>{1, 3, 2, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("strides", s2).set_ints("output_shape", {1, 1, 3, 1, 1})),
            (std::vector<float>{1, 3, 2}));
  EXPECT_EQ(run(AttrStore().set_ints("dilations", {2, 1, 1})), (std::vector<float>{1, 2, 1, 2, 1, 2}));

  // Groups (depthwise): each input channel feeds its own output channel.
  Tensor xg = make_tensor<float>({1, 2, 1, 1, 1}, {1, 2});
  Tensor wg = make_tensor<float>({2, 1, 1, 1, 2}, {3, 4, 5, 6});
  r = run_op("ConvTranspose", {xg, wg}, AttrStore().set_int("group", 2));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 2, 1, 1, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, 4, 10, 12}));
}

/// One transposed convolution to check: everything the reference needs, chosen at random.
struct Case {
  int64_t n = 1, c = 1, m = 1, group = 1;
  std::vector<int64_t> in, k, s, d, pads, out_pad, out_shape;  // pads: begins then ends
  std::string auto_pad = "NOTSET";
};

/// Python-style floor division by 2.
int64_t pyhalf(int64_t t) { return static_cast<int64_t>(std::floor(t / 2.0)); }

/// Output size and begin pad of one axis, from the ONNX operator text.
void onnx_axis(const Case& cc, size_t a, int64_t* out, int64_t* begin) {
  size_t nsp = cc.in.size();
  int64_t full = cc.s[a] * (cc.in[a] - 1) + cc.out_pad[a] + (cc.k[a] - 1) * cc.d[a] + 1;
  bool same = cc.auto_pad == "SAME_UPPER" || cc.auto_pad == "SAME_LOWER";
  if (!cc.out_shape.empty() || same) {
    *out = !cc.out_shape.empty() ? cc.out_shape[a] : cc.in[a] * cc.s[a];
    int64_t total = full - *out;
    *begin = cc.auto_pad == "SAME_UPPER" ? pyhalf(total) : total - pyhalf(total);
    return;
  }
  bool valid = cc.auto_pad == "VALID";
  *begin = valid ? 0 : cc.pads[a];
  *out = full - *begin - (valid ? 0 : cc.pads[nsp + a]);
}

/// Every input element times every tap, added where it lands (N-d, double).
std::vector<double> reference(const Case& cc, const Tensor& x, const Tensor& w, const Tensor* b,
                              std::vector<int64_t>* out_shape) {
  size_t nsp = cc.in.size();
  std::vector<int64_t> out(nsp), begin(nsp);
  for (size_t a = 0; a < nsp; ++a) onnx_axis(cc, a, &out[a], &begin[a]);
  *out_shape = {cc.n, cc.m};
  out_shape->insert(out_shape->end(), out.begin(), out.end());
  int64_t in_sp = 1, k_sp = 1, out_sp = 1;
  for (size_t a = 0; a < nsp; ++a) in_sp *= cc.in[a], k_sp *= cc.k[a], out_sp *= std::max<int64_t>(out[a], 0);
  int64_t cg = cc.c / cc.group, mg = cc.m / cc.group;
  std::vector<double> y(cc.n * cc.m * out_sp, 0.0);
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t m = 0; m < cc.m; ++m)
      for (int64_t o = 0; o < out_sp; ++o) y[(n * cc.m + m) * out_sp + o] = b ? b->at(m) : 0.0;
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t ic = 0; ic < cc.c; ++ic)
      for (int64_t mm = 0; mm < mg; ++mm)
        for (int64_t i = 0; i < in_sp; ++i)
          for (int64_t t = 0; t < k_sp; ++t) {
            int64_t irest = i, trest = t, flat = 0;
            bool inside = true;
            for (int a = static_cast<int>(nsp) - 1, stride = 1; a >= 0; --a) {
              int64_t ii = irest % cc.in[a], kk = trest % cc.k[a];
              irest /= cc.in[a];
              trest /= cc.k[a];
              int64_t oc = ii * cc.s[a] - begin[a] + kk * cc.d[a];
              inside &= oc >= 0 && oc < out[a];
              flat += oc * stride;
              stride *= static_cast<int>(std::max<int64_t>(out[a], 1));
            }
            if (!inside) continue;
            int64_t m = (ic / cg) * mg + mm;
            y[(n * cc.m + m) * out_sp + flat] += x.at((n * cc.c + ic) * in_sp + i) * w.at((ic * mg + mm) * k_sp + t);
          }
  return y;
}

/// Runs `iters` random transposed convolutions with `nsp_lo` to `nsp_hi` spatial axes (all
/// attributes, group, bias, auto_pad, output_padding, output_shape) against the reference, also
/// inside oversized slots. Counts the cases that ran and the refused empty outputs.
void conv_transpose_sweep(uint32_t seed, int iters, size_t nsp_lo, size_t nsp_hi, int* ran, int* rejected) {
  std::mt19937 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* modes[] = {"NOTSET", "NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
  const int64_t max_in[] = {0, 9, 5, 4};  // per spatial rank: keeps the reference quick
  for (int iter = 0; iter < iters; ++iter) {
    Case cc;
    size_t nsp = pick(nsp_lo, nsp_hi);
    cc.group = pick(1, 3);
    cc.n = pick(1, 2);
    cc.c = cc.group * pick(1, 2);
    cc.m = cc.group * pick(1, 3);
    cc.auto_pad = modes[pick(0, 5)];
    for (size_t a = 0; a < nsp; ++a) {
      cc.in.push_back(pick(1, max_in[nsp]));
      cc.k.push_back(pick(1, 4));
      cc.s.push_back(pick(1, 3));
      cc.d.push_back(pick(1, 2));
      cc.out_pad.push_back(pick(0, 1) ? pick(0, 2) : 0);
    }
    for (size_t a = 0; a < 2 * nsp; ++a) cc.pads.push_back(pick(0, 3));
    AttrStore attrs;
    if (cc.group != 1 || pick(0, 1)) attrs.set_int("group", cc.group);
    if (cc.auto_pad != "NOTSET" || pick(0, 1)) attrs.set_str("auto_pad", cc.auto_pad);
    if (cc.auto_pad == "NOTSET") attrs.set_ints("pads", cc.pads);
    attrs.set_ints("strides", cc.s).set_ints("dilations", cc.d).set_ints("output_padding", cc.out_pad);
    if (pick(0, 1)) attrs.set_ints("kernel_shape", cc.k);
    if (cc.auto_pad != "VALID" && pick(0, 5) == 0) {
      for (size_t a = 0; a < nsp; ++a) cc.out_shape.push_back(pick(1, 12));
      attrs.set_ints("output_shape", cc.out_shape);
    }

    std::vector<int64_t> xs = {cc.n, cc.c}, ws = {cc.c, cc.m / cc.group};
    xs.insert(xs.end(), cc.in.begin(), cc.in.end());
    ws.insert(ws.end(), cc.k.begin(), cc.k.end());
    Tensor x = random_f32(rng, xs), w = random_f32(rng, ws), b = random_f32(rng, {cc.m});
    bool with_bias = pick(0, 1);
    std::vector<Tensor> inputs = {x, w};
    if (with_bias) inputs.push_back(b);

    std::vector<int64_t> want_shape;
    std::vector<double> want = reference(cc, x, w, with_bias ? &b : nullptr, &want_shape);
    bool empty = false;
    for (int64_t d : want_shape) empty |= d < 1;
    SlotRun s = run_op_in_slots("ConvTranspose", inputs, attrs);
    std::string what = "iter " + std::to_string(iter);
    if (empty) {
      ASSERT_TRUE(has_text(s.exact.status, "must be at least 1")) << what;
      ++*rejected;
      continue;
    }
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, want_shape) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(s.exact.outputs[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << what << " at " << i;
      ASSERT_EQ(s.outputs[0].at(i), s.exact.outputs[0].at(i)) << "slotted run differs, " << what;
    }
    ++*ran;
  }
}

TEST(ConvTranspose, RandomSweepAgainstReference) {
  int ran = 0, rejected = 0;
  conv_transpose_sweep(20240612, 400, 1, 2, &ran, &rejected);
  EXPECT_GT(ran, 300);
  EXPECT_GT(rejected, 0);
}

TEST(ConvTranspose, RandomSweep3DAgainstReference) {
  int ran = 0, rejected = 0;
  conv_transpose_sweep(20260302, 400, 3, 3, &ran, &rejected);
  EXPECT_GT(ran, 250);
  EXPECT_GT(rejected, 0);
}

TEST(ConvTranspose, Errors) {
  auto zeros = [](std::vector<int64_t> s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return make_tensor<float>(s, std::vector<float>(n, 0.f));
  };
  auto status = [](const std::vector<Tensor>& in, const AttrStore& a = AttrStore()) {
    return run_op("ConvTranspose", in, a).status;
  };
  Tensor x = zeros({1, 4, 5, 5});
  EXPECT_TRUE(has_text(status({x, zeros({3, 2, 3, 3})}),
                       "node 'test' (ConvTranspose): sizes 4 and 3 must be equal (input channels of [1, 4, 5, 5] "
                       "must equal dim 0 of weight [3, 2, 3, 3])"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3, 3})}, AttrStore().set_int("group", 3)),
                       "size 4 must be divisible by 3 (input channels of weight [4, 2, 3, 3]"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3, 3})}, AttrStore().set_int("group", 0)),
                       "attribute 'group' must be >= 1, got 0"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3, 3}), zeros({2})}, AttrStore().set_int("group", 2)),
                       "sizes 2 and 4 must be equal (bias length must equal the output channels, group 2 times dim 1 "
                       "of weight [4, 2, 3, 3])"));
  EXPECT_TRUE(has_text(status({zeros({1, 4, 1, 2, 2, 2}), zeros({4, 2, 1, 1, 1, 1})}),
                       "supports 1-D, 2-D and 3-D transposed convolution (input rank 3, 4 or 5), got input "
                       "[1, 4, 1, 2, 2, 2]"));
  Tensor x3 = zeros({1, 4, 3, 5, 5});
  EXPECT_TRUE(has_text(status({x3, zeros({4, 2, 3, 3})}), "weight [4, 2, 3, 3] must have the rank of input [1, 4, 3, 5, 5]"));
  EXPECT_TRUE(has_text(status({x3, zeros({4, 2, 3, 3, 3})}, AttrStore().set_ints("output_shape", {7, 7})),
                       "attribute 'output_shape' needs 3 values (or 5 with N and C), got 2"));
  EXPECT_TRUE(has_text(status({x3, zeros({4, 2, 3, 3, 3})}, AttrStore().set_ints("output_padding", {0, 0})),
                       "attribute 'output_padding' needs 3 values, got 2"));
  EXPECT_TRUE(has_text(status({x3, zeros({4, 2, 1, 1, 1})}, AttrStore().set_ints("pads", {0, 0, 3, 0, 0, 3})),
                       "size -1 must be at least 1 (output size of spatial axis 2"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3})}), "weight [4, 2, 3] must have the rank of input [1, 4, 5, 5]"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3, 3})}, AttrStore().set_ints("output_shape", {7})),
                       "attribute 'output_shape' needs 2 values (or 4 with N and C), got 1"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3, 3})}, AttrStore().set_ints("output_padding", {0, -1})),
                       "attribute 'output_padding' value -1 must be >= 0"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3, 3})}, AttrStore().set_ints("kernel_shape", {3, 2})),
                       "attribute 'kernel_shape' must match weight [4, 2, 3, 3]"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 3, 3})}, AttrStore().set_str("auto_pad", "SAME")),
                       "attribute 'auto_pad' is 'SAME', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER"));
  EXPECT_TRUE(has_text(status({x, zeros({4, 2, 1, 1})}, AttrStore().set_ints("pads", {3, 0, 2, 0})),
                       "size 0 must be at least 1 (output size of spatial axis 0"));
  EXPECT_TRUE(has_text(status({x}), "expects 2 to 3 inputs, got 1"));
}

class ConvTransposeSymbolic : public ::testing::Test {
 protected:
  ExprId k(int64_t v) { return pool.constant(v); }
  SymResult infer_ct(std::vector<std::vector<ExprId>> shapes, const AttrStore& a = AttrStore()) {
    std::vector<kernels::SymTensor> in;
    for (auto& s : shapes) in.push_back(sym_input(DType::kF32, s));
    return infer(pool, "ConvTranspose", in, a);
  }
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 256, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 256, 1}));
};

TEST_F(ConvTransposeSymbolic, ReadableShapes) {
  // The usual 2x upsampling block: kernel 4, stride 2, pads 1.
  AttrStore a;
  a.set_ints("strides", {2, 2}).set_ints("pads", {1, 1, 1, 1});
  SymResult r = infer_ct({{batch, k(8), h, w}, {k(8), k(4), k(4), k(4)}, {k(4)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 4, 2*H, 2*W]");
  EXPECT_EQ(guards_text(pool, r), "");

  SymResult same = infer_ct({{batch, k(8), h}, {k(8), k(2), k(3)}},
                            AttrStore().set_ints("strides", {3}).set_str("auto_pad", "SAME_LOWER").set_int("group", 2));
  ASSERT_TRUE(same.status.ok()) << same.status.message();
  EXPECT_EQ(same.shape, "[batch, 4, 3*H]");

  SymResult cropped = infer_ct({{batch, k(8), h}, {k(8), k(2), k(1)}}, AttrStore().set_ints("pads", {1, 1}));
  ASSERT_TRUE(cropped.status.ok()) << cropped.status.message();
  EXPECT_EQ(cropped.shape, "[batch, 2, H - 2]");
  EXPECT_EQ(guards_text(pool, cropped), "H - 2 >= 1");

  ExprId c = pool.dim(pool.add_dim({"C", 1, 64, 1}));
  SymResult g = infer_ct({{batch, c, h}, {k(8), k(2), k(3)}});
  ASSERT_TRUE(g.status.ok()) << g.status.message();
  EXPECT_EQ(guards_text(pool, g), "C == 8");
}

TEST_F(ConvTransposeSymbolic, BindThenExecuteBelowTheBound) {
  AttrStore a;
  a.set_ints("strides", {2, 3}).set_ints("pads", {1, 0, 2, 1}).set_ints("dilations", {1, 2});
  a.set_ints("output_padding", {1, 0}).set_int("group", 2);
  SymResult r = infer_ct({{batch, k(4), h, w}, {k(4), k(1), k(3), k(2)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 2, 2*H - 1, 3*W - 1]");
  EXPECT_EQ(guards_text(pool, r), "");  // both are >= 1 for every H, W >= 1
  std::mt19937 rng(6);
  for (int it = 0; it < 20; ++it) {
    int64_t nb = 1 + rng() % 3, hv = 1 + rng() % 30, wv = 1 + rng() % 30;
    Case cc;
    cc.n = nb, cc.c = 4, cc.m = 2, cc.group = 2;
    cc.in = {hv, wv}, cc.k = {3, 2}, cc.s = {2, 3}, cc.d = {1, 2}, cc.pads = {1, 0, 2, 1}, cc.out_pad = {1, 0};
    Tensor x = random_f32(rng, {nb, 4, hv, wv}), wt = random_f32(rng, {4, 1, 3, 2});
    std::vector<int64_t> want_shape;
    std::vector<double> want = reference(cc, x, wt, nullptr, &want_shape);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, {nb, hv, wv});
    ASSERT_EQ(out[0].shape, want_shape) << "H=" << hv << " W=" << wv;
    ASSERT_EQ(run_kernel("ConvTranspose", {x, wt}, &out, a), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(out[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << "H=" << hv << " W=" << wv;
  }
}

/// 3-D: symbolic depth, height and width (dims in this order after batch).
class ConvTranspose3DSymbolic : public ConvTransposeSymbolic {
 protected:
  ExprId d = pool.dim(pool.add_dim({"D", 1, 32, 1}));
};

TEST_F(ConvTranspose3DSymbolic, ReadableShapes) {
  AttrStore a;
  a.set_ints("strides", {2, 2, 2}).set_ints("pads", {1, 1, 1, 1, 1, 1});
  SymResult r = infer_ct({{batch, k(8), d, h, w}, {k(8), k(4), k(4), k(4), k(4)}, {k(4)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 4, 2*D, 2*H, 2*W]");
  EXPECT_EQ(guards_text(pool, r), "");

  SymResult same = infer_ct({{batch, k(6), d, h, w}, {k(6), k(1), k(3), k(2), k(1)}},
                            AttrStore().set_ints("strides", {1, 2, 3}).set_str("auto_pad", "SAME_LOWER").set_int("group", 6));
  ASSERT_TRUE(same.status.ok()) << same.status.message();
  EXPECT_EQ(same.shape, "[batch, 6, D, 2*H, 3*W]");

  SymResult cropped = infer_ct({{batch, k(8), d, h, w}, {k(8), k(2), k(1), k(3), k(1)}},
                               AttrStore().set_ints("pads", {1, 0, 0, 1, 1, 0}));
  ASSERT_TRUE(cropped.status.ok()) << cropped.status.message();
  EXPECT_EQ(cropped.shape, "[batch, 2, D - 2, H + 1, W]");
  EXPECT_EQ(guards_text(pool, cropped), "D - 2 >= 1");

  SymResult fixed = infer_ct({{batch, k(8), d, h, w}, {k(8), k(2), k(3), k(3), k(3)}},
                             AttrStore().set_ints("strides", {2, 2, 2}).set_ints("output_shape", {5, 6, 7}));
  ASSERT_TRUE(fixed.status.ok()) << fixed.status.message();
  EXPECT_EQ(fixed.shape, "[batch, 2, 5, 6, 7]");
}

TEST_F(ConvTranspose3DSymbolic, BindThenExecuteBelowTheBound) {
  // Every attribute differs per axis, so a slot mix-up cannot go unnoticed.
  AttrStore a;
  a.set_ints("strides", {3, 1, 2}).set_ints("pads", {0, 1, 1, 2, 0, 0}).set_ints("dilations", {2, 1, 1});
  a.set_ints("output_padding", {1, 0, 1}).set_int("group", 2);
  SymResult r = infer_ct({{batch, k(4), d, h, w}, {k(4), k(3), k(2), k(3), k(2)}, {k(6)}}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 6, 3*D - 1, H + 1, 2*W]");
  EXPECT_EQ(guards_text(pool, r), "");
  std::mt19937 rng(8);
  for (int it = 0; it < 30; ++it) {
    int64_t nb = 1 + rng() % 2, dv = 1 + rng() % 8, hv = 1 + rng() % 8, wv = 1 + rng() % 8;
    if (it == 0) dv = 1, hv = 1, wv = 1;
    std::vector<int64_t> dims = {nb, hv, wv, dv};
    Case cc;
    cc.n = nb, cc.c = 4, cc.m = 6, cc.group = 2;
    cc.in = {dv, hv, wv}, cc.k = {2, 3, 2}, cc.s = {3, 1, 2}, cc.d = {2, 1, 1}, cc.pads = {0, 1, 1, 2, 0, 0};
    cc.out_pad = {1, 0, 1};
    Tensor x = random_f32(rng, {nb, 4, dv, hv, wv}), wt = random_f32(rng, {4, 3, 2, 3, 2}), b = random_f32(rng, {6});
    std::vector<int64_t> want_shape;
    std::vector<double> want = reference(cc, x, wt, &b, &want_shape);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
    std::string what = "D=" + std::to_string(dv) + " H=" + std::to_string(hv) + " W=" + std::to_string(wv);
    ASSERT_EQ(out[0].shape, want_shape) << what;
    ASSERT_EQ(run_kernel("ConvTranspose", {x, wt, b}, &out, a), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(out[0].at(i), want[i], 1e-4 * (1 + std::abs(want[i]))) << what;
  }
}

}  // namespace
}  // namespace kiln::testing
