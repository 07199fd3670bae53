// kiln::image against references written here from the definitions (per output pixel, in
// double): bilinear with half-pixel centers, crop and letterbox geometry with the mapping back,
// normalization and layouts; decoding of PNG and BMP (exact) and JPEG (lossy) written by
// stb_image_write from generated images; errors for bad input.
#include "image/image.h"

#include <gtest/gtest.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "scratch_dir.h"

namespace kiln::image {
namespace {

Image random_image(int w, int h, int c, uint32_t seed) {
  std::mt19937 rng(seed);
  Image img{w, h, c, std::vector<uint8_t>(static_cast<size_t>(w * h * c))};
  for (auto& p : img.pixels) p = static_cast<uint8_t>(rng() & 0xFF);
  return img;
}

// Bilinear, half-pixel centers, edges clamped: straight from the definition, in double.
double reference_bilinear(const Image& in, int out_w, int out_h, int x, int y, int k) {
  auto src = [](int i, int n_in, int n_out) { return std::clamp((i + 0.5) * n_in / n_out - 0.5, 0.0, n_in - 1.0); };
  const double sx = src(x, in.width, out_w), sy = src(y, in.height, out_h);
  const int x0 = static_cast<int>(sx), y0 = static_cast<int>(sy);
  const int x1 = std::min(x0 + 1, in.width - 1), y1 = std::min(y0 + 1, in.height - 1);
  const double fx = sx - x0, fy = sy - y0;
  auto p = [&](int yy, int xx) { return static_cast<double>(in.pixels[(static_cast<size_t>(yy) * in.width + xx) * in.channels + k]); };
  return (1 - fy) * ((1 - fx) * p(y0, x0) + fx * p(y0, x1)) + fy * ((1 - fx) * p(y1, x0) + fx * p(y1, x1));
}

TEST(Image, BilinearMatchesTheDefinitionAtManySizes) {
  const int sizes[][4] = {{7, 5, 3, 2},    {7, 5, 14, 10}, {64, 48, 224, 224}, {224, 224, 32, 17},
                          {1, 1, 5, 3},    {5, 1, 1, 1},   {300, 200, 224, 224}, {13, 9, 13, 9}};
  uint32_t seed = 1;
  for (const auto& s : sizes)
    for (int c : {1, 3, 4}) {
      const Image in = random_image(s[0], s[1], c, seed++);
      const Image out = resize_bilinear(in, s[2], s[3]);
      ASSERT_EQ(out.width, s[2]);
      ASSERT_EQ(out.height, s[3]);
      for (int y = 0; y < s[3]; ++y)
        for (int x = 0; x < s[2]; ++x)
          for (int k = 0; k < c; ++k) {
            const double want = reference_bilinear(in, s[2], s[3], x, y, k);
            const int got = out.pixels[(static_cast<size_t>(y) * s[2] + x) * c + k];
            ASSERT_LE(std::abs(got - want), 0.5 + 1e-3) << s[0] << "x" << s[1] << " -> " << s[2] << "x" << s[3] << " at " << x << "," << y;
          }
    }
  // Same size: the identity.
  const Image same = random_image(13, 9, 3, 99);
  EXPECT_EQ(resize_bilinear(same, 13, 9).pixels, same.pixels);
}

TEST(Image, CropAndLetterboxKeepTheAspectAndMapBack) {
  const Image in = random_image(320, 240, 3, 5);  // 4:3 into a square
  Fit f;
  const Image box = fit(in, 224, 224, Mode::kLetterbox, 114, &f);
  EXPECT_DOUBLE_EQ(f.scale_x, 224.0 / 320);
  EXPECT_DOUBLE_EQ(f.scale_y, 168.0 / 240);
  EXPECT_EQ(f.offset_x, 0);
  EXPECT_EQ(f.offset_y, 28);  // (224 - 168) / 2 rows of padding above
  EXPECT_EQ(box.pixels[0], 114);                            // pad above
  EXPECT_EQ(box.pixels[(223 * 224 + 223) * 3 + 2], 114);    // pad below
  const Image scaled = resize_bilinear(in, 224, 168);       // the image in between
  EXPECT_TRUE(std::equal(scaled.pixels.begin(), scaled.pixels.end(), box.pixels.begin() + 28 * 224 * 3));
  // The source pixel of an output pixel: (output - offset) / scale.
  EXPECT_NEAR((112 - f.offset_x) / f.scale_x, 160, 1e-9);
  EXPECT_NEAR((28 - f.offset_y) / f.scale_y, 0, 1e-9);

  const Image crop = fit(in, 224, 224, Mode::kCrop, 0, &f);
  EXPECT_DOUBLE_EQ(f.scale_y, 224.0 / 240);
  EXPECT_DOUBLE_EQ(f.scale_x, 299.0 / 320);  // round(320 * 224 / 240) = 299 columns
  EXPECT_EQ(f.offset_x, -37);                 // (299 - 224) / 2 columns cut on the left
  const Image wide = resize_bilinear(in, 299, 224);
  for (int y = 0; y < 224; y += 37)
    for (int x = 0; x < 224; x += 31)
      for (int k = 0; k < 3; ++k)
        ASSERT_EQ(crop.pixels[(static_cast<size_t>(y) * 224 + x) * 3 + k], wide.pixels[(static_cast<size_t>(y) * 299 + x + 37) * 3 + k]);

  const Image stretch = fit(in, 100, 50, Mode::kResize, 0, &f);
  EXPECT_EQ(stretch.pixels, resize_bilinear(in, 100, 50).pixels);
  EXPECT_DOUBLE_EQ(f.scale_x, 100.0 / 320);
  EXPECT_TRUE(parse_mode("letterbox").ok());
  EXPECT_EQ(parse_mode("squash").status().message(), "unknown preprocessing 'squash'; use resize, crop or letterbox");
}

TEST(Image, NormalizesIntoEitherLayout) {
  const Image in = random_image(5, 4, 3, 11);
  const std::vector<float> mean = {0.485f, 0.456f, 0.406f}, std = {0.229f, 0.224f, 0.225f};
  std::vector<float> nchw(60), nhwc(60);
  ASSERT_TRUE(to_tensor(in, mean, std, true, nchw.data()).ok());
  ASSERT_TRUE(to_tensor(in, mean, std, false, nhwc.data()).ok());
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x)
      for (int k = 0; k < 3; ++k) {
        const double want = (in.pixels[(y * 5 + x) * 3 + k] / 255.0 - mean[k]) / std[k];
        EXPECT_NEAR(nchw[(k * 4 + y) * 5 + x], want, 1e-5);
        EXPECT_NEAR(nhwc[(y * 5 + x) * 3 + k], want, 1e-5);
      }
  EXPECT_EQ(to_tensor(in, {0.5f, 0.5f}, {1.f}, true, nchw.data()).message(), "mean has 2 values; give 1 or 3 (one per channel)");
  EXPECT_EQ(to_tensor(in, {0.5f}, {0.f}, true, nchw.data()).message(), "std must be finite and non-zero, got 0.000000");
}

TEST(Image, DecodesPngBmpAndJpeg) {
  const Image in = random_image(33, 17, 3, 21);
  const std::string dir = ::kiln::testing::scratch_dir();
  ASSERT_TRUE(stbi_write_png((dir + "/t.png").c_str(), 33, 17, 3, in.pixels.data(), 33 * 3));
  ASSERT_TRUE(stbi_write_bmp((dir + "/t.bmp").c_str(), 33, 17, 3, in.pixels.data()));
  for (const char* f : {"/t.png", "/t.bmp"}) {
    auto got = decode_file(dir + f);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(got->width, 33);
    EXPECT_EQ(got->height, 17);
    EXPECT_EQ(got->pixels, in.pixels) << f;
  }
  // JPEG is lossy: a smooth image comes back close.
  Image smooth{64, 48, 3, std::vector<uint8_t>(64 * 48 * 3)};
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x)
      for (int k = 0; k < 3; ++k) smooth.pixels[(y * 64 + x) * 3 + k] = static_cast<uint8_t>(x * 3 + y * 2 + k * 20);
  ASSERT_TRUE(stbi_write_jpg((dir + "/t.jpg").c_str(), 64, 48, 3, smooth.pixels.data(), 95));
  auto jpg = decode_file(dir + "/t.jpg");
  ASSERT_TRUE(jpg.ok()) << jpg.status().message();
  double err = 0, sum = 0;
  for (size_t i = 0; i < smooth.pixels.size(); ++i) {
    const double e = std::abs(double(jpg->pixels[i]) - smooth.pixels[i]);
    err = std::max(err, e);
    sum += e;
  }
  EXPECT_LE(sum / static_cast<double>(smooth.pixels.size()), 2.0);  // mean
  EXPECT_LE(err, 24);  // chroma subsampling blurs colour edges a little
  // Gray decodes to one channel on request.
  auto gray = decode_file(dir + "/t.png", 1);
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->channels, 1);
  EXPECT_EQ(decode_file(dir + "/missing.png").status().message(), "cannot open image '" + dir + "/missing.png'");
  const uint8_t junk[] = {1, 2, 3, 4, 5};
  EXPECT_FALSE(decode_memory(junk, sizeof junk).ok());
  EXPECT_FALSE(decode_file(dir + "/t.png", 2).ok());
}

}  // namespace
}  // namespace kiln::image
