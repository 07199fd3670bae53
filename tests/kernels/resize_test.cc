// Resize and Upsample: hand cases, a seeded sweep of shapes, scales/sizes and every mode
// (nearest, linear, cubic) against a reference written from the ONNX formulas, errors, and
// symbolic output sizes run below the bound.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;
using Shape = std::vector<int64_t>;

/// The resampling attributes of one case.
struct Spec {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  float cubic_a = -0.75f;
  bool exclude_outside = false;
};

/// x_original for output coordinate x, per coordinate_transformation_mode.
double to_original(const std::string& coord, int64_t x, double scale, int64_t in, int64_t out) {
  if (coord == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (coord == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (coord == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out - 1);
  if (coord == "asymmetric") return x / scale;
  return (x + 0.5) / scale;  // tf_half_pixel_for_nn
}

/// Cubic weights as the ONNX reference computes them: the 4 indices of the edge-padded axis
/// nearest v (ties to the left), Keys' kernel at ratio v - floor(v) (1 on an exact hit),
/// outside taps dropped and the rest renormalized under exclude_outside; padded indices fold
/// onto the edge.
std::vector<double> cubic_weights(const Spec& sp, double v, int64_t in) {
  std::vector<int64_t> idx;
  for (int64_t j = -2; j < in + 2; ++j) idx.push_back(j);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return std::abs(v - a) < std::abs(v - b); });
  idx.resize(4);
  std::sort(idx.begin(), idx.end());
  const double ratio = v == std::floor(v) ? 1.0 : v - std::floor(v), A = sp.cubic_a;
  double c[4] = {((A * (ratio + 1) - 5 * A) * (ratio + 1) + 8 * A) * (ratio + 1) - 4 * A,
                 ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
                 ((A + 2) * (1 - ratio) - (A + 3)) * (1 - ratio) * (1 - ratio) + 1,
                 ((A * ((1 - ratio) + 1) - 5 * A) * ((1 - ratio) + 1) + 8 * A) * ((1 - ratio) + 1) - 4 * A};
  if (sp.exclude_outside) {
    double sum = 0;
    for (int i = 0; i < 4; ++i) sum += (c[i] = idx[i] < 0 || idx[i] >= in ? 0.0 : c[i]);
    for (double& ci : c) ci /= sum;
  }
  std::vector<double> w(in, 0.0);
  for (int i = 0; i < 4; ++i) w[std::clamp<int64_t>(idx[i], 0, in - 1)] += c[i];
  return w;
}

/// Weight of every input index of one axis for output coordinate x: one-hot for nearest,
/// the hat function max(0, 1 - |v - j|) around the clamped coordinate v for linear.
std::vector<double> axis_weights(const Spec& sp, int64_t x, double scale, int64_t in, int64_t out) {
  double v = to_original(sp.coord, x, scale, in, out);
  if (sp.mode == "cubic") return cubic_weights(sp, v, in);
  std::vector<double> w(in, 0.0);
  if (sp.mode == "linear") {
    v = std::clamp(v, 0.0, static_cast<double>(in - 1));
    for (int64_t j = 0; j < in; ++j) w[j] = std::max(0.0, 1 - std::abs(v - j));
    return w;
  }
  double r = sp.nearest == "round_prefer_floor" ? std::ceil(v - 0.5)
             : sp.nearest == "round_prefer_ceil" ? std::floor(v + 0.5)
             : sp.nearest == "floor"             ? std::floor(v)
                                                 : std::ceil(v);
  w[std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1)] = 1;
  return w;
}

/// Resamples the last two axes (the last one for rank 1) in double. `scales` holds one
/// value per axis, or is empty to use out/in.
std::vector<double> reference(const Tensor& x, const Shape& out_shape, const std::vector<float>& scales,
                              const Spec& sp) {
  const int r = static_cast<int>(x.shape.size());
  const int64_t in_h = r >= 2 ? x.shape[r - 2] : 1, in_w = x.shape[r - 1];
  const int64_t out_h = r >= 2 ? out_shape[r - 2] : 1, out_w = out_shape[r - 1];
  auto scale_of = [&](int k, int64_t in, int64_t out) {
    return scales.empty() ? static_cast<double>(out) / in : static_cast<double>(scales[k]);
  };
  const double sh = r >= 2 ? scale_of(r - 2, in_h, out_h) : 1.0, sw = scale_of(r - 1, in_w, out_w);
  int64_t outer = 1;
  for (int k = 0; k + 2 < r; ++k) outer *= x.shape[k];
  std::vector<double> y;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t oh = 0; oh < out_h; ++oh) {
      std::vector<double> wh = r >= 2 ? axis_weights(sp, oh, sh, in_h, out_h) : std::vector<double>{1.0};
      for (int64_t ow = 0; ow < out_w; ++ow) {
        std::vector<double> ww = axis_weights(sp, ow, sw, in_w, out_w);
        double acc = 0;
        for (int64_t jh = 0; jh < in_h; ++jh)
          for (int64_t jw = 0; jw < in_w; ++jw) acc += wh[jh] * ww[jw] * x.at((o * in_h + jh) * in_w + jw);
        y.push_back(acc);
      }
    }
  return y;
}

AttrStore attrs_of(const Spec& sp) {
  AttrStore a;
  a.set_str("mode", sp.mode).set_str("coordinate_transformation_mode", sp.coord).set_str("nearest_mode", sp.nearest);
  if (sp.mode == "cubic") a.set_float("cubic_coeff_a", sp.cubic_a).set_int("exclude_outside", sp.exclude_outside);
  return a;
}

Tensor f32s(const std::vector<float>& v) { return make_tensor<float>({static_cast<int64_t>(v.size())}, v); }
Tensor i64s(const Shape& v) { return make_tensor<int64_t>({static_cast<int64_t>(v.size())}, v); }

void expect_near(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(t.at(i), want[i], 1e-5 * (1 + std::abs(want[i]))) << what;
}

/// Runs Resize on x with scales (opset-13 form, roi omitted) and returns output 0's values.
std::vector<float> resize_scales(const Tensor& x, const std::vector<float>& scales, const Spec& sp) {
  OpResult r = run_op("Resize", {x, absent(), f32s(scales)}, attrs_of(sp));
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  return r.status.ok() ? r.outputs[0].values<float>() : std::vector<float>{};
}

std::vector<float> resize_sizes(const Tensor& x, const Shape& sizes, const Spec& sp) {
  OpResult r = run_op("Resize", {x, absent(), absent(), i64s(sizes)}, attrs_of(sp));
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  return r.status.ok() ? r.outputs[0].values<float>() : std::vector<float>{};
}

TEST(Resize, HandComputedNearest) {
  Tensor x = make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  OpResult r = run_op("Resize", {x, absent(), f32s({1, 1, 2, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ(r.outputs[0].values<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));

  // Halving [1, 2, 3, 4] with half_pixel lands exactly between pixels: x_original 0.5, 2.5.
  Tensor row = make_tensor<float>({1, 1, 4}, {1, 2, 3, 4});
  Spec sp;
  EXPECT_EQ(resize_sizes(row, {1, 1, 2}, sp), (std::vector<float>{1, 3}));
  sp.nearest = "round_prefer_ceil";
  EXPECT_EQ(resize_sizes(row, {1, 1, 2}, sp), (std::vector<float>{2, 4}));
  sp.nearest = "floor";
  EXPECT_EQ(resize_scales(row, {1, 1, 0.5f}, sp), (std::vector<float>{1, 3}));
  sp.nearest = "ceil";
  EXPECT_EQ(resize_scales(row, {1, 1, 0.5f}, sp), (std::vector<float>{2, 4}));
  // asymmetric + floor is plain subsampling; 3 of 4 picks 0, 1, 2.
  sp = {"nearest", "asymmetric", "floor"};
  EXPECT_EQ(resize_sizes(row, {1, 1, 3}, sp), (std::vector<float>{1, 2, 3}));
}

TEST(Resize, HandComputedLinear) {
  Tensor x = make_tensor<float>({1, 1, 2}, {0, 4});
  Spec sp{"linear", "half_pixel", "round_prefer_floor"};
  EXPECT_EQ(resize_scales(x, {1, 1, 2}, sp), (std::vector<float>{0, 1, 3, 4}));  // -0.25 .. 1.25, clamped
  sp.coord = "asymmetric";
  EXPECT_EQ(resize_scales(x, {1, 1, 2}, sp), (std::vector<float>{0, 2, 4, 4}));
  sp.coord = "align_corners";
  EXPECT_EQ(resize_sizes(x, {1, 1, 3}, sp), (std::vector<float>{0, 2, 4}));
  sp.coord = "pytorch_half_pixel";  // one output pixel reads x_original 0
  EXPECT_EQ(resize_sizes(make_tensor<float>({1, 4}, {1, 2, 3, 4}), {1, 1}, sp), (std::vector<float>{1}));
  sp.coord = "half_pixel";
  EXPECT_EQ(resize_sizes(make_tensor<float>({1, 4}, {1, 2, 3, 4}), {1, 1}, sp), (std::vector<float>{2.5f}));

  // Bilinear 2x2 -> 3x3 with align_corners: corners kept, centre is the mean.
  Tensor sq = make_tensor<float>({1, 1, 2, 2}, {0, 2, 4, 6});
  sp.coord = "align_corners";
  EXPECT_EQ(resize_sizes(sq, {1, 1, 3, 3}, sp), (std::vector<float>{0, 1, 2, 2, 3, 4, 4, 5, 6}));

  // Opset 11 form: roi and scales present but empty, sizes given.
  OpResult r = run_op("Resize", {sq, make_tensor<float>({0}, {}), make_tensor<float>({0}, {}), i64s({1, 1, 3, 3})},
                      attrs_of(sp));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 1, 2, 2, 3, 4, 4, 5, 6}));
}

TEST(Resize, HandComputedCubic) {
  // Doubling [0, 1, 2, 3] with asymmetric coordinates: even outputs hit inputs exactly,
  // odd ones sit halfway, where Keys' kernel (a = -0.75) weighs the neighbours
  // -0.09375, 0.59375, 0.59375, -0.09375; edges repeat the border value.
  Spec sp;
  sp.mode = "cubic";
  sp.coord = "asymmetric";
  Tensor x = make_tensor<float>({4}, {0, 1, 2, 3});
  std::vector<float> y = resize_scales(x, {2.f}, sp);
  const std::vector<float> want = {0.f, 0.40625f, 1.f, 1.5f, 2.f, 2.59375f, 3.f, 3.09375f};
  ASSERT_EQ(y.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
}

TEST(Resize, RandomSweepAgainstReference) {
  std::mt19937 rng(1704);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const float scale_choices[] = {0.25f, 0.5f, 0.75f, 1.f, 1.25f, 1.5f, 2.f, 2.5f, 3.f};
  const char* coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"};
  const char* nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int ran = 0, rejected = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int rank = static_cast<int>(std::vector<int64_t>{1, 2, 3, 4, 4, 4}[pick(0, 5)]);
    Shape shape = random_shape(rng, rank, 6);
    for (int k = 0; k + 2 < rank; ++k) shape[k] = pick(1, 3);
    const char* modes[] = {"nearest", "linear", "cubic"};
    Spec sp{modes[pick(0, 2)], coords[pick(0, 4)], nearests[pick(0, 3)], pick(0, 1) ? -0.75f : -0.5f, pick(0, 1) == 1};
    const bool use_scales = pick(0, 1), opset11 = pick(0, 2) == 0;
    std::vector<float> scales(rank, 1.f);
    Shape out = shape;
    for (int k = std::max(0, rank - 2); k < rank; ++k) {
      if (use_scales) {
        scales[k] = scale_choices[pick(0, 8)];
        out[k] = static_cast<int64_t>(std::floor(shape[k] * static_cast<double>(scales[k])));
      } else {
        out[k] = pick(1, 9);
      }
    }
    Tensor x = random_f32(rng, shape);
    Tensor empty_f32 = make_tensor<float>({0}, {});
    std::vector<Tensor> inputs = {x, opset11 ? empty_f32 : absent()};
    if (use_scales) inputs.push_back(f32s(scales));
    else inputs.insert(inputs.end(), {opset11 ? empty_f32 : absent(), i64s(out)});

    const std::string what = "iter " + std::to_string(iter) + " " + sp.mode + "/" + sp.coord + "/" + sp.nearest;
    SlotRun s = run_op_in_slots("Resize", inputs, attrs_of(sp));
    if (*std::min_element(out.begin(), out.end()) < 1) {
      ASSERT_TRUE(has_text(s.exact.status, "must be at least 1")) << what;
      ++rejected;
      continue;
    }
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, out) << what;
    ASSERT_EQ(s.kernel, kernels::KernelStatus::kOk) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    expect_near(s.exact.outputs[0], reference(x, out, use_scales ? scales : std::vector<float>{}, sp), what);
    ASSERT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << "slotted run differs, " << what;
    ++ran;
  }
  EXPECT_GT(ran, 300);
  EXPECT_GT(rejected, 0);
}

TEST(Resize, Errors) {
  Tensor x = make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto status = [](const std::vector<Tensor>& in, const AttrStore& a = AttrStore()) {
    return run_op("Resize", in, a).status;
  };
  Tensor s2 = f32s({1, 1, 2, 2});
  EXPECT_TRUE(has_text(status({x, s2}), "node 'test' (Resize): has 2 inputs (X, scales), the opset-10 form, which is "
                                        "not supported; re-export with opset >= 11"));
  EXPECT_TRUE(has_text(status({x, absent(), s2}, AttrStore().set_str("mode", "area")),
                       "attribute 'mode' has unsupported value 'area'"));
  EXPECT_TRUE(has_text(status({x, absent(), s2}, AttrStore().set_str("coordinate_transformation_mode",
                                                                    "tf_crop_and_resize")),
                       "coordinate_transformation_mode 'tf_crop_and_resize' is not supported"));
  EXPECT_TRUE(has_text(status({x, absent(), s2}, AttrStore().set_str("nearest_mode", "round")),
                       "attribute 'nearest_mode' has unsupported value 'round'"));
  EXPECT_TRUE(has_text(status({x, absent(), s2, i64s({1, 1, 4, 4})}),
                       "has both scales (input #2) and sizes (input #3); give only one"));
  EXPECT_TRUE(has_text(status({x, absent(), absent()}), "needs scales (input #2) or sizes (input #3)"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({2, 1, 2, 2})}),
                       "scale 2.000000 on axis 0: only the last two axes can be resized, the others need scale 1"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({1, 1, 2})}),
                       "has 3 scales for input [1, 1, 2, 2] of rank 4; expected one per axis"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({1, 1, 0, 2})}), "scale 0.000000 on axis 2 must be > 0"));
  EXPECT_TRUE(has_text(status({x, absent(), absent(), i64s({1, 2, 4, 4})}),
                       "sizes 2 and 1 must be equal (only the last two axes can be resized; sizes [1, 2, 4, 4] "
                       "must keep axis 1 of input [1, 1, 2, 2])"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({1, 1, 0.25f, 1})}),
                       "size 0 must be at least 1 (output size of axis 2 for input [1, 1, 2, 2])"));
  EXPECT_TRUE(has_text(status({x, absent(), s2}, AttrStore().set_int("antialias", 1)),
                       "attribute 'antialias' is not supported"));
  // Regression (fuzz_onnx, UBSan): a huge or infinite scale was converted to an integer size.
  for (float huge : {1e30f, std::numeric_limits<float>::infinity()}) {
    EXPECT_TRUE(has_text(status({x, absent(), f32s({1, 1, huge, 1})}),
                         "on axis 2 (size 2) makes the output size 2^62 or more"));
  }
}

class ResizeSymbolic : public ::testing::Test {
 protected:
  /// Shape inference for Resize on [batch, 3, H, W] with constant scales.
  SymResult with_scales(const std::vector<float>& scales, const Spec& sp = Spec()) {
    held = f32s(scales);
    return infer(pool, "Resize", {x(), absent_input(), const_input(pool, held)}, attrs_of(sp));
  }
  kernels::SymTensor x() { return sym_input(DType::kF32, {batch, pool.constant(3), h, w}); }
  static kernels::SymTensor absent_input() {
    kernels::SymTensor t;
    t.present = false;
    return t;
  }
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 128, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 128, 1}));
  Tensor held;
};

TEST_F(ResizeSymbolic, OutputSizesFromScalesAndSizes) {
  SymResult r = with_scales({1, 1, 2, 2});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, 2*H, 2*W]");
  EXPECT_EQ(guards_text(pool, r), "");

  r = with_scales({1, 1, 0.5f, 1});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, floordiv(H,2), W]");
  EXPECT_EQ(guards_text(pool, r), "floordiv(H,2) >= 1");

  r = with_scales({1, 1, 1.5f, 2.5f});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, H + floordiv(H,2), 2*W + floordiv(W,2)]");
  for (int64_t v : {1, 2, 3, 7, 128})
    EXPECT_EQ(eval_shape(pool, r.outputs[0].shape, {1, v, v}), (Shape{1, 3, v * 3 / 2, v * 5 / 2}));

  r = with_scales({1, 1, 1.7320508f, 1});
  EXPECT_TRUE(has_text(r.status, "scale 1.732051 on axis 2 (size H) is not a fraction p/q with q <= 100, so the "
                                 "output size cannot be written symbolically; give sizes instead of scales or pin "
                                 "the dim"));

  // Sizes taken from another tensor's shape (torch's interpolate(size=skip.shape[2:])).
  ExprId hs = pool.dim(pool.add_dim({"Hs", 1, 256, 1}));
  ExprId ws = pool.dim(pool.add_dim({"Ws", 1, 256, 1}));
  r = infer(pool, "Resize",
            {x(), absent_input(), absent_input(), sym_values_input(pool, {batch, pool.constant(3), hs, ws})},
            attrs_of({"linear", "half_pixel", "floor"}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, Hs, Ws]");
  EXPECT_EQ(guards_text(pool, r), "");
  r = infer(pool, "Resize", {x(), absent_input(), absent_input(), sym_values_input(pool, {hs, pool.constant(3), hs, ws})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(guards_text(pool, r), "Hs == batch");

  // Scales or sizes that export cannot see.
  r = infer(pool, "Resize", {x(), absent_input(), sym_input(DType::kF32, {pool.constant(4)})});
  EXPECT_TRUE(has_text(r.status, "scales input #2 must be a constant"));
  r = infer(pool, "Resize", {x(), absent_input(), absent_input(), sym_input(DType::kI64, {pool.constant(4)})});
  EXPECT_TRUE(has_text(r.status, "sizes input #3 must be a constant or computed from shapes"));
}

TEST_F(ResizeSymbolic, BindThenExecuteBelowTheBound) {
  Spec sp{"linear", "half_pixel", "round_prefer_floor"};
  SymResult r = with_scales({1, 1, 1.5f, 0.5f}, sp);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  std::mt19937 rng(7);
  for (Shape dims : {Shape{1, 2, 2}, Shape{2, 5, 9}, Shape{1, 17, 4}, Shape{3, 1, 30}}) {
    for (const char* mode : {"linear", "nearest"}) {
      sp.mode = mode;
      std::vector<Tensor> out(1);
      out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
      Tensor xv = random_f32(rng, {dims[0], 3, dims[1], dims[2]});
      ASSERT_EQ(run_kernel("Resize", {xv, absent(), f32s({1, 1, 1.5f, 0.5f})}, &out, attrs_of(sp)),
                kernels::KernelStatus::kOk);
      expect_near(out[0], reference(xv, out[0].shape, {1, 1, 1.5f, 0.5f}, sp), "scales at H=" + std::to_string(dims[1]));
      // The same output size requested through sizes uses out/in in the transform.
      Tensor sizes = i64s(out[0].shape);
      ASSERT_EQ(run_kernel("Resize", {xv, absent(), absent(), sizes}, &out, attrs_of(sp)), kernels::KernelStatus::kOk);
      expect_near(out[0], reference(xv, out[0].shape, {}, sp), "sizes at H=" + std::to_string(dims[1]));
    }
  }
}

TEST(Upsample, HandComputed) {
  Tensor x = make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  OpResult r = run_op("Upsample", {x, f32s({1, 1, 2, 3})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{1, 1, 4, 6}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,  //
                                                              3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
  // linear is asymmetric; opset 7 carries the scales as an attribute.
  r = run_op("Upsample", {make_tensor<float>({1, 1, 2}, {0, 4})},
             AttrStore().set_str("mode", "linear").set_floats("scales", {1, 1, 2}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 2, 4, 4}));
}

TEST(Upsample, RandomSweepAgainstReference) {
  std::mt19937 rng(1705);
  const float choices[] = {1.f, 1.5f, 2.f, 3.f};
  for (int iter = 0; iter < 100; ++iter) {
    Shape shape = random_shape(rng, 4, 5);
    std::vector<float> scales = {1, 1, choices[rng() % 4], choices[rng() % 4]};
    Shape out = shape;
    for (int k = 2; k < 4; ++k) out[k] = static_cast<int64_t>(std::floor(shape[k] * static_cast<double>(scales[k])));
    Spec sp{rng() % 2 ? "linear" : "nearest", "asymmetric", "floor"};
    Tensor x = random_f32(rng, shape);
    SlotRun s = run_op_in_slots("Upsample", {x, f32s(scales)}, AttrStore().set_str("mode", sp.mode));
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, out);
    EXPECT_TRUE(s.tails_intact);
    expect_near(s.exact.outputs[0], reference(x, out, scales, sp), "iter " + std::to_string(iter));
  }
}

TEST(Upsample, Errors) {
  Tensor x = make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(has_text(run_op("Upsample", {x, f32s({1, 1, 0.5f, 1})}).status,
                       "node 'test' (Upsample): scale 0.500000 is below 1; Upsample only enlarges"));
  EXPECT_TRUE(has_text(run_op("Upsample", {x, f32s({1, 1, 2, 2})}, AttrStore().set_str("mode", "cubic")).status,
                       "attribute 'mode' is 'cubic', expected nearest or linear"));
  EXPECT_TRUE(has_text(run_op("Upsample", {x}).status, "needs scales (input #1, or the attribute before opset 9)"));
}

}  // namespace
}  // namespace kiln::testing
