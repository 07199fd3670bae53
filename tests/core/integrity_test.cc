// CRC-32C (the .kiln checksums) against its check value and across lengths and alignments,
// and UTF-8 validation (every string a .kiln file holds).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "core/utf8.h"

namespace kiln {
namespace {

// The bitwise definition, one byte at a time: the reference for both fast paths.
uint32_t crc_reference(const uint8_t* p, size_t n) {
  uint32_t c = ~0u;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

TEST(Crc32c, CheckValueAndEveryLengthAndOffset) {
  EXPECT_EQ(core::crc32c("123456789", 9), 0xE3069283u);  // the standard check value of CRC-32C
  EXPECT_EQ(core::crc32c("", 0), 0u);
  std::mt19937 rng(3);
  std::vector<uint8_t> data(300);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < 9; ++off)
    for (size_t n = 0; n + off <= data.size(); n += 7) ASSERT_EQ(core::crc32c(data.data() + off, n), crc_reference(data.data() + off, n));
  // Continuing from a previous value equals one pass over the concatenation.
  EXPECT_EQ(core::crc32c(data.data() + 100, 200, core::crc32c(data.data(), 100)), core::crc32c(data.data(), 300));
}

TEST(Utf8, AcceptsValidAndNamesTheFirstBadByte) {
  EXPECT_TRUE(core::valid_utf8("pixels"));
  EXPECT_TRUE(core::valid_utf8("h\xC3\xB6he \xE2\x82\xAC \xF0\x9F\x98\x80"));  // ö, €, an emoji
  size_t at = 99;
  EXPECT_FALSE(core::valid_utf8("in\xFFput", &at));
  EXPECT_EQ(at, 2u);
  EXPECT_FALSE(core::valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(core::valid_utf8("\xED\xA0\x80"));      // a UTF-16 surrogate
  EXPECT_FALSE(core::valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(core::valid_utf8("ab\xE2\x82"));        // cut short at the end
  EXPECT_FALSE(core::valid_utf8("\x80"));              // a lone continuation byte
}

}  // namespace
}  // namespace kiln
