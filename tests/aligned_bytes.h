#pragma once
// A program's bytes in 64-byte-aligned memory, the form Program::load_buffer requires (it
// uses the constant segment in place). Shared by the tests and the benchmarks.

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kiln/program.h"

namespace kiln::testing {

class AlignedBytes {
 public:
  explicit AlignedBytes(const std::vector<uint8_t>& bytes) : blocks_(bytes.size() / 64 + 1), size_(bytes.size()) {
    if (size_ > 0) std::memcpy(blocks_.data(), bytes.data(), size_);
  }
  const uint8_t* data() const { return blocks_.data()->b; }
  size_t size() const { return size_; }
  /// Loads the copy; it must outlive the program.
  Result<std::unique_ptr<Program>> load() const { return Program::load_buffer(data(), size_); }

 private:
  struct alignas(64) Block {
    uint8_t b[64];
  };
  std::vector<Block> blocks_;
  size_t size_;
};

}  // namespace kiln::testing
