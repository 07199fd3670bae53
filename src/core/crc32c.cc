#include "core/crc32c.h"

#include <cstring>

#if defined(__aarch64__) && defined(__linux__)
#include <arm_acle.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace kiln::core {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

struct Table {
  uint32_t t[8][256];
  Table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};

// Slicing-by-8: eight table lookups per 8 bytes.
uint32_t crc_table(const uint8_t* p, size_t n, uint32_t c) {
  static const Table tab;
  const auto& t = tab.t;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= c;
    c = t[7][v & 0xFF] ^ t[6][(v >> 8) & 0xFF] ^ t[5][(v >> 16) & 0xFF] ^ t[4][(v >> 24) & 0xFF] ^
        t[3][(v >> 32) & 0xFF] ^ t[2][(v >> 40) & 0xFF] ^ t[1][(v >> 48) & 0xFF] ^ t[0][v >> 56];
  }
  for (; n > 0; --n) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = __builtin_ia32_crc32di(c64, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  for (; n > 0; --n) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return c32;
}

bool has_crc_hw() { return __builtin_cpu_supports("sse4.2"); }
#elif defined(__aarch64__) && defined(__linux__)
// ARMv8 CRC32 instructions (optional in ARMv8.0, in every ARMv8.1 core): crc32cx/crc32cb.
__attribute__((target("arch=armv8-a+crc"))) uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t c) {
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __crc32cd(c, v);
  }
  for (; n > 0; --n) c = __crc32cb(c, *p++);
  return c;
}

bool has_crc_hw() { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#else
// Other architectures: the table (the same values).
uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t c) { return crc_table(p, n, c); }
bool has_crc_hw() { return false; }
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  static const bool hw = has_crc_hw();
  const auto* p = static_cast<const uint8_t*>(data);
  const uint32_t c = ~crc;
  return ~(hw ? crc_hw(p, n, c) : crc_table(p, n, c));
}

}  // namespace kiln::core
