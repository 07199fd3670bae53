#pragma once
// A dim's range as reports print it: "[1, 8]", "[32, 224] step 32", "[0, 300] (data-dependent:
// ...)". One text for export's summary and inspect.

#include <string>

#include "kiln/dim.h"

namespace kiln::core {

inline std::string dim_range_text(const DimSpec& d) {
  std::string s = "[" + std::to_string(d.min) + ", " + std::to_string(d.max) + "]";
  if (d.step > 1) s += " step " + std::to_string(d.step);
  if (d.data) s += " (data-dependent: a count the instruction that makes it finds while executing)";
  return s;
}

}  // namespace kiln::core
