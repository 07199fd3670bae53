#pragma once
// The fixed 64-byte prefix of a .kiln file: where the FlatBuffer and the constant segment are,
// and a CRC-32C (core/crc32c.h) of each of the three: header, program, constants.
// Layout: header [0, 64), program [program_offset, +program_size), constant segment
// [constants_offset, +constants_size); the three never overlap and lie inside the file.
// Version 1 (before checksums) is no longer read: re-export.

#include <cstddef>
#include <cstdint>

#include "kiln/version.h"

namespace kiln::format {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'R', 'G', '1'};
constexpr uint32_t kFormatVersion = KILN_FORMAT_VERSION;  // kiln/version.h
constexpr uint64_t kHeaderSize = 64;
constexpr uint64_t kSegmentAlignment = 64;
/// Largest tensor a program may plan (1 TiB at the bound): export refuses more, the reader too.
constexpr uint64_t kMaxValueBytes = uint64_t{1} << 40;

/// Little-endian on disk; read with memcpy (the caller's buffer may be unaligned).
struct FileHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t header_size;
  uint64_t program_offset;    ///< FlatBuffer start
  uint64_t program_size;      ///< FlatBuffer bytes
  uint64_t constants_offset;  ///< constant segment start, kSegmentAlignment-aligned
  uint64_t constants_size;
  uint32_t program_crc;    ///< CRC-32C of the program section
  uint32_t constants_crc;  ///< CRC-32C of the constant segment
  uint32_t reserved;       ///< 0
  uint32_t header_crc;     ///< CRC-32C of bytes [0, 60): everything above
};
constexpr size_t kHeaderCrcBytes = 60;
static_assert(sizeof(FileHeader) == kHeaderSize, "header must be 64 bytes");

/// Bytes at the bound of a tensor of `elem`-byte elements whose axes hold at most hi[0..rank):
/// 0 when an axis can only be empty (whatever the others' bounds), else the product; false
/// above kMaxValueBytes. Export plans by this rule (GraphBuilder::bound_bytes), the reader checks by it.
inline bool bytes_at_bound(uint64_t elem, const int64_t* hi, size_t rank, uint64_t* out) {
  for (size_t k = 0; k < rank; ++k)
    if (hi[k] <= 0) {
      *out = 0;
      return true;
    }
  uint64_t n = elem;
  for (size_t k = 0; k < rank; ++k) {
    const uint64_t h = static_cast<uint64_t>(hi[k]);
    if (h > kMaxValueBytes || n > kMaxValueBytes / h) return false;
    n *= h;
  }
  *out = n;
  return true;
}

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace kiln::format
