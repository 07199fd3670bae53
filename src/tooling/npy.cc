#include "tooling/npy.h"

#include "tooling/file_io.h"
#include "core/status.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln::tooling {

namespace {

const char* descr_of(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
    case DType::kBool: return "|b1";
    case DType::kI8: return "|i1";
    case DType::kU8: return "|u1";
  }
  return "";
}

// Value of key 'k' in the header dict, as raw text up to the next top-level comma.
bool header_field(const std::string& h, const std::string& key, std::string* out) {
  size_t p = h.find("'" + key + "'");
  if (p == std::string::npos) return false;
  p = h.find(':', p);
  if (p == std::string::npos) return false;
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (e < h.size() && h[e] == '(') {
    e = h.find(')', e);
    if (e == std::string::npos) return false;
    ++e;
  } else {
    while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  }
  *out = h.substr(p, e - p);
  return true;
}

}  // namespace

Result<NpyArray> read_npy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  return parse_npy(bytes, path);
}

Result<NpyArray> parse_npy(const std::string& bytes, const std::string& path) {
  auto bad = [&](const std::string& why) { return invalid_argument("'" + path + "' is not a usable .npy file: " + why); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return bad("missing the \\x93NUMPY magic");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len, start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated header");
    uint32_t n;
    std::memcpy(&n, bytes.data() + 8, 4);
    header_len = n;
    start = 12;
  } else {
    return bad("unknown format version " + std::to_string(major));
  }
  if (bytes.size() < start + header_len) return bad("truncated header");
  std::string h = bytes.substr(start, header_len);
  std::string descr, order, shape;
  if (!header_field(h, "descr", &descr) || !header_field(h, "fortran_order", &order) || !header_field(h, "shape", &shape))
    return bad("header lacks descr, fortran_order or shape");
  if (order.find("True") != std::string::npos) return bad("Fortran order is not supported; save with np.ascontiguousarray");
  NpyArray a;
  if (descr.find("<f4") != std::string::npos) a.dtype = DType::kF32;
  else if (descr.find("<i8") != std::string::npos) a.dtype = DType::kI64;
  else if (descr.find("<i4") != std::string::npos) a.dtype = DType::kI32;
  else if (descr.find("|b1") != std::string::npos) a.dtype = DType::kBool;
  else if (descr.find("|i1") != std::string::npos) a.dtype = DType::kI8;
  else if (descr.find("|u1") != std::string::npos) a.dtype = DType::kU8;
  else return bad("dtype " + descr + " is not one of float32, int64, int32, int8, uint8, bool (little-endian)");
  // A tuple of non-negative integers: "(1, 3, 224, 224)", "(5,)" or "()".
  auto bad_shape = [&]() { return bad("shape " + shape + " is not a tuple of non-negative integers"); };
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') return bad_shape();
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  std::string tok;
  bool closed = false;  // a blank item may only end the tuple, as in "(5, )"
  while (std::getline(ss, tok, ',')) {
    size_t b = tok.find_first_not_of(' '), e = tok.find_last_not_of(' ');
    if (closed) return bad_shape();
    if (b == std::string::npos) {
      if (a.shape.empty()) return bad_shape();
      closed = true;
      continue;
    }
    std::string d = tok.substr(b, e - b + 1);
    if (d.size() > 15 || d.find_first_not_of("0123456789") != std::string::npos) return bad_shape();
    a.shape.push_back(std::stoll(d));
  }
  size_t data_start = start + header_len;
  const size_t have = bytes.size() - data_start;
  size_t need = dtype_size(a.dtype);
  bool overflow = false;
  for (int64_t d : a.shape) overflow = __builtin_mul_overflow(need, static_cast<size_t>(d), &need) || overflow;
  if (overflow || have < need)
    return bad("holds " + std::to_string(have) + " data bytes but its shape needs " +
               (overflow ? "more than 2^64" : std::to_string(need)));
  a.data.assign(bytes.begin() + static_cast<long>(data_start), bytes.begin() + static_cast<long>(data_start + need));
  return a;
}

Status write_npy(const std::string& path, DType dtype, const std::vector<int64_t>& shape, const void* data) {
  std::string s = "(";
  for (size_t k = 0; k < shape.size(); ++k) s += std::to_string(shape[k]) + (shape.size() == 1 || k + 1 < shape.size() ? "," : "");
  s += ")";
  std::string h = "{'descr': '" + std::string(descr_of(dtype)) + "', 'fortran_order': False, 'shape': " + s + ", }";
  size_t total = 10 + h.size() + 1;
  h += std::string((64 - total % 64) % 64, ' ') + "\n";
  const uint16_t len = static_cast<uint16_t>(h.size());
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(len & 0xff);
  bytes += static_cast<char>(len >> 8);
  bytes += h;
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  bytes.append(static_cast<const char*>(data), static_cast<size_t>(numel) * dtype_size(dtype));
  return write_file(path, bytes.data(), bytes.size());
}

}  // namespace kiln::tooling
