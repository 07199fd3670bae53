// kiln._kiln's image functions: kiln::image (decode, fit, normalize) for Python.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "errors.h"
#include "image/image.h"
#include "core/status.h"

namespace nb = nanobind;

namespace kiln::python {

namespace {

template <class T>
nb::object owned_array(std::vector<T> data, std::vector<size_t> shape) {
  auto* held = new std::vector<T>(std::move(data));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(held->data(), shape.size(), shape.data(), owner));
}

image::Image decode(const std::string& path, int channels) {
  Result<image::Image> img = image::decode_file(path, channels);
  if (!img.ok()) raise(img.status());
  return std::move(*img);
}

// HWC uint8 pixels of a PNG, JPEG or BMP file.
nb::object load(const std::string& path, int channels) {
  image::Image img = decode(path, channels);
  return owned_array(std::move(img.pixels), {static_cast<size_t>(img.height), static_cast<size_t>(img.width),
                                             static_cast<size_t>(img.channels)});
}

// The file fitted to height x width by `mode`, normalized, as [1, C, H, W] (nchw) or
// [1, H, W, C] float32; and (scale_x, scale_y, offset_x, offset_y) mapping back.
nb::tuple preprocess(const std::string& path, int height, int width, const std::string& mode, const std::vector<float>& mean,
                     const std::vector<float>& std, bool nchw, int pad, int channels) {
  if (height < 1 || width < 1 || height > 65536 || width > 65536) raise(invalid_argument("size must be in [1, 65536]"));
  if (pad < 0 || pad > 255) raise(invalid_argument("pad must be in [0, 255]"));
  Result<image::Mode> m = image::parse_mode(mode);
  if (!m.ok()) raise(m.status());
  const image::Image img = decode(path, channels);
  image::Fit f;
  const image::Image fitted = image::fit(img, width, height, *m, static_cast<uint8_t>(pad), &f);
  std::vector<float> out(static_cast<size_t>(height) * static_cast<size_t>(width) * static_cast<size_t>(channels));
  Status s = image::to_tensor(fitted, mean, std, nchw, out.data());
  if (!s.ok()) raise(s);
  std::vector<size_t> shape = nchw ? std::vector<size_t>{1, static_cast<size_t>(channels), static_cast<size_t>(height), static_cast<size_t>(width)}
                                   : std::vector<size_t>{1, static_cast<size_t>(height), static_cast<size_t>(width), static_cast<size_t>(channels)};
  return nb::make_tuple(owned_array(std::move(out), shape), nb::make_tuple(f.scale_x, f.scale_y, f.offset_x, f.offset_y));
}

}  // namespace

void def_image(nb::module_& m) {
  m.def("image_load", &load, nb::arg("path"), nb::arg("channels") = 3);
  m.def("image_preprocess", &preprocess, nb::arg("path"), nb::arg("height"), nb::arg("width"), nb::arg("mode"),
        nb::arg("mean"), nb::arg("std"), nb::arg("nchw"), nb::arg("pad"), nb::arg("channels"));
}

}  // namespace kiln::python
