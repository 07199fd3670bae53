// Resize and Upsample: hand cases, a seeded sweep of shapes, scales/sizes and every mode
// (nearest, linear, cubic) against a reference written from the ONNX formulas, errors, and
// symbolic output sizes run below the bound.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>

#include "bound_slot_util.h"
#include "kernels/portable/resize.h"
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
  bool antialias = false;
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

/// Antialiased weights as the ONNX reference computes them (linear and cubic): s = min(scale, 1),
/// start = floor(-support / s) + 1 (support 1 linear, 2 cubic), n = 2 - 2 * start taps at the
/// n indices of the edge-padded axis nearest v (ties to the left), the hat or Keys' kernel at
/// s * (i - ratio) for i in [start, 1 - start], normalized (outside taps dropped first under
/// cubic exclude_outside).
std::vector<double> antialias_weights(const Spec& sp, double v, double scale, int64_t in) {
  const bool cubic = sp.mode == "cubic";
  const double s = std::min(scale, 1.0), A = sp.cubic_a;
  const int start = static_cast<int>(std::floor(-(cubic ? 2.0 : 1.0) / s) + 1), n = 2 - 2 * start;
  std::vector<int64_t> idx;
  for (int64_t j = -n - 2; j < in + n + 2; ++j) idx.push_back(j);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return std::abs(v - a) < std::abs(v - b); });
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  const double ratio = v == std::floor(v) ? 1.0 : v - std::floor(v);
  std::vector<double> c;
  for (int i = start; i < 2 - start; ++i) {
    const double d = std::abs(s * (i - ratio));
    if (!cubic) c.push_back(std::clamp(1 - d, 0.0, 1.0));
    else if (d <= 1) c.push_back((A + 2) * d * d * d - (A + 3) * d * d + 1);
    else c.push_back(d < 2 ? A * d * d * d - 5 * A * d * d + 8 * A * d - 4 * A : 0.0);
  }
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) sum += (c[i] = cubic && sp.exclude_outside && (idx[i] < 0 || idx[i] >= in) ? 0.0 : c[i]);
  std::vector<double> w(static_cast<size_t>(in), 0.0);
  for (size_t i = 0; i < c.size(); ++i) w[std::clamp<int64_t>(idx[i], 0, in - 1)] += c[i] / sum;
  return w;
}

/// Weight of every input index of one axis for output coordinate x: one-hot for nearest,
/// the hat function max(0, 1 - |v - j|) around the clamped coordinate v for linear.
std::vector<double> axis_weights(const Spec& sp, int64_t x, double scale, int64_t in, int64_t out) {
  double v = to_original(sp.coord, x, scale, in, out);
  if (sp.antialias && sp.mode != "nearest") return antialias_weights(sp, v, scale, in);
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
  if (sp.antialias) a.set_int("antialias", 1);
  return a;
}

Tensor f32s(const std::vector<float>& v) { return make_tensor<float>({static_cast<int64_t>(v.size())}, v); }

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
                       "sizes 2 and 1 must be equal (only the last two axes can be resized; output [1, 2, 4, 4] "
                       "must keep axis 1 of input [1, 1, 2, 2])"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({1, 1, 0.25f, 1})}),
                       "size 0 must be at least 1 (output size of axis 2 for input [1, 1, 2, 2])"));
  EXPECT_TRUE(has_text(status({x, absent(), s2}, AttrStore().set_int("antialias", 2)),
                       "node 'test' (Resize): antialias 2 must be 0 or 1"));
  EXPECT_TRUE(has_text(status({x, absent(), s2}, AttrStore()
                                                     .set_int("antialias", 1)
                                                     .set_str("mode", "linear")
                                                     .set_str("coordinate_transformation_mode", "align_corners")),
                       "antialias=1 with coordinate_transformation_mode 'align_corners' is not supported (ONNX "
                       "Runtime and the ONNX reference disagree on it); use half_pixel or pytorch_half_pixel"));
  // Nearest ignores antialias.
  EXPECT_TRUE(status({x, absent(), s2}, AttrStore().set_int("antialias", 1)
                                            .set_str("coordinate_transformation_mode", "align_corners")).ok());
  // axes (opset 18).
  EXPECT_TRUE(has_text(status({x, absent(), f32s({2})}, AttrStore().set_ints("axes", {4})),
                       "node 'test' (Resize): axes value 4 is outside [-4, 3] for input [1, 1, 2, 2]"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({2, 2})}, AttrStore().set_ints("axes", {-1, 3})),
                       "axes value 3 is repeated"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({2, 2, 2})}, AttrStore().set_ints("axes", {2, 3})),
                       "has 3 scales for input [1, 1, 2, 2] of rank 4, expected 2 (one per axis in axes)"));
  EXPECT_TRUE(has_text(status({x, absent(), absent(), i64s({4})}, AttrStore().set_ints("axes", {2, 3})),
                       "has 1 sizes for input [1, 1, 2, 2], expected 2 (one per axis in axes)"));
  EXPECT_TRUE(has_text(status({x, absent(), f32s({2, 2})}, AttrStore().set_ints("axes", {1, 3})),
                       "scale 2.000000 on axis 1: only the last two axes can be resized"));
  // keep_aspect_ratio_policy.
  EXPECT_TRUE(has_text(status({x, absent(), absent(), i64s({1, 1, 4, 4})},
                              AttrStore().set_str("keep_aspect_ratio_policy", "fit")),
                       "keep_aspect_ratio_policy 'fit' must be stretch, not_larger or not_smaller"));
  EXPECT_TRUE(has_text(status({x, absent(), absent(), i64s({2, 2, 4, 4})},
                              AttrStore().set_str("keep_aspect_ratio_policy", "not_larger")),
                       "(only the last two axes can be resized; output [2, 2, 4, 4] must keep axis 0 of input "
                       "[1, 1, 2, 2])"));
  Tensor empty = make_tensor<float>({1, 1, 0, 2}, {});
  EXPECT_TRUE(has_text(status({empty, absent(), absent(), i64s({4, 4})},
                              AttrStore().set_ints("axes", {2, 3}).set_str("keep_aspect_ratio_policy", "not_larger")),
                       "size 0 must be at least 1 (keep_aspect_ratio_policy divides sizes by axis 2 of input "
                       "[1, 1, 0, 2])"));
  // Regression (fuzz_onnx, UBSan): a huge or infinite scale was converted to an integer size.
  for (float huge : {1e30f, std::numeric_limits<float>::infinity()}) {
    EXPECT_TRUE(has_text(status({x, absent(), f32s({1, 1, huge, 1})}),
                         "on axis 2 (size 2) makes the output size 2^62 or more"));
  }
}

// Opset-18 cases with outputs from ONNX Runtime 1.31.1 (which matches the ONNX reference on
// all of them) on x = (7 * i) % 11 over [1, 1, 4, 6].
TEST(Resize, Opset18AgainstOnnxRuntime) {
  std::vector<float> xv(24);
  for (int i = 0; i < 24; ++i) xv[i] = static_cast<float>(7 * i % 11);
  const Tensor x = make_tensor<float>({1, 1, 4, 6}, xv);
  struct Case {
    const char* what;
    AttrStore attrs;
    std::vector<Tensor> extra;  // roi, scales[, sizes]
    Shape shape;
    std::vector<double> want;
  };
  const AttrStore lin = AttrStore().set_str("mode", "linear").set_int("antialias", 1);
  const AttrStore cub = AttrStore().set_str("mode", "cubic").set_int("antialias", 1);
  std::vector<Case> cases = {
      {"linear antialias 0.5", lin, {absent(), f32s({1, 1, 0.5f, 0.5f})}, {1, 1, 2, 3},
       {4.671875, 5.765625, 3.9375, 4.953125, 5.359375, 4.5625}},
      {"cubic antialias, axes", AttrStore(cub).set_ints("axes", {2, 3}), {absent(), f32s({0.6f, 0.4f})}, {1, 1, 2, 2},
       {4.505225, 5.980449, 5.977306, 4.780493}},
      {"cubic antialias exclude_outside", AttrStore(cub).set_ints("axes", {2, 3}).set_int("exclude_outside", 1),
       {absent(), f32s({0.6f, 0.4f})}, {1, 1, 2, 2}, {4.610571, 5.583512, 5.725593, 4.891877}},
      {"linear antialias, sizes on axis -1",
       AttrStore(lin).set_ints("axes", {-1}).set_str("coordinate_transformation_mode", "pytorch_half_pixel"),
       {absent(), absent(), i64s({3})}, {1, 1, 4, 3},
       {3, 6.5, 4.5, 6.5, 4.5, 2.5, 5.875, 6.625, 6, 3.875, 4.625, 4}},
      {"cubic antialias not_smaller", AttrStore(cub).set_ints("axes", {2, 3}).set_str("keep_aspect_ratio_policy", "not_smaller"),
       {absent(), absent(), i64s({2, 2})}, {1, 1, 2, 3},
       {4.692623, 6.152103, 3.98148, 5.055424, 5.24078, 4.266567}},
      {"linear not_larger, axes reversed",
       AttrStore().set_str("mode", "linear").set_ints("axes", {3, 2}).set_str("keep_aspect_ratio_policy", "not_larger"),
       {absent(), absent(), i64s({3, 3})}, {1, 1, 2, 3}, {5.25, 5.5, 3, 4, 7, 4.5}},
      {"cubic antialias up and down, asymmetric",
       AttrStore(cub).set_str("coordinate_transformation_mode", "asymmetric"), {absent(), f32s({1, 1, 2, 0.5f})},
       {1, 1, 8, 3},
       {1.609375, 6.453125, 6.140625, 4.921875, 4.915527, 5.070312, 7.859375, 3.9375, 4.140625, 7.632812, 5.381348,
        4.515625, 5.859375, 6.921875, 4.890625, 4.671875, 6.20166,  3.960938, 3.859375, 4.921875, 2.890625,
        3.671875, 4.734375, 2.703125}},
  };
  for (const Case& k : cases) {
    std::vector<Tensor> in = {x};
    in.insert(in.end(), k.extra.begin(), k.extra.end());
    OpResult r = run_op("Resize", in, k.attrs);
    ASSERT_TRUE(r.status.ok()) << k.what << ": " << r.status.message();
    ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk) << k.what;
    ASSERT_EQ(r.outputs[0].shape, k.shape) << k.what;
    for (size_t i = 0; i < k.want.size(); ++i) EXPECT_NEAR(r.outputs[0].at(i), k.want[i], 2e-5) << k.what << " #" << i;
  }
  // keep_aspect_ratio_policy maps coordinates with the common scale (5/7 on both axes here,
  // not 2/3 = out/in on W): [1, 1, 7, 3] to sizes [5, 100] not_larger is [1, 1, 5, 2].
  std::vector<float> x7(21);
  for (int i = 0; i < 21; ++i) x7[i] = static_cast<float>(i);
  OpResult r = run_op("Resize", {make_tensor<float>({1, 1, 7, 3}, x7), absent(), absent(), i64s({5, 100})},
                      AttrStore().set_str("mode", "linear").set_ints("axes", {2, 3}).set_str("keep_aspect_ratio_policy",
                                                                                             "not_larger"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.outputs[0].shape, (Shape{1, 1, 5, 2}));
  const std::vector<double> want7 = {0.8, 2.2, 5, 6.4, 9.2, 10.6, 13.4, 14.8, 17.6, 19};
  for (size_t i = 0; i < want7.size(); ++i) EXPECT_NEAR(r.outputs[0].at(i), want7[i], 2e-5) << i;
  // Rounding halves up: [4, 5] to sizes [2, 100] not_larger is scale 0.5 and 2.5 -> 3; and
  // 5/6 * 3 = 2.5 -> 3.
  Spec sp;
  r = run_op("Resize", {make_tensor<float>({1, 1, 4, 5}, std::vector<float>(20, 1.f)), absent(), absent(), i64s({2, 100})},
             AttrStore().set_ints("axes", {2, 3}).set_str("keep_aspect_ratio_policy", "not_larger"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{1, 1, 2, 3}));
  r = run_op("Resize", {make_tensor<float>({1, 1, 6, 3}, std::vector<float>(18, 1.f)), absent(), absent(), i64s({5, 100})},
             AttrStore().set_ints("axes", {2, 3}).set_str("keep_aspect_ratio_policy", "not_larger"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{1, 1, 5, 3}));
  // A batch of 0 stays empty; axes leave it alone.
  r = run_op("Resize", {make_tensor<float>({0, 2, 4, 6}, {}), absent(), f32s({0.5f, 0.5f})},
             AttrStore(lin).set_ints("axes", {2, 3}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{0, 2, 2, 3}));
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
}

/// round(x_j * min_i(s_i / x_i)) (max for not_smaller), halves up, by exact comparison of
/// fractions: the test's own reading of keep_aspect_ratio_policy.
int64_t aspect_size(bool larger, const Shape& x, const Shape& s, size_t j) {
  size_t best = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    const bool less = s[i] * x[best] < s[best] * x[i];  // s_i / x_i < s_best / x_best
    if (larger ? !less && s[i] * x[best] != s[best] * x[i] : less) best = i;
  }
  const int64_t num = x[j] * s[best], den = x[best];
  return num / den + (2 * (num % den) >= den ? 1 : 0);
}

TEST(Resize, Opset18SweepAgainstReference) {
  std::mt19937 rng(1818);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const float scale_choices[] = {0.2f, 0.25f, 0.4f, 0.5f, 0.6f, 0.75f, 1.f, 1.5f, 2.f, 3.f};
  const char* coords[] = {"half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn"};
  const char* modes[] = {"nearest", "linear", "cubic"};
  int ran = 0, rejected = 0, antialiased = 0, kept = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int rank = static_cast<int>(pick(1, 4));
    Shape shape = random_shape(rng, rank, 9);
    for (int k = 0; k + 2 < rank; ++k) shape[k] = pick(0, 2) == 0 ? 0 : pick(1, 2);  // empty batches too
    Spec sp{modes[pick(0, 2)], coords[pick(0, 3)], "round_prefer_floor", -0.75f, pick(0, 1) == 1, pick(0, 2) > 0};
    // Listed axes: a non-empty subset of the last two, in random order, sometimes negative.
    std::vector<int> listed;
    for (int k = std::max(0, rank - 2); k < rank; ++k)
      if (pick(0, 3) > 0) listed.push_back(k);
    if (listed.empty()) listed.push_back(rank - 1);
    if (listed.size() == 2 && pick(0, 1)) std::swap(listed[0], listed[1]);
    std::vector<int64_t> axes_attr;
    for (int k : listed) axes_attr.push_back(pick(0, 1) ? k - rank : k);
    const bool use_scales = pick(0, 1);
    const int policy = use_scales ? 0 : static_cast<int>(pick(0, 2));
    AttrStore a = attrs_of(sp);
    a.set_ints("axes", axes_attr);
    if (policy) a.set_str("keep_aspect_ratio_policy", policy == 1 ? "not_larger" : "not_smaller");
    std::vector<float> full(rank, 1.f), listed_scales;
    Shape out = shape, sizes, listed_in;
    for (int k : listed) {
      if (use_scales) {
        listed_scales.push_back(scale_choices[pick(0, 9)]);
        full[k] = listed_scales.back();
        out[k] = static_cast<int64_t>(std::floor(shape[k] * static_cast<double>(full[k])));
      } else {
        sizes.push_back(pick(1, 12));
        listed_in.push_back(shape[k]);
        out[k] = sizes.back();
      }
    }
    bool use_full = use_scales;
    if (policy) {
      // One scale (as a float, like the kernel and ONNX Runtime) for every listed axis.
      float scale = 0;
      for (size_t i = 0; i < listed.size(); ++i) {
        out[listed[i]] = aspect_size(policy == 2, listed_in, sizes, i);
        const float si = static_cast<float>(sizes[i]) / static_cast<float>(listed_in[i]);
        scale = i == 0 ? si : policy == 1 ? std::min(scale, si) : std::max(scale, si);
      }
      for (int k : listed) full[k] = scale;
      use_full = true;
      ++kept;
    }
    Tensor x = random_f32(rng, shape);
    std::vector<Tensor> inputs = {x, absent()};
    if (use_scales) inputs.push_back(f32s(listed_scales));
    else inputs.insert(inputs.end(), {absent(), i64s(sizes)});
    const std::string what = "iter " + std::to_string(iter) + " " + sp.mode + "/" + sp.coord +
                             (sp.antialias ? " antialias" : "") + " policy " + std::to_string(policy) + " in " +
                             ::testing::PrintToString(shape);
    SlotRun s = run_op_in_slots("Resize", inputs, a);
    bool too_small = false;
    for (int k : listed) too_small |= out[k] < 1;
    if (too_small) {
      ASSERT_TRUE(has_text(s.exact.status, "must be at least 1")) << what << ": " << s.exact.status.message();
      ++rejected;
      continue;
    }
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.outputs[0].shape, out) << what;
    ASSERT_EQ(s.kernel, kernels::KernelStatus::kOk) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    // The reference resamples the last two axes; an unlisted one keeps its size (scale 1).
    expect_near(s.exact.outputs[0], reference(x, out, use_full ? full : std::vector<float>{}, sp), what);
    ASSERT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << "slotted run differs, " << what;
    ++ran;
    antialiased += sp.antialias && sp.mode != "nearest";
  }
  EXPECT_GT(ran, 250);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(antialiased, 80);
  EXPECT_GT(kept, 60);
}

// The delegate runs Resize channels-last (resize_run_channels_last, operands in channels-first
// order): axes, antialias and keep_aspect_ratio_policy give what the portable kernel gives.
TEST(Resize, ChannelsLastMatchesPortable) {
  std::mt19937 rng(44);
  const Shape shape = {2, 3, 7, 9};
  Spec lin{"linear", "half_pixel", "round_prefer_floor"}, cub{"cubic", "pytorch_half_pixel", "round_prefer_floor"};
  lin.antialias = cub.antialias = true;
  struct Case {
    AttrStore attrs;
    Tensor scales, sizes;
  };
  std::vector<Case> cases = {
      {AttrStore(attrs_of(lin)).set_ints("axes", {2, 3}), f32s({0.5f, 0.4f}), absent()},
      {AttrStore(attrs_of(cub)).set_ints("axes", {-1}), f32s({0.3f}), absent()},
      {AttrStore(attrs_of(cub)).set_ints("axes", {3, 2}).set_str("keep_aspect_ratio_policy", "not_larger"), absent(),
       i64s({4, 5})},
      {AttrStore(attrs_of(lin)).set_ints("axes", {2, 3}).set_str("keep_aspect_ratio_policy", "not_smaller"), absent(),
       i64s({3, 2})},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& k = cases[ci];
    Tensor x = random_f32(rng, shape);
    std::vector<Tensor> in = {x, absent(), k.scales};
    if (k.sizes.present) in.push_back(k.sizes);
    OpResult r = run_op("Resize", in, k.attrs);
    ASSERT_TRUE(r.status.ok()) << ci << ": " << r.status.message();
    const Shape& o = r.outputs[0].shape;
    // NHWC copies and views.
    auto to_nhwc = [](const Tensor& t) {
      const Shape& d = t.shape;
      std::vector<float> v(static_cast<size_t>(t.numel()));
      for (int64_t n = 0; n < d[0]; ++n)
        for (int64_t c = 0; c < d[1]; ++c)
          for (int64_t h = 0; h < d[2]; ++h)
            for (int64_t w = 0; w < d[3]; ++w)
              v[((n * d[2] + h) * d[3] + w) * d[1] + c] = t.data<float>()[((n * d[1] + c) * d[2] + h) * d[3] + w];
      return make_tensor<float>({d[0], d[2], d[3], d[1]}, v);
    };
    Tensor xl = to_nhwc(x), want = to_nhwc(r.outputs[0]);
    Tensor yl = make_tensor<float>({o[0], o[2], o[3], o[1]}, std::vector<float>(static_cast<size_t>(r.outputs[0].numel()), -7.f));
    auto view = [](const Tensor& t) {
      TensorView v;
      v.dtype = t.dtype;
      v.rank = static_cast<int32_t>(t.shape.size());
      for (size_t a = 0; a < t.shape.size(); ++a) v.dims[a] = t.shape[a];
      v.data = const_cast<unsigned char*>(t.bytes.data());
      return v;
    };
    TensorView xv = view(xl), yv = view(yl), sv = view(k.scales), zv = view(k.sizes);
    const TensorView* ins[4] = {&xv, nullptr, k.scales.present ? &sv : nullptr, k.sizes.present ? &zv : nullptr};
    TensorView* outs[1] = {&yv};
    kernels::RunCtx ctx;
    ctx.inputs = ins;
    ctx.num_inputs = k.sizes.present ? 4 : 3;
    ctx.outputs = outs;
    ctx.num_outputs = 1;
    ctx.attrs = k.attrs.view();
    ASSERT_EQ(kernels::resize_run_channels_last(ctx), kernels::KernelStatus::kOk) << ci;
    for (int64_t i = 0; i < want.numel(); ++i) ASSERT_NEAR(yl.at(i), want.at(i), 1e-5) << "case " << ci << " #" << i;
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

// keep_aspect_ratio_policy over symbolic H and W: the output sizes are min / max of rounded
// fractions, exact for every H, W; run below the bound against the test's own reading.
TEST_F(ResizeSymbolic, KeepAspectRatioSymbolic) {
  for (const char* policy : {"not_larger", "not_smaller"}) {
    Spec sp{"linear", "half_pixel", "round_prefer_floor"};
    sp.antialias = true;
    AttrStore a = attrs_of(sp);
    a.set_ints("axes", {2, 3}).set_str("keep_aspect_ratio_policy", policy);
    held = i64s({32, 24});
    SymResult r = infer(pool, "Resize", {x(), absent_input(), absent_input(), const_input(pool, held)}, a);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    const bool larger = std::string(policy) == "not_smaller";
    EXPECT_EQ(r.shape, larger ? "[batch, 3, max(32,floordiv(W + 48*H,2*W)), max(24,floordiv(H + 64*W,2*H))]"
                              : "[batch, 3, min(32,floordiv(W + 48*H,2*W)), min(24,floordiv(H + 64*W,2*H))]")
        << policy;
    // not_larger can round a very thin input's short side to 0: guarded.
    EXPECT_EQ(guards_text(pool, r),
              larger ? "" : "min(32,floordiv(W + 48*H,2*W)) >= 1; min(24,floordiv(H + 64*W,2*H)) >= 1")
        << policy;
    std::mt19937 rng(5);
    for (Shape dims : {Shape{1, 1, 1}, Shape{2, 7, 3}, Shape{1, 40, 90}, Shape{1, 100, 9}, Shape{2, 33, 17}}) {
      const Shape in = {dims[1], dims[2]};
      std::vector<Tensor> out(1);
      out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
      ASSERT_EQ(out[0].shape, (Shape{dims[0], 3, aspect_size(larger, in, {32, 24}, 0), aspect_size(larger, in, {32, 24}, 1)}))
          << policy << " H " << dims[1] << " W " << dims[2];
      Tensor xv = random_f32(rng, {dims[0], 3, dims[1], dims[2]});
      ASSERT_EQ(run_kernel("Resize", {xv, absent(), absent(), held}, &out, a), kernels::KernelStatus::kOk);
      float scale = 0;
      for (int i = 0; i < 2; ++i) {
        const float si = static_cast<float>(held.data<int64_t>()[i]) / static_cast<float>(in[i]);
        scale = i == 0 ? si : larger ? std::max(scale, si) : std::min(scale, si);
      }
      expect_near(out[0], reference(xv, out[0].shape, {1, 1, scale, scale}, sp), std::string(policy) + " below bound");
    }
  }
}

}  // namespace
}  // namespace kiln::testing
