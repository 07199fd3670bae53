#pragma once
// Minimal .npy (NumPy format 1.0/2.0) reading and writing for f32/i64/i32/bool, little-endian,
// C order.

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::tooling {

struct NpyArray {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Reads a .npy file. Errors name the file and what is unsupported (Fortran order,
/// big-endian, other dtypes) or damaged.
Result<NpyArray> read_npy(const std::string& path);
/// The same for a file's bytes already in memory (`path` only names it in messages).
Result<NpyArray> parse_npy(const std::string& bytes, const std::string& path);
/// Writes `data` (numel(shape) * dtype_size bytes) as a version 1.0 .npy file.
Status write_npy(const std::string& path, DType dtype, const std::vector<int64_t>& shape, const void* data);

}  // namespace kiln::tooling
