// Kiln's int8 NHWC convolution / fully connected layer against a definition written here
// (sum of (x - xz)(w - wz) in int64, plus bias, requantized by kernels/portable/quant.h, the
// portable QLinearConv's rounding): every mix of int8/uint8 activations and weights, per-channel
// scales and weight zero points, strides, dilations, pads, channel counts that are not
// multiples of 4 or 16, a fused clamp, one and two threads, and a fully connected layer.
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <random>
#include <vector>

#include "delegates/xnnpack/int8_conv.h"
#include "kernels/portable/quant.h"
#include "kernels/simd/qgemm.h"

namespace kiln::delegates::xnnpack {
namespace {

struct Int8ConvCase {
  size_t n, h, w, c, m, kh, kw, sh, sw, dh, dw;
  int64_t pt, pl, pb, pr;
};

int32_t val(uint8_t b, bool is_signed) { return is_signed ? static_cast<int8_t>(b) : b; }

TEST(Int8Conv, MatchesTheDefinitionForEveryDtypeMix) {
  std::mt19937 rng(5);
  pthreadpool_t two = pthreadpool_create(2);
  const Int8ConvCase cases[] = {
      {1, 5, 7, 3, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  {2, 9, 8, 17, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {1, 11, 13, 8, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, {1, 12, 10, 4, 20, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
      {3, 6, 6, 32, 64, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2}, {1, 1, 1, 40, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 4, 17, 5, 48, 1, 5, 1, 3, 1, 1, 0, 2, 0, 2}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
  };
  int checked = 0;
  for (const Int8ConvCase& k : cases)
    for (int mix = 0; mix < 4; ++mix) {
      const bool xs = mix & 1, wsg = mix & 2, ys = xs;
      const size_t oh = (k.h + k.pt + k.pb - (k.dh * (k.kh - 1) + 1)) / k.sh + 1;
      const size_t ow = (k.w + k.pl + k.pr - (k.dw * (k.kw - 1) + 1)) / k.sw + 1;
      std::vector<uint8_t> x(k.n * k.h * k.w * k.c), w(k.m * k.c * k.kh * k.kw);
      for (uint8_t& v : x) v = static_cast<uint8_t>(rng());
      for (uint8_t& v : w) v = static_cast<uint8_t>(rng());
      std::vector<int32_t> bias(k.m), wz(k.m);
      std::vector<float> wscale(k.m);
      for (size_t o = 0; o < k.m; ++o) {
        bias[o] = static_cast<int32_t>(rng() % 2001) - 1000;
        wz[o] = wsg ? 0 : static_cast<int32_t>(rng() % 256);  // int8 weights symmetric, uint8 not
        wscale[o] = 0.002f * static_cast<float>(1 + rng() % 50);
      }
      Int8ConvSpec s;
      s.w = w.data(), s.w_signed = wsg, s.x_signed = xs, s.bias = bias.data(), s.w_zero = wz.data();
      s.w_scale = wscale.data(), s.x_scale = 0.05f, s.y_scale = 0.7f;
      s.x_zero = xs ? -9 : 131, s.y_zero = ys ? 3 : 120;
      s.lo = ys ? -128 : 0, s.hi = ys ? 127 : 255;
      if (mix == 3) s.lo = s.y_zero;  // a fused Relu
      s.m = k.m, s.c = k.c, s.kh = k.kh, s.kw = k.kw;
      Int8ConvWeights packed;
      pack_int8_conv(s, &packed);
      DenseConvGeometry g;
      g.batch = k.n, g.in_h = k.h, g.in_w = k.w, g.out_h = oh, g.out_w = ow;
      g.stride_h = k.sh, g.stride_w = k.sw, g.dilation_h = k.dh, g.dilation_w = k.dw;
      g.pad_top = k.pt, g.pad_left = k.pl, g.in_stride = k.c;
      std::vector<uint8_t> want(k.n * oh * ow * k.m);
      for (size_t n = 0; n < k.n; ++n)
        for (size_t i = 0; i < oh; ++i)
          for (size_t j = 0; j < ow; ++j)
            for (size_t o = 0; o < k.m; ++o) {
              int64_t acc = bias[o];
              for (size_t a = 0; a < k.kh; ++a)
                for (size_t b = 0; b < k.kw; ++b) {
                  const int64_t ih = static_cast<int64_t>(i * k.sh + a * k.dh) - k.pt;
                  const int64_t iw = static_cast<int64_t>(j * k.sw + b * k.dw) - k.pl;
                  if (ih < 0 || iw < 0 || ih >= static_cast<int64_t>(k.h) || iw >= static_cast<int64_t>(k.w)) continue;
                  for (size_t c = 0; c < k.c; ++c)
                    acc += int64_t{val(x[((n * k.h + ih) * k.w + iw) * k.c + c], xs) - s.x_zero} *
                           (val(w[((o * k.c + c) * k.kh + a) * k.kw + b], wsg) - wz[o]);
                }
              const float ratio = s.x_scale * wscale[o] / s.y_scale;
              want[((n * oh + i) * ow + j) * k.m + o] =
                  static_cast<uint8_t>(kernels::requantize(static_cast<int32_t>(acc), ratio, s.y_zero, s.lo, s.hi));
            }
      for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
        std::vector<uint8_t> y(want.size() + 1, 0xCD);  // one past the end must stay untouched
        int8_conv(packed, g, x.data(), y.data(), pool);
        for (size_t q = 0; q < want.size(); ++q)
          ASSERT_EQ(y[q], want[q]) << "c=" << k.c << " m=" << k.m << " k=" << k.kh << "x" << k.kw << " mix=" << mix
                                   << " at " << q << " on " << simd::qgemm_isa();
        EXPECT_EQ(y[want.size()], 0xCD);
        ++checked;
      }
    }
  pthreadpool_destroy(two);
  EXPECT_EQ(checked, 64);
}

TEST(Int8Conv, FullyConnectedReadsATransposedMatrix) {
  std::mt19937 rng(9);
  const size_t rows = 13, c = 70, m = 37;
  std::vector<uint8_t> x(rows * c), w(c * m);  // w is [C, M] (QLinearMatMul's B)
  for (uint8_t& v : x) v = static_cast<uint8_t>(rng());
  for (uint8_t& v : w) v = static_cast<uint8_t>(rng());
  std::vector<int32_t> wz(m, 0);
  std::vector<float> wscale(m, 0.01f);
  Int8ConvSpec s;
  s.w = w.data(), s.w_signed = true, s.x_signed = false, s.w_zero = wz.data(), s.w_scale = wscale.data();
  s.x_scale = 0.1f, s.y_scale = 2.f, s.x_zero = 128, s.y_zero = 0, s.lo = 0, s.hi = 255;
  s.m = m, s.c = c, s.transposed_fc = true;
  Int8ConvWeights packed;
  pack_int8_conv(s, &packed);
  DenseConvGeometry g;
  g.batch = rows, g.in_stride = c;
  std::vector<uint8_t> y(rows * m);
  int8_conv(packed, g, x.data(), y.data(), nullptr);
  for (size_t r = 0; r < rows; ++r)
    for (size_t o = 0; o < m; ++o) {
      int64_t acc = 0;
      for (size_t k = 0; k < c; ++k) acc += int64_t{x[r * c + k] - 128} * static_cast<int8_t>(w[k * m + o]);
      const int32_t want = kernels::requantize(static_cast<int32_t>(acc), 0.1f * 0.01f / 2.f, 0, 0, 255);
      ASSERT_EQ(y[r * m + o], want) << r << "," << o;
    }
}

TEST(Int8Depthwise, MatchesTheDefinitionForEveryDtypeMix) {
  std::mt19937 rng(13);
  pthreadpool_t two = pthreadpool_create(2);
  const Int8ConvCase cases[] = {
      {1, 5, 7, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     {2, 9, 8, 17, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {1, 12, 10, 40, 40, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2}, {1, 6, 6, 32, 32, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
      {1, 1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     {1, 4, 17, 20, 20, 1, 7, 1, 1, 1, 1, 0, 3, 0, 3},
  };
  for (const Int8ConvCase& k : cases)
    for (int mix = 0; mix < 4; ++mix) {
      const bool xs = mix & 1, wsg = mix & 2;
      const size_t oh = (k.h + k.pt + k.pb - (k.dh * (k.kh - 1) + 1)) / k.sh + 1;
      const size_t ow = (k.w + k.pl + k.pr - (k.dw * (k.kw - 1) + 1)) / k.sw + 1, taps = k.kh * k.kw;
      std::vector<uint8_t> x(k.n * k.h * k.w * k.c), w(k.c * taps);
      for (uint8_t& v : x) v = static_cast<uint8_t>(rng());
      for (uint8_t& v : w) v = static_cast<uint8_t>(rng());
      std::vector<int32_t> bias(k.c), wz(k.c);
      std::vector<float> wscale(k.c);
      for (size_t o = 0; o < k.c; ++o) {
        bias[o] = static_cast<int32_t>(rng() % 2001) - 1000;
        wz[o] = static_cast<int32_t>(rng() % 256) - (wsg ? 128 : 0);
        wscale[o] = 0.01f * static_cast<float>(1 + rng() % 50);
      }
      Int8ConvSpec s;
      s.w = w.data(), s.w_signed = wsg, s.x_signed = xs, s.bias = bias.data(), s.w_zero = wz.data();
      s.w_scale = wscale.data(), s.x_scale = 0.05f, s.y_scale = 0.9f;
      s.x_zero = xs ? 11 : 100, s.y_zero = xs ? -4 : 128, s.lo = xs ? -128 : 0, s.hi = xs ? 127 : 255;
      s.m = k.c, s.c = 1, s.kh = k.kh, s.kw = k.kw;
      Int8DepthwiseWeights packed;
      pack_int8_depthwise(s, &packed);
      DenseConvGeometry g;
      g.batch = k.n, g.in_h = k.h, g.in_w = k.w, g.out_h = oh, g.out_w = ow;
      g.stride_h = k.sh, g.stride_w = k.sw, g.dilation_h = k.dh, g.dilation_w = k.dw;
      g.pad_top = k.pt, g.pad_left = k.pl, g.in_stride = k.c;
      std::vector<uint8_t> want(k.n * oh * ow * k.c);
      for (size_t n = 0; n < k.n; ++n)
        for (size_t i = 0; i < oh; ++i)
          for (size_t j = 0; j < ow; ++j)
            for (size_t o = 0; o < k.c; ++o) {
              int64_t acc = bias[o];
              for (size_t a = 0; a < k.kh; ++a)
                for (size_t b = 0; b < k.kw; ++b) {
                  const int64_t ih = static_cast<int64_t>(i * k.sh + a * k.dh) - k.pt;
                  const int64_t iw = static_cast<int64_t>(j * k.sw + b * k.dw) - k.pl;
                  if (ih < 0 || iw < 0 || ih >= static_cast<int64_t>(k.h) || iw >= static_cast<int64_t>(k.w)) continue;
                  acc += int64_t{val(x[((n * k.h + ih) * k.w + iw) * k.c + o], xs) - s.x_zero} *
                         (val(w[o * taps + a * k.kw + b], wsg) - wz[o]);
                }
              want[((n * oh + i) * ow + j) * k.c + o] = static_cast<uint8_t>(kernels::requantize(
                  static_cast<int32_t>(acc), s.x_scale * wscale[o] / s.y_scale, s.y_zero, s.lo, s.hi));
            }
      for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
        std::vector<uint8_t> y(want.size() + 1, 0xCD);
        int8_depthwise(packed, g, x.data(), y.data(), pool);
        for (size_t q = 0; q < want.size(); ++q)
          ASSERT_EQ(y[q], want[q]) << "c=" << k.c << " k=" << k.kh << "x" << k.kw << " mix=" << mix << " at " << q
                                   << " on " << simd::qgemm_isa();
        EXPECT_EQ(y[want.size()], 0xCD);
      }
    }
  pthreadpool_destroy(two);
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
