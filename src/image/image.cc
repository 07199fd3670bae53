#include "image/image.h"
#include "core/status.h"

#include <stb/stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

namespace kiln::image {

namespace {

Result<Image> decoded(uint8_t* data, int w, int h, int channels, const std::string& what) {
  if (!data) return data_loss("cannot decode " + what + ": " + (stbi_failure_reason() ? stbi_failure_reason() : "unknown"));
  Image img;
  img.width = w;
  img.height = h;
  img.channels = channels;
  img.pixels.assign(data, data + static_cast<size_t>(w) * static_cast<size_t>(h) * static_cast<size_t>(channels));
  stbi_image_free(data);
  return img;
}

// Where output coordinate i of `out` samples an axis of `in` pixels: the two neighbours and
// the weight of the second.
struct Tap {
  int i0, i1;
  float w1;
};

std::vector<Tap> taps(int in, int out) {
  std::vector<Tap> t(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / out;
  for (int i = 0; i < out; ++i) {
    double s = (i + 0.5) * scale - 0.5;
    s = std::clamp(s, 0.0, static_cast<double>(in - 1));
    const int i0 = static_cast<int>(std::floor(s));
    t[static_cast<size_t>(i)] = {i0, std::min(i0 + 1, in - 1), static_cast<float>(s - i0)};
  }
  return t;
}

}  // namespace

Result<Image> decode_memory(const uint8_t* data, size_t size, int channels) {
  if (channels != 1 && channels != 3 && channels != 4) return invalid_argument("channels must be 1, 3 or 4");
  if (size == 0 || size > static_cast<size_t>(INT32_MAX)) return data_loss("cannot decode an image of " + std::to_string(size) + " bytes");
  int w = 0, h = 0, n = 0;
  uint8_t* px = stbi_load_from_memory(data, static_cast<int>(size), &w, &h, &n, channels);
  return decoded(px, w, h, channels, "the image");
}

Result<Image> decode_file(const std::string& path, int channels) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open image '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return data_loss("image '" + path + "' is empty");
  Result<Image> img = decode_memory(bytes.data(), bytes.size(), channels);
  if (!img.ok()) return data_loss("image '" + path + "': " + img.status().message() + " (PNG, JPEG and BMP are read)");
  return img;
}

Image resize_bilinear(const Image& in, int width, int height) {
  Image out;
  out.width = width;
  out.height = height;
  out.channels = in.channels;
  out.pixels.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * static_cast<size_t>(in.channels));
  if (width <= 0 || height <= 0 || in.width <= 0 || in.height <= 0) return out;
  const std::vector<Tap> tx = taps(in.width, width), ty = taps(in.height, height);
  const int c = in.channels;
  auto at = [&](int y, int x, int k) { return static_cast<float>(in.pixels[(static_cast<size_t>(y) * in.width + x) * c + k]); };
  for (int y = 0; y < height; ++y) {
    const Tap& v = ty[static_cast<size_t>(y)];
    for (int x = 0; x < width; ++x) {
      const Tap& u = tx[static_cast<size_t>(x)];
      for (int k = 0; k < c; ++k) {
        const float top = at(v.i0, u.i0, k) + u.w1 * (at(v.i0, u.i1, k) - at(v.i0, u.i0, k));
        const float bottom = at(v.i1, u.i0, k) + u.w1 * (at(v.i1, u.i1, k) - at(v.i1, u.i0, k));
        const float p = top + v.w1 * (bottom - top);
        out.pixels[(static_cast<size_t>(y) * width + x) * c + k] = static_cast<uint8_t>(std::clamp(std::lround(p), 0L, 255L));
      }
    }
  }
  return out;
}

Result<Mode> parse_mode(const std::string& name) {
  if (name == "resize") return Mode::kResize;
  if (name == "crop") return Mode::kCrop;
  if (name == "letterbox") return Mode::kLetterbox;
  return invalid_argument("unknown preprocessing '" + name + "'; use resize, crop or letterbox");
}

Image fit(const Image& in, int width, int height, Mode mode, uint8_t pad, Fit* f) {
  Fit local;
  Fit& m = f ? *f : local;
  if (mode == Mode::kResize || in.width <= 0 || in.height <= 0) {
    m = {static_cast<double>(width) / std::max(1, in.width), static_cast<double>(height) / std::max(1, in.height), 0, 0};
    return resize_bilinear(in, width, height);
  }
  const double sx = static_cast<double>(width) / in.width, sy = static_cast<double>(height) / in.height;
  const double s = mode == Mode::kCrop ? std::max(sx, sy) : std::min(sx, sy);
  // The scaled image's size, at least the target (crop) or at most it (letterbox).
  int nw = static_cast<int>(std::lround(in.width * s)), nh = static_cast<int>(std::lround(in.height * s));
  nw = mode == Mode::kCrop ? std::max(nw, width) : std::clamp(nw, 1, width);
  nh = mode == Mode::kCrop ? std::max(nh, height) : std::clamp(nh, 1, height);
  const Image scaled = resize_bilinear(in, nw, nh);
  Image out;
  out.width = width;
  out.height = height;
  out.channels = in.channels;
  out.pixels.assign(static_cast<size_t>(width) * static_cast<size_t>(height) * static_cast<size_t>(in.channels), pad);
  const size_t row = static_cast<size_t>(in.channels);
  if (mode == Mode::kCrop) {
    const int ox = (nw - width) / 2, oy = (nh - height) / 2;
    for (int y = 0; y < height; ++y)
      std::memcpy(&out.pixels[static_cast<size_t>(y) * width * row], &scaled.pixels[(static_cast<size_t>(y + oy) * nw + ox) * row],
                  static_cast<size_t>(width) * row);
    m = {static_cast<double>(nw) / in.width, static_cast<double>(nh) / in.height, -static_cast<double>(ox), -static_cast<double>(oy)};
  } else {
    const int ox = (width - nw) / 2, oy = (height - nh) / 2;
    for (int y = 0; y < nh; ++y)
      std::memcpy(&out.pixels[(static_cast<size_t>(y + oy) * width + ox) * row], &scaled.pixels[static_cast<size_t>(y) * nw * row],
                  static_cast<size_t>(nw) * row);
    m = {static_cast<double>(nw) / in.width, static_cast<double>(nh) / in.height, static_cast<double>(ox), static_cast<double>(oy)};
  }
  return out;
}

Status to_tensor(const Image& in, const std::vector<float>& mean, const std::vector<float>& std, bool nchw, float* out) {
  const int c = in.channels;
  auto per_channel = [&](const std::vector<float>& v, const char* what) -> Status {
    if (v.size() != 1 && v.size() != static_cast<size_t>(c))
      return invalid_argument(std::string(what) + " has " + std::to_string(v.size()) + " values; give 1 or " +
                              std::to_string(c) + " (one per channel)");
    return ok_status();
  };
  KILN_TRY(per_channel(mean, "mean"));
  KILN_TRY(per_channel(std, "std"));
  for (float s : std)
    if (!(s != 0.f) || !std::isfinite(s)) return invalid_argument("std must be finite and non-zero, got " + std::to_string(s));
  const size_t hw = static_cast<size_t>(in.width) * static_cast<size_t>(in.height);
  for (size_t p = 0; p < hw; ++p)
    for (int k = 0; k < c; ++k) {
      const float m = mean.size() == 1 ? mean[0] : mean[static_cast<size_t>(k)];
      const float s = std.size() == 1 ? std[0] : std[static_cast<size_t>(k)];
      const float v = (static_cast<float>(in.pixels[p * c + k]) / 255.f - m) / s;
      out[nchw ? static_cast<size_t>(k) * hw + p : p * c + k] = v;
    }
  return ok_status();
}

}  // namespace kiln::image
