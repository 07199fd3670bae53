#pragma once
// Byte counts for people: "601.2 GiB", "376 KiB", "12 bytes". Powers of 1024 with the IEC
// names, so a printed size and a --max-arena=64GiB limit compare at a glance.

#include <cstdint>
#include <cstdio>
#include <string>

namespace kiln::core {

/// `n` bytes in the largest unit (KiB, MiB, GiB, TiB) that keeps the number at least 1, with
/// one decimal below 100 of that unit ("601.2 GiB", "1.5 MiB", "512 KiB"); under 1 KiB in bytes.
inline std::string human_bytes(uint64_t n) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) return std::to_string(n) + (n == 1 ? " byte" : " bytes");
  double v = static_cast<double>(n) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 5) v /= 1024.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof(buf), v < 100 && v != static_cast<double>(static_cast<uint64_t>(v)) ? "%.1f %s" : "%.0f %s", v,
                kUnits[u]);
  return buf;
}

}  // namespace kiln::core
