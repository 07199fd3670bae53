#pragma once
// The `reduction` attribute ScatterND and ScatterElements share (opset 16/18): how an update
// combines with the element it lands on. Integers wrap (two's complement) as the arithmetic
// kernels do; max and min let NaN win (the non-finite rule).
#include <string_view>
#include <type_traits>

#include "core/attrs.h"

namespace kiln::kernels {

enum class Reduce : uint8_t { kNone, kAdd, kMul, kMax, kMin };

inline bool read_reduction(const core::Attrs& a, Reduce* out) {
  const char* s = a.get_str("reduction", "none");
  const std::string_view r = s ? s : "none";
  if (r == "none") *out = Reduce::kNone;
  else if (r == "add") *out = Reduce::kAdd;
  else if (r == "mul") *out = Reduce::kMul;
  else if (r == "max") *out = Reduce::kMax;
  else if (r == "min") *out = Reduce::kMin;
  else return false;
  return true;
}

template <typename T, bool = std::is_integral_v<T>>
struct Wrapping {
  using type = T;
};
template <typename T>
struct Wrapping<T, true> {
  using type = std::make_unsigned_t<T>;
};

/// *at combined with u under r.
template <typename T>
inline void reduce_into(Reduce r, T* at, T u) {
  using U = typename Wrapping<T>::type;
  switch (r) {
    case Reduce::kNone: *at = u; return;
    case Reduce::kAdd: *at = static_cast<T>(static_cast<U>(*at) + static_cast<U>(u)); return;
    case Reduce::kMul: *at = static_cast<T>(static_cast<U>(*at) * static_cast<U>(u)); return;
    case Reduce::kMax: *at = u > *at || u != u ? u : *at; return;
    case Reduce::kMin: *at = u < *at || u != u ? u : *at; return;
  }
}

}  // namespace kiln::kernels
