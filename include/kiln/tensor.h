#pragma once
// Element types and non-owning tensor views shared by the runtime, the kernels and export.

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln {

/// Element type of a tensor. Values match the .kiln format's DType enum. kI8 and kU8 hold
/// quantized values (their scale and zero point are constants beside them, ONNX's QDQ form).
enum class DType : uint8_t { kF32 = 0, kI64 = 1, kI32 = 2, kBool = 3, kI8 = 4, kU8 = 5 };

/// Bytes per element (bool is one byte).
size_t dtype_size(DType t);
/// Lower-case name as written in messages and `inspect` ("f32").
const char* dtype_name(DType t);
/// Parses "f32" / "float32" / "i64" / "int64" / "i32" / "int32" / "bool" / "i8" / "int8" /
/// "u8" / "uint8"; false if unknown.
bool dtype_from_name(const char* name, DType* out);

/// The DType of a C++ element type: dtype_of<float>() == DType::kF32 (bool is one byte).
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  else if constexpr (std::is_same_v<T, int8_t>) return DType::kI8;
  else if constexpr (std::is_same_v<T, uint8_t>) return DType::kU8;
  else {
    static_assert(std::is_same_v<T, bool>, "Kiln tensors hold float, int64_t, int32_t, int8_t, uint8_t or bool");
    return DType::kBool;
  }
}

/// Largest rank a tensor may have.
constexpr int kMaxRank = 8;

/// A view of tensor memory owned by someone else (arena, constant segment or the caller).
/// `dims` hold the actual shape after `bind`, which may be below the program's bound.
struct TensorView {
  DType dtype = DType::kF32;
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};
  void* data = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  template <typename T> T* as() { return static_cast<T*>(data); }
  template <typename T> const T* as() const { return static_cast<const T*>(data); }
};

}  // namespace kiln
