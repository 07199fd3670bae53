#include <cstring>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kI64: return 8;
    case DType::kI32: return 4;
    case DType::kBool: return 1;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kBool: return "bool";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
  }
  return "unknown";
}

bool dtype_from_name(const char* name, DType* out) {
  struct Entry { const char* name; DType t; };
  static const Entry kNames[] = {{"f32", DType::kF32},  {"float32", DType::kF32}, {"float", DType::kF32},
                                 {"i64", DType::kI64},  {"int64", DType::kI64},   {"i32", DType::kI32},
                                 {"int32", DType::kI32}, {"bool", DType::kBool}, {"i8", DType::kI8},
                                 {"int8", DType::kI8},   {"u8", DType::kU8},      {"uint8", DType::kU8}};
  for (const Entry& e : kNames) {
    if (std::strcmp(e.name, name) == 0) {
      *out = e.t;
      return true;
    }
  }
  return false;
}

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kOutOfRange: return "out of range";
    case Code::kNotFound: return "not found";
    case Code::kDataLoss: return "data loss";
    case Code::kUnimplemented: return "unimplemented";
    case Code::kFailedPrecondition: return "failed precondition";
    case Code::kResourceExhausted: return "resource exhausted";
    case Code::kInternal: return "internal";
    case Code::kIoError: return "i/o error";
  }
  return "unknown";
}

}  // namespace kiln
