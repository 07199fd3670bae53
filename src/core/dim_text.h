#pragma once
// A dim's range as reports print it: "[1, 8]", "[32, 224] step 32", "[0, 300] (data-dependent:
// ...)". One text for export's summary and inspect.

#include <cctype>
#include <string>

#include "kiln/dim.h"

namespace kiln::core {

inline std::string dim_range_text(const DimSpec& d) {
  std::string s = "[" + std::to_string(d.min) + ", " + std::to_string(d.max) + "]";
  if (d.step > 1) s += " step " + std::to_string(d.step);
  if (d.data) s += " (data-dependent: a count the instruction that makes it finds while executing)";
  return s;
}

/// A dim named like a batch (batch, batch_size, bs, N, B): advice splits or pads it, a
/// suggested bound keeps it small. One rule for the runtime's way out, check --explain and
/// kiln inspect MODEL.onnx.
inline bool is_batch_name(std::string n) {
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n.find("batch") != std::string::npos || n == "n" || n == "b" || n == "bs";
}

}  // namespace kiln::core
