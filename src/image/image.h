#pragma once
// kiln::image: host-side normalization, the way out for a static image model fed camera frames
// of other sizes. Decode (PNG, JPEG, BMP, via stb_image), fit to the model's input size
// (bilinear resize, center crop, or letterbox keeping the aspect), normalize by mean and std,
// and lay out as NCHW or NHWC f32. Fitting returns the scale and offset that map results in
// the model's coordinates back to the source image.

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::image {

/// 8-bit pixels, row-major, channels interleaved (HWC).
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
};

/// Decodes PNG, JPEG or BMP (what stb_image reads) into `channels` channels (1, 3 or 4).
Result<Image> decode_file(const std::string& path, int channels = 3);
Result<Image> decode_memory(const uint8_t* data, size_t size, int channels = 3);

/// Bilinear resize with half-pixel centers (source x = (x + 0.5) * in / out - 0.5, clamped to
/// the edge), no antialiasing: OpenCV's INTER_LINEAR, and torch's interpolate(align_corners=False).
Image resize_bilinear(const Image& in, int width, int height);

/// How an output pixel maps back to the source: source = (output - offset) / scale.
struct Fit {
  double scale_x = 1, scale_y = 1;
  double offset_x = 0, offset_y = 0;
};

enum class Mode {
  kResize,     ///< stretch to the size (aspect not kept)
  kCrop,       ///< scale so the image covers the size (aspect kept), then cut the center
  kLetterbox,  ///< scale so the image fits inside (aspect kept), pad the rest with `pad`
};
/// "resize", "crop" or "letterbox".
Result<Mode> parse_mode(const std::string& name);

/// Fits `in` to width x height by `mode`; `fit` (optional) receives the mapping.
Image fit(const Image& in, int width, int height, Mode mode, uint8_t pad = 0, Fit* fit = nullptr);

/// (pixel / 255 - mean[c]) / std[c] as f32, NCHW (`nchw`) or NHWC, into out (width * height *
/// channels floats). mean and std hold one value per channel, or one for all.
Status to_tensor(const Image& in, const std::vector<float>& mean, const std::vector<float>& std, bool nchw, float* out);

}  // namespace kiln::image
