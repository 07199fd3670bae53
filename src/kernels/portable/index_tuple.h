#pragma once
// Index tuples of GatherND and ScatterND: k indices into the leading k axes of a tensor.

#include <cstdint>

namespace kiln::kernels {

/// The row-major element offset that the tuple ix[0, k) selects among axes of sizes
/// dims[0, k) (a negative index counts from the end), or -1 when an index is out of range.
template <typename I>
int64_t tuple_offset(const I* ix, const int64_t* dims, int64_t k) {
  int64_t offset = 0;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t size = dims[j], v = static_cast<int64_t>(ix[j]);
    if (v < -size || v >= size) return -1;
    offset = offset * size + (v < 0 ? v + size : v);
  }
  return offset;
}

}  // namespace kiln::kernels
