#pragma once
// Operator attributes as seen by shape functions (export) and kernels (runtime). Both sides
// build an array of AttrRef over storage they own; lookups never allocate.

#include <cstdint>
#include <cstring>

namespace kiln::core {

enum class AttrKind : uint8_t { kInt = 0, kFloat = 1, kInts = 2, kFloats = 3, kString = 4 };

/// One attribute; pointers refer to storage owned by the builder or the loaded program.
struct AttrRef {
  const char* name = "";
  AttrKind kind = AttrKind::kInt;
  int64_t i = 0;
  float f = 0.f;
  const int64_t* ints = nullptr;
  const float* floats = nullptr;
  uint32_t count = 0;  ///< elements in ints/floats, bytes in str
  const char* str = nullptr;
};

/// Read-only list of attributes with typed lookups and defaults.
class Attrs {
 public:
  Attrs() = default;
  Attrs(const AttrRef* items, uint32_t n) : items_(items), n_(n) {}

  const AttrRef* find(const char* name) const {
    for (uint32_t k = 0; k < n_; ++k)
      if (std::strcmp(items_[k].name, name) == 0) return &items_[k];
    return nullptr;
  }
  bool has(const char* name) const { return find(name) != nullptr; }
  int64_t get_int(const char* name, int64_t def) const {
    const AttrRef* a = find(name);
    return a && a->kind == AttrKind::kInt ? a->i : def;
  }
  float get_float(const char* name, float def) const {
    const AttrRef* a = find(name);
    if (!a) return def;
    if (a->kind == AttrKind::kFloat) return a->f;
    if (a->kind == AttrKind::kInt) return static_cast<float>(a->i);
    return def;
  }
  /// Number of ints (0 when absent); data via ints().
  uint32_t ints_size(const char* name) const {
    const AttrRef* a = find(name);
    return a && a->kind == AttrKind::kInts ? a->count : 0;
  }
  const int64_t* ints(const char* name) const {
    const AttrRef* a = find(name);
    return a && a->kind == AttrKind::kInts ? a->ints : nullptr;
  }
  uint32_t floats_size(const char* name) const {
    const AttrRef* a = find(name);
    return a && a->kind == AttrKind::kFloats ? a->count : 0;
  }
  const float* floats(const char* name) const {
    const AttrRef* a = find(name);
    return a && a->kind == AttrKind::kFloats ? a->floats : nullptr;
  }
  /// String attribute compared without allocating; false when absent.
  bool str_equals(const char* name, const char* value) const {
    const AttrRef* a = find(name);
    return a && a->kind == AttrKind::kString && std::strcmp(a->str, value) == 0;
  }
  const char* get_str(const char* name, const char* def) const {
    const AttrRef* a = find(name);
    return a && a->kind == AttrKind::kString ? a->str : def;
  }
  uint32_t size() const { return n_; }
  const AttrRef& at(uint32_t k) const { return items_[k]; }

 private:
  const AttrRef* items_ = nullptr;
  uint32_t n_ = 0;
};

}  // namespace kiln::core
