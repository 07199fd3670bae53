#pragma once
// A bounded dimension of a shape contract: the one description of a dim that the runtime's
// metadata, the exporter's expressions and `--dim` share.

#include <cstdint>
#include <string>

namespace kiln {

/// A named dynamic dimension: admissible values are min..max in multiples of step.
struct DimSpec {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  int64_t step = 1;
  /// A data-dependent size (a NonZero, Compress, Unique or NonMaxSuppression count, a TopK K read
  /// from the data, an If result sized by its branch): set while executing, by the instruction that
  /// produces it; Method::dim_value reads it after execute.
  bool data = false;
};

}  // namespace kiln
