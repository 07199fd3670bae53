#pragma once
// UTF-8 validity (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). Every
// string a .kiln file holds must pass: the writer refuses others and so does the reader.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::core {

/// True when `s` is valid UTF-8. `*bad` (if given) gets the offset of the first invalid byte.
inline bool valid_utf8(std::string_view s, size_t* bad = nullptr) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const uint8_t c = p[i];
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      if (bad) *bad = i;
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace kiln::core
