// Kiln's dense NHWC convolution / fully connected kernel against a double-precision
// reference written here: strides, dilations, pads, SAME-style asymmetric pads, channel
// counts that are not multiples of 16, pixel counts that are not multiples of 6, clamps,
// one and two threads, weights larger than the L2 budget (run chunk by chunk), and rows of a
// fully connected layer with a strided input; on whichever
// row of the ISA table runs (KILN_MAX_ISA=plain: the plain C++ microkernel).
#include <gtest/gtest.h>

#include <pthreadpool.h>

#include <cmath>
#include <random>
#include <tuple>

#include "delegates/xnnpack/dense_conv.h"
#include "delegates/xnnpack/depthwise_conv.h"

namespace kiln::delegates::xnnpack {
namespace {

struct Case {
  size_t n, h, w, c, m, kh, kw, sh, sw, dh, dw;
  int64_t pt, pl, pb, pr;
};

// y[n][oh][ow][m] in double, from x NHWC and w OIHW.
std::vector<double> reference(const Case& k, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b, size_t oh_n, size_t ow_n, float lo, float hi) {
  std::vector<double> y(k.n * oh_n * ow_n * k.m);
  for (size_t n = 0; n < k.n; ++n)
    for (size_t oh = 0; oh < oh_n; ++oh)
      for (size_t ow = 0; ow < ow_n; ++ow)
        for (size_t m = 0; m < k.m; ++m) {
          double s = b[m];
          for (size_t i = 0; i < k.kh; ++i)
            for (size_t j = 0; j < k.kw; ++j) {
              int64_t ih = static_cast<int64_t>(oh * k.sh + i * k.dh) - k.pt;
              int64_t iw = static_cast<int64_t>(ow * k.sw + j * k.dw) - k.pl;
              if (ih < 0 || iw < 0 || ih >= static_cast<int64_t>(k.h) || iw >= static_cast<int64_t>(k.w)) continue;
              for (size_t c = 0; c < k.c; ++c)
                s += static_cast<double>(x[((n * k.h + ih) * k.w + iw) * k.c + c]) *
                     w[((m * k.c + c) * k.kh + i) * k.kw + j];
            }
          y[((n * oh_n + oh) * ow_n + ow) * k.m + m] = std::min<double>(hi, std::max<double>(lo, s));
        }
  return y;
}

TEST(DenseConv, MatchesAReferenceAtManyGeometries) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  pthreadpool_t two = pthreadpool_create(2);
  const Case cases[] = {
      {1, 5, 7, 3, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     {2, 9, 8, 17, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {1, 11, 13, 8, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    {1, 12, 10, 4, 20, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
      {3, 6, 6, 32, 64, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},    {1, 1, 1, 40, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 8, 9, 16, 24, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},    {1, 4, 17, 5, 48, 1, 5, 1, 3, 1, 1, 0, 2, 0, 2},
      {2, 3, 3, 64, 16, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},
      // one block of 9-16 channels over many pixels: two tiles per call where the row has the wide
      // kernel (AVX-512), row and patch tiles, pixel counts not multiples of 12; and a 48-channel
      // layer's third block (the pair kernel, then the wide single block)
      {2, 20, 21, 3, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   {1, 14, 15, 16, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 9, 26, 24, 13, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // 2-4 input channels (RGB stems) take the direct rows where the row has them (AVX-512: one
      // block, 12-pixel groups; AVX2: up to four blocks, 6-pixel groups, a last block of 8
      // channels or fewer on half the accumulators): a masked last block, edge pixels
      {2, 13, 29, 3, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},   {1, 9, 40, 4, 24, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      {1, 6, 31, 2, 16, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},    {3, 17, 18, 3, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 25, 3, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    {1, 3, 19, 4, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      // their edge pixels in fours from zero-padded copies (a 7x7 stride-2 stem), or one at a
      // time: rows of three pixels, windows too wide for the four-pixel copy (dilated 10)
      {2, 21, 23, 3, 16, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},   {1, 5, 3, 3, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 40, 60, 4, 10, 3, 5, 1, 1, 10, 10, 10, 20, 10, 20},
      // four blocks (a 7x7 stride-2 stem of 64), a half last block (24 and 17 channels), and 72
      // channels (the GEMM on every row)
      {1, 11, 30, 3, 64, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},   {2, 9, 22, 3, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {1, 7, 15, 2, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    {1, 6, 13, 3, 72, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      // two tiles of evenly spaced rows, two blocks (the 12-row pair kernel where the row has it):
      // a 1x1 layer's plain matrix with a third, masked block; one output row of an unpadded 3x3
      {2, 7, 9, 24, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    {1, 5, 30, 16, 32, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 4, 40, 8, 24, 3, 3, 1, 2, 1, 1, 0, 0, 0, 0},
      // one input channel takes the direct path (a spectrogram's first layer); dilated C = 2 the GEMM
      {2, 19, 23, 1, 16, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0},   {1, 10, 9, 2, 40, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
      // few pixels and several blocks: two-block chunks over smaller pixel groups (4 and 2 tiles)
      // rather than one-block chunks; 5 blocks leave a chunk of one, masked
      {2, 4, 4, 96, 96, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    {1, 5, 7, 40, 72, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      // weights over the L2 budget (256 x 72 x 3 x 3: 0.75 MB) run chunk by chunk over 5 pixel groups
      {2, 11, 12, 256, 72, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      // small windows at the edges copied into a task's edge slots, kernel rows a row apart (row
      // tiles): dilated rows; a top row of more edge pixels than the slots (patch tiles after
      // them); rows too long for any slot (patch tiles only)
      {2, 12, 14, 8, 16, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1},   {1, 6, 40, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 100, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      // windows longer than the tap table, unpadded (row tiles only): a 400-tap one-channel DFT at
      // stride 160 (mel_frontend's; 41 outputs per row), and 2 kernel rows of 70 taps x 3 channels
      {2, 1, 6800, 1, 40, 1, 400, 1, 160, 1, 1, 0, 0, 0, 0}, {1, 5, 90, 3, 20, 2, 70, 1, 3, 2, 1, 0, 0, 0, 0},
      // narrow 1x1 layers (at most 8 outputs, 16 inputs: weights in registers where the row has
      // it): chunks of 256 pixels and a tail of 7; one channel in and out; 17 inputs take the tiles
      {2, 20, 30, 16, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   {1, 3, 5, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 7, 9, 17, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // on the AVX2 row up to 32 outputs: two, three and four vectors (6, 4 and 3 pixels at a
      // time, tails of 1-5), a masked last vector; 33 outputs take the tiles
      {2, 13, 17, 8, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   {1, 9, 11, 5, 13, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 6, 7, 16, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    {1, 5, 5, 3, 33, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 4, 6, 10, 19, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // and up to 32 inputs there (a loop over them past 16): 17, 24 and 32 inputs; 33 take the tiles
      {1, 5, 7, 17, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},     {2, 9, 13, 24, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 6, 6, 32, 32, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    {1, 4, 5, 33, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // a last block of 8 channels or fewer with the block before it (the AVX2 row's block and a
      // half, four pixels at a time across tiles, where a chunk holds both: pixel groups enough
      // for both threads): 1x1 layers of 24, 40 and 88 outputs over pixel counts leaving 1-3 rows; a 3x3 row layer with padded edges (row and patch tiles), a 5x5
      // over 40 channels (tap tiles at the edges, the block's own kernels there); 17 outputs (one
      // channel past the block, 3x3 and 1x1); 2 x 3 pixels at two threads (one block per chunk: no pairing);
      // rows with more edge pixels than the slots, rows too long for any (patch tiles)
      {2, 13, 17, 96, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},  {1, 20, 23, 100, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {3, 11, 13, 100, 88, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, {2, 15, 14, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 20, 21, 40, 24, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},  {1, 20, 24, 48, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 1, 3, 64, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    {2, 6, 40, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 4, 100, 16, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  {2, 11, 20, 40, 17, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // on the AVX2 row, 1x1 layers of more than 32 outputs from up to 96 inputs (weights up to
      // 256 KB): groups of 32 outputs, then the rest on 1-4 vectors (72, 48, 56, 64 outputs), inputs
      // unrolled (<= 16) or a loop (24, 40, 96); 682 x 96 (just within the bytes) and 683 x 96, 97
      // inputs (the tiles); 35 pixels at two threads (tasks of 24 pixels)
      {2, 13, 17, 16, 72, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},  {1, 20, 23, 8, 48, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 9, 13, 12, 56, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   {2, 7, 9, 5, 64, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 11, 10, 24, 88, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},  {1, 9, 10, 40, 240, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 4, 6, 96, 682, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   {1, 4, 6, 96, 683, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 6, 7, 97, 64, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    {1, 5, 7, 20, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
  };
  for (const Case& k : cases) {
    const size_t oh = (k.h + k.pt + k.pb - (k.dh * (k.kh - 1) + 1)) / k.sh + 1;
    const size_t ow = (k.w + k.pl + k.pr - (k.dw * (k.kw - 1) + 1)) / k.sw + 1;
    std::vector<float> x(k.n * k.h * k.w * k.c), w(k.m * k.c * k.kh * k.kw), b(k.m);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    for (float& v : b) v = u(rng);
    DenseConvWeights packed;
    pack_dense_conv(w.data(), b.data(), k.m, k.c, k.kh, k.kw, false, &packed);
    for (float lo : {-INFINITY, 0.f}) {
      DenseConvGeometry g;
      g.batch = k.n, g.in_h = k.h, g.in_w = k.w, g.out_h = oh, g.out_w = ow;
      g.stride_h = k.sh, g.stride_w = k.sw, g.dilation_h = k.dh, g.dilation_w = k.dw;
      g.pad_top = k.pt, g.pad_left = k.pl, g.in_stride = k.c, g.out_min = lo, g.out_max = lo == 0.f ? 6.f : INFINITY;
      std::vector<double> want = reference(k, x, w, b, oh, ow, g.out_min, g.out_max);
      for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
        std::vector<float> y(want.size() + 1, NAN);  // one past the end must stay untouched
        dense_conv(packed, g, x.data(), y.data(), pool);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(y[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "case c=" << k.c << " m=" << k.m << " i=" << i;
        EXPECT_TRUE(std::isnan(y[want.size()]));
      }
    }
  }
  pthreadpool_destroy(two);
}

// A grouped convolution (grouped_dense_conv): each group against the reference over its own
// channels; groups of 16 (regnet's), 32 (two blocks) and 24 -> 48; strides, pads, a batch of
// three, few pixels (more groups than tiles), and an output inside a Concat's wider rows (the
// channels around it stay untouched).
TEST(GroupedDenseConv, EachGroupMatchesTheReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  pthreadpool_t two = pthreadpool_create(2);
  struct Grouped {
    size_t groups;
    Case k;  // c and m per group
    size_t extra;  // channels of a wider output row around the layer's (a Concat's slice), before and after it
  };
  const Grouped cases[] = {
      {2, {1, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 0},  {4, {2, 15, 13, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, 0},
      {25, {2, 4, 4, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 0},   {10, {1, 1, 1, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 0},
      {3, {3, 9, 11, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, 0},   {2, {1, 12, 10, 24, 48, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1}, 0},
      {5, {1, 7, 9, 16, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, 0},    {4, {2, 10, 12, 16, 16, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2}, 8},
  };
  for (const Grouped& gc : cases) {
    const Case& k = gc.k;
    const size_t cin = gc.groups * k.c, mout = gc.groups * k.m, row = mout + 2 * gc.extra;
    const size_t oh = (k.h + k.pt + k.pb - (k.dh * (k.kh - 1) + 1)) / k.sh + 1;
    const size_t ow = (k.w + k.pl + k.pr - (k.dw * (k.kw - 1) + 1)) / k.sw + 1;
    std::vector<float> x(k.n * k.h * k.w * cin), w(mout * k.c * k.kh * k.kw), b(mout);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    for (float& v : b) v = u(rng);
    std::vector<DenseConvWeights> packed(gc.groups);
    const size_t wg = k.m * k.c * k.kh * k.kw;
    for (size_t gi = 0; gi < gc.groups; ++gi)
      pack_dense_conv(w.data() + gi * wg, b.data() + gi * k.m, k.m, k.c, k.kh, k.kw, false, &packed[gi]);
    DenseConvGeometry g;
    g.batch = k.n, g.in_h = k.h, g.in_w = k.w, g.out_h = oh, g.out_w = ow;
    g.stride_h = k.sh, g.stride_w = k.sw, g.dilation_h = k.dh, g.dilation_w = k.dw;
    g.pad_top = k.pt, g.pad_left = k.pl, g.in_stride = cin, g.out_stride = row;
    const size_t pixels = k.n * oh * ow;
    for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
      std::vector<float> y(pixels * row + 1, NAN);  // the rows' other channels and one past the end stay NaN
      grouped_dense_conv(packed.data(), gc.groups, g, x.data(), y.data() + gc.extra, pool);
      for (size_t gi = 0; gi < gc.groups; ++gi) {
        std::vector<float> xg(k.n * k.h * k.w * k.c);
        for (size_t p = 0; p < k.n * k.h * k.w; ++p)
          for (size_t c = 0; c < k.c; ++c) xg[p * k.c + c] = x[p * cin + gi * k.c + c];
        const std::vector<float> wgs(w.begin() + gi * wg, w.begin() + (gi + 1) * wg);
        const std::vector<float> bg(b.begin() + gi * k.m, b.begin() + (gi + 1) * k.m);
        const std::vector<double> want = reference(k, xg, wgs, bg, oh, ow, -INFINITY, INFINITY);
        for (size_t p = 0; p < pixels; ++p)
          for (size_t m = 0; m < k.m; ++m)
            ASSERT_NEAR(y[p * row + gc.extra + gi * k.m + m], want[p * k.m + m], 1e-4 * (1 + std::fabs(want[p * k.m + m])))
                << "groups=" << gc.groups << " c=" << k.c << " group " << gi << " pixel " << p << " channel " << m;
      }
      for (size_t p = 0; p < pixels; ++p)
        for (size_t e = 0; e < gc.extra; ++e) {
          EXPECT_TRUE(std::isnan(y[p * row + e]));
          EXPECT_TRUE(std::isnan(y[p * row + gc.extra + mout + e]));
        }
      EXPECT_TRUE(std::isnan(y[pixels * row]));
    }
  }
  pthreadpool_destroy(two);
}

TEST(DenseConv, WindowsLongerThanTheTapTableFitOnlyAsRows) {
  EXPECT_TRUE(dense_conv_fits(8, 8, false));
  EXPECT_FALSE(dense_conv_fits(1, 400, false));  // padding or dilation: edge tiles need a pointer per tap
  EXPECT_TRUE(dense_conv_fits(1, 400, true));
  EXPECT_FALSE(dense_conv_fits(65, 1, true));  // more kernel rows than the table holds
}

// A narrow 1x1 layer reading a slice of a wider input (in_stride > C) and writing a Concat's
// slice (out_stride > M): only its channels are written, and a NaN reaches its pixel only.
TEST(DenseConv, NarrowPointwiseReadsAndWritesSlices) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // 6 outputs (one vector), and 21 (three on the AVX2 row, the last masked; the tiles elsewhere),
  // of 12 inputs and of 24 (the AVX2 row's loop over inputs); 72 and 100 outputs of 16 and 40
  // inputs, written contiguously (groups of 32 there) or into a slice (the tiles)
  for (const auto& [m, c, ys] : {std::tuple<size_t, size_t, size_t>{6, 12, 10}, {21, 12, 25}, {21, 24, 25}, {72, 16, 72},
                                 {100, 40, 100}, {72, 16, 144}}) {
  const size_t n = 2, h = 9, wd = 31, xs = c + 8;
  const size_t pixels = n * h * wd;
  std::vector<float> x(pixels * xs), w(m * c), b(m);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  x[100 * xs + 3] = NAN;
  DenseConvWeights packed;
  pack_dense_conv(w.data(), b.data(), m, c, 1, 1, false, &packed);
  DenseConvGeometry g;
  g.batch = n, g.in_h = h, g.in_w = wd, g.out_h = h, g.out_w = wd, g.in_stride = xs, g.out_stride = ys;
  g.out_min = -0.5f, g.out_max = 0.5f;
  pthreadpool_t two = pthreadpool_create(2);
  for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
    std::vector<float> y(pixels * ys, 7.f);
    dense_conv(packed, g, x.data(), y.data(), pool);
    for (size_t p = 0; p < pixels; ++p)
      for (size_t o = 0; o < ys; ++o) {
        const float got = y[p * ys + o];
        if (o >= m) {
          ASSERT_EQ(got, 7.f) << p << "," << o;  // outside the slice: untouched
          continue;
        }
        double s = b[o];
        for (size_t k = 0; k < c; ++k) s += static_cast<double>(x[p * xs + k]) * w[o * c + k];
        if (p == 100) {
          ASSERT_TRUE(std::isnan(got)) << o;
        } else {
          ASSERT_NEAR(got, std::min(0.5, std::max(-0.5, s)), 1e-5) << p << "," << o;
        }
      }
  }
  pthreadpool_destroy(two);
  }
}

TEST(DenseConv, FullyConnectedRowsWithTransposedWeights) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  // 13 and 30 rows: the 12-row pair kernel where the row has it (evenly spaced rows), with a
  // masked second block (n = 19), and rows strided past their k values (in_stride > k)
  for (size_t rows : {1, 5, 6, 7, 13, 30}) {
    const size_t k = 37, n = 19;
    std::vector<float> a(rows * k), w(k * n);  // w is [K, N] as MatMul's right operand
    for (float& v : a) v = u(rng);
    for (float& v : w) v = u(rng);
    DenseConvWeights packed;
    pack_dense_conv(w.data(), nullptr, n, k, 1, 1, true, &packed);
    DenseConvGeometry g;
    g.batch = rows;
    g.in_stride = k;
    std::vector<float> y(rows * n);
    dense_conv(packed, g, a.data(), y.data(), nullptr);
    for (size_t r = 0; r < rows; ++r)
      for (size_t j = 0; j < n; ++j) {
        double s = 0;
        for (size_t i = 0; i < k; ++i) s += static_cast<double>(a[r * k + i]) * w[i * n + j];
        ASSERT_NEAR(y[r * n + j], s, 1e-4 * (1 + std::fabs(s)));
      }
  }
}

TEST(DepthwiseConv, MatchesAReferenceAtManyGeometries) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  pthreadpool_t two = pthreadpool_create(2);
  // n, h, w, c (= m), kh, kw, strides, dilations, pads t l b r
  const Case cases[] = {
      {1, 9, 11, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    {2, 10, 13, 19, 19, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {1, 20, 20, 96, 96, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3}, {1, 1, 1, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 6, 17, 1, 1, 5, 5, 1, 2, 1, 1, 2, 2, 2, 2},    {1, 12, 12, 24, 24, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
      {1, 8, 9, 16, 16, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},   {3, 4, 5, 33, 33, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // rows wide enough for groups of four pixels: 3x3 and 5x5 at stride 1 and 2, dilated, 1x7
      {1, 9, 23, 40, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  {2, 12, 30, 20, 20, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      {1, 7, 33, 13, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  {1, 10, 26, 8, 8, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
      {1, 5, 40, 3, 3, 1, 7, 1, 1, 1, 1, 0, 3, 0, 3},    {1, 6, 18, 72, 72, 5, 5, 2, 2, 1, 1, 1, 1, 2, 2},
      // every pixel at an edge (5x5 dilated 2 on 8x8, LR-ASPP's last stage), channel blocks
      // in fours, then ones, then a masked tail
      {2, 8, 8, 75, 75, 5, 5, 1, 1, 2, 2, 4, 4, 4, 4},   {1, 4, 6, 36, 36, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      // edge pixels in quads from zero-padded copies: mnasnet's small layers, pads wider than the
      // kernel (windows wholly in the padding: the bias alone), asymmetric pads, 5 and 7 pixels
      {2, 16, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 9, 17, 48, 48, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
      {1, 5, 9, 16, 16, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3},   {1, 6, 5, 24, 24, 3, 3, 1, 1, 1, 1, 0, 2, 1, 0},
      {1, 7, 7, 17, 17, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      // runs of interior quads cut in chunks (every channel block per chunk), and kernel rows
      // over the padding at the top and bottom (6 and 3 taps of 3x3; 10-20 of 5x5) unrolled
      {1, 6, 62, 144, 144, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 9, 44, 100, 100, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
      {2, 8, 8, 40, 40, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},   {1, 1, 12, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      // strided runs of few channels (the AVX2 row takes them from XNNPACK), a bottom pad only
      {2, 21, 40, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, {1, 23, 47, 24, 24, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
      {1, 12, 37, 8, 8, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
  };
  for (const Case& k : cases) {
    const size_t oh = (k.h + k.pt + k.pb - (k.dh * (k.kh - 1) + 1)) / k.sh + 1;
    const size_t ow = (k.w + k.pl + k.pr - (k.dw * (k.kw - 1) + 1)) / k.sw + 1;
    std::vector<float> x(k.n * k.h * k.w * k.c), w(k.c * k.kh * k.kw), b(k.c);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    for (float& v : b) v = u(rng);
    DepthwiseWeights packed;
    pack_depthwise(w.data(), b.data(), k.c, k.kh, k.kw, &packed);
    DenseConvGeometry g;
    g.batch = k.n, g.in_h = k.h, g.in_w = k.w, g.out_h = oh, g.out_w = ow;
    g.stride_h = k.sh, g.stride_w = k.sw, g.dilation_h = k.dh, g.dilation_w = k.dw;
    g.pad_top = k.pt, g.pad_left = k.pl, g.in_stride = k.c, g.out_min = -1.5f, g.out_max = 1.5f;
    // The reference is the dense one with the depthwise weights on the diagonal.
    std::vector<float> diagonal(k.c * k.c * k.kh * k.kw, 0.f);
    for (size_t c = 0; c < k.c; ++c)
      for (size_t t = 0; t < k.kh * k.kw; ++t) diagonal[(c * k.c + c) * k.kh * k.kw + t] = w[c * k.kh * k.kw + t];
    const std::vector<double> want = reference(k, x, diagonal, b, oh, ow, g.out_min, g.out_max);
    for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
      std::vector<float> y(want.size() + 1, NAN);
      depthwise_conv(packed, g, x.data(), y.data(), pool);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-4) << "c=" << k.c << " k=" << k.kh << " element " << i;
      EXPECT_TRUE(std::isnan(y.back()));
    }
  }
  pthreadpool_destroy(two);
}

// A NaN or Inf in the input reaches exactly the outputs whose window holds it, on the
// four-pixel path (the middle of a wide row) and on the edge path (the first column).
TEST(DepthwiseConv, NonFiniteInputsReachTheirWindowsOnly) {
  const size_t h = 6, w = 20, c = 12, k = 3;
  std::vector<float> wt(c * k * k, 0.25f), b(c, 0.f);
  DepthwiseWeights packed;
  pack_depthwise(wt.data(), b.data(), c, k, k, &packed);
  DenseConvGeometry g;
  g.batch = 1, g.in_h = h, g.in_w = w, g.out_h = h, g.out_w = w, g.pad_top = 1, g.pad_left = 1, g.in_stride = c;
  g.out_min = 0.f, g.out_max = 6.f;  // a Relu6 clamp must keep NaN
  for (const float bad : {NAN, INFINITY}) {
    for (const size_t col : {size_t{0}, size_t{9}}) {
      std::vector<float> x(h * w * c, 1.f), y(h * w * c);
      x[(2 * w + col) * c + 5] = bad;  // row 2, channel 5
      depthwise_conv(packed, g, x.data(), y.data(), nullptr);
      for (size_t oh = 0; oh < h; ++oh)
        for (size_t ow = 0; ow < w; ++ow)
          for (size_t ch = 0; ch < c; ++ch) {
            const float v = y[(oh * w + ow) * c + ch];
            const bool hit = ch == 5 && oh + 1 >= 2 && oh <= 3 && ow + 1 >= col && ow <= col + 1;
            if (!hit) {
              ASSERT_TRUE(std::isfinite(v)) << oh << "," << ow << "," << ch;
            } else if (std::isnan(bad)) {
              ASSERT_TRUE(std::isnan(v)) << oh << "," << ow;
            } else {
              ASSERT_EQ(v, 6.f) << oh << "," << ow;  // +Inf clamped to the Relu6 bound
            }
          }
    }
  }
}

// Depthwise then a 1x1 convolution in one pass (depthwise_pointwise) against the two layers
// one after the other: tasks of several rows that cross an image's end, a row wider than the
// scratch's budget (one row a task), channel counts off the blocks, the narrow rows (<= 32
// outputs) and the tiles, a Concat slice (out_stride), a gate-free clamp, one and two workers;
// and a NaN in the input reaches the same outputs both ways.
TEST(DepthwisePointwise, MatchesTheTwoLayersInTurn) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  pthreadpool_t two = pthreadpool_create(2);
  struct Fused {
    size_t n, h, w, c, m, k, s, out_stride;
  };
  const Fused cases[] = {{2, 9, 7, 19, 24, 3, 1, 0},    {1, 30, 56, 144, 24, 3, 1, 0}, {2, 14, 14, 40, 96, 5, 2, 0},
                         {1, 5, 30, 600, 40, 3, 1, 0},  {3, 4, 5, 8, 16, 3, 1, 40},    {1, 23, 33, 33, 7, 3, 2, 0},
                         {1, 1, 1, 16, 8, 3, 1, 0}};
  for (const Fused& f : cases) {
    const size_t pad = f.k / 2, oh = (f.h + 2 * pad - f.k) / f.s + 1, ow = (f.w + 2 * pad - f.k) / f.s + 1;
    std::vector<float> x(f.n * f.h * f.w * f.c), dw(f.c * f.k * f.k), db(f.c), pw(f.m * f.c), pb(f.m);
    for (auto* v : {&x, &dw, &db, &pw, &pb})
      for (float& e : *v) e = u(rng);
    x[x.size() / 2] = NAN;
    DepthwiseWeights dpacked;
    pack_depthwise(dw.data(), db.data(), f.c, f.k, f.k, &dpacked);
    DenseConvWeights ppacked;
    pack_dense_conv(pw.data(), pb.data(), f.m, f.c, 1, 1, false, &ppacked);
    DenseConvGeometry dg;
    dg.batch = f.n, dg.in_h = f.h, dg.in_w = f.w, dg.out_h = oh, dg.out_w = ow, dg.stride_h = dg.stride_w = f.s;
    dg.pad_top = dg.pad_left = static_cast<int64_t>(pad), dg.in_stride = f.c, dg.out_min = 0.f, dg.out_max = 6.f;
    DenseConvGeometry pg;
    pg.batch = f.n, pg.in_h = pg.out_h = oh, pg.in_w = pg.out_w = ow, pg.in_stride = f.c, pg.out_stride = f.out_stride;
    pg.out_min = -2.f, pg.out_max = 2.f;
    const size_t ys = f.out_stride ? f.out_stride : f.m, pixels = f.n * oh * ow;
    std::vector<float> mid(pixels * f.c), want(pixels * ys, -7.f);
    depthwise_conv(dpacked, dg, x.data(), mid.data(), nullptr);
    dense_conv(ppacked, pg, mid.data(), want.data(), nullptr);
    for (size_t slots : {1, 2}) {
      std::vector<float> scratch(slots * depthwise_pointwise_scratch_floats(dpacked, dg), NAN);
      std::vector<float> got(pixels * ys, -7.f);
      depthwise_pointwise(dpacked, dg, ppacked, pg, x.data(), got.data(), scratch.data(), slots, slots == 1 ? nullptr : two);
      for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << "c=" << f.c << " m=" << f.m << " element " << i;
        } else {
          ASSERT_NEAR(got[i], want[i], 1e-5) << "c=" << f.c << " m=" << f.m << " slots=" << slots << " element " << i;
        }
      }
    }
  }
  pthreadpool_destroy(two);
}

TEST(BatchMatMul, MatchesAReferenceWithBroadcastBatchesAndTails) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  pthreadpool_t two = pthreadpool_create(2);
  struct Shapes { std::vector<int64_t> a, b; };
  const Shapes cases[] = {{{2, 3, 49, 32}, {2, 3, 32, 49}}, {{1, 7, 5}, {3, 5, 17}}, {{4, 1, 13, 64}, {1, 3, 64, 16}},
                          {{1, 1}, {1, 1}},                  {{6, 0}, {0, 9}},     {{2, 1, 40}, {40, 33}}};
  for (const Shapes& sh : cases) {
    MatMulGeometry g = matmul_geometry(sh.a.data(), static_cast<int>(sh.a.size()), sh.b.data(), static_cast<int>(sh.b.size()));
    size_t na = 1, nb = 1;
    for (int64_t d : sh.a) na *= static_cast<size_t>(d);
    for (int64_t d : sh.b) nb *= static_cast<size_t>(d);
    std::vector<float> a(na), b(nb);
    for (float& v : a) v = u(rng);
    for (float& v : b) v = u(rng);
    for (pthreadpool_t pool : {pthreadpool_t{nullptr}, two}) {
      std::vector<float> y(g.batches * g.m * g.n + 1, NAN);
      batch_matmul(g, a.data(), b.data(), y.data(), pool);
      for (size_t t = 0; t < g.batches; ++t) {
        size_t ao = 0, bo = 0, rest = t;
        for (int k = g.batch_rank - 1; k >= 0; --k) {
          ao += rest % g.size[k] * g.a_stride[k];
          bo += rest % g.size[k] * g.b_stride[k];
          rest /= g.size[k];
        }
        for (size_t i = 0; i < g.m; ++i)
          for (size_t j = 0; j < g.n; ++j) {
            double s = 0;
            for (size_t k = 0; k < g.k; ++k) s += static_cast<double>(a[ao + i * g.k + k]) * b[bo + k * g.n + j];
            ASSERT_NEAR(y[(t * g.m + i) * g.n + j], s, 1e-4 * (1 + std::fabs(s)));
          }
      }
      EXPECT_TRUE(std::isnan(y.back()));
    }
  }
  pthreadpool_destroy(two);
}

}  // namespace
}  // namespace kiln::delegates::xnnpack
