#pragma once
// CRC-32C (Castagnoli), the integrity check of .kiln segments: the SSE4.2 crc32 instruction
// where the CPU has it (checked once at run time), a table otherwise; both give the same value.
// Cost: 0.14-0.18 ms per MB with SSE4.2 (bench/crc_bench.cc).

#include <cstddef>
#include <cstdint>

namespace kiln::core {

/// CRC-32C of [data, data + n), continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace kiln::core
