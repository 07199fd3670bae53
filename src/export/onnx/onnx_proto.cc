#include "export/onnx/onnx_proto.h"
#include "core/status.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace kiln::exporter {

bool onnx_dtype(int32_t elem_type, DType* out) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::FLOAT16: *out = DType::kF32; return true;
    case onnx::TensorProto::INT64: *out = DType::kI64; return true;
    case onnx::TensorProto::INT32: *out = DType::kI32; return true;
    case onnx::TensorProto::BOOL: *out = DType::kBool; return true;
    case onnx::TensorProto::INT8: *out = DType::kI8; return true;
    case onnx::TensorProto::UINT8: *out = DType::kU8; return true;
    default: return false;
  }
}

namespace {

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) mant <<= 1, --exp;
      bits = sign | exp << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp - 15 + 127) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Tensor `t`'s `n` values from its raw bytes (ONNX's little-endian layout), as h's dtype.
Status read_raw_values(const onnx::TensorProto& t, const std::string& where, int64_t n, HostTensor* h) {
  const std::string& raw = t.raw_data();
  size_t elem = 1;
  switch (t.data_type()) {
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::INT64: elem = 8; break;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32: elem = 4; break;
    case onnx::TensorProto::FLOAT16: elem = 2; break;
    default: break;
  }
  if (raw.size() != static_cast<size_t>(n) * elem)
    return data_loss(where + " holds " + std::to_string(raw.size()) + " raw bytes but its shape needs " +
                     std::to_string(static_cast<size_t>(n) * elem));
  float* f = reinterpret_cast<float*>(h->bytes.data());
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8: std::memcpy(h->bytes.data(), raw.data(), raw.size()); break;
    case onnx::TensorProto::DOUBLE:
      for (int64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, raw.data() + i * 8, 8);
        f[i] = static_cast<float>(d);
      }
      break;
    case onnx::TensorProto::FLOAT16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, raw.data() + i * 2, 2);
        f[i] = half_to_float(v);
      }
      break;
    case onnx::TensorProto::BOOL:
      for (int64_t i = 0; i < n; ++i) h->bytes[i] = raw[i] ? 1 : 0;
      break;
  }
  return ok_status();
}

// Tensor `t`'s `n` values from its typed fields (float_data, int32_data, ...), as h's dtype.
Status read_typed_values(const onnx::TensorProto& t, const std::string& where, int64_t n, HostTensor* h) {
  auto need = [&](int size) -> Status {
    if (size != n) return data_loss(where + " holds " + std::to_string(size) + " values but its shape needs " + std::to_string(n));
    return ok_status();
  };
  float* f = reinterpret_cast<float*>(h->bytes.data());
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      KILN_TRY(need(t.float_data_size()));
      for (int64_t i = 0; i < n; ++i) f[i] = t.float_data(static_cast<int>(i));
      break;
    case onnx::TensorProto::DOUBLE:
      KILN_TRY(need(t.double_data_size()));
      for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(t.double_data(static_cast<int>(i)));
      break;
    case onnx::TensorProto::FLOAT16:
      KILN_TRY(need(t.int32_data_size()));
      for (int64_t i = 0; i < n; ++i) f[i] = half_to_float(static_cast<uint16_t>(t.int32_data(static_cast<int>(i))));
      break;
    case onnx::TensorProto::INT64:
      KILN_TRY(need(t.int64_data_size()));
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<int64_t*>(h->bytes.data())[i] = t.int64_data(static_cast<int>(i));
      break;
    case onnx::TensorProto::INT32:
      KILN_TRY(need(t.int32_data_size()));
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<int32_t*>(h->bytes.data())[i] = t.int32_data(static_cast<int>(i));
      break;
    case onnx::TensorProto::BOOL:
      KILN_TRY(need(t.int32_data_size()));
      for (int64_t i = 0; i < n; ++i) h->bytes[i] = t.int32_data(static_cast<int>(i)) ? 1 : 0;
      break;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:  // int32_data holds one value per element
      KILN_TRY(need(t.int32_data_size()));
      for (int64_t i = 0; i < n; ++i) h->bytes[i] = static_cast<uint8_t>(t.int32_data(static_cast<int>(i)));
      break;
  }
  return ok_status();
}

}  // namespace

Result<HostTensor> tensor_from_proto(const onnx::TensorProto& t, const std::string& where) {
  HostTensor h;
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return unimplemented(where + " keeps its data in an external file; re-save the model with the data embedded");
  if (!onnx_dtype(t.data_type(), &h.dtype))
    return unimplemented(where + " has element type " + onnx::TensorProto::DataType_Name(
                                                          static_cast<onnx::TensorProto::DataType>(t.data_type())) +
                         "; Kiln supports float, double/float16 (as float), int64, int32, int8, uint8 and bool");
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : t.dims()) {
    if (d < 0) return invalid_argument(where + " has a negative dim");
    h.shape.push_back(d);
    overflow = __builtin_mul_overflow(n, d, &n) || overflow;
  }
  // Embedded data takes at least a byte per element and a model is under 2 GiB, so a larger
  // shape cannot match its data: say so before allocating for it.
  if (overflow || n > std::numeric_limits<int>::max())
    return data_loss(where + " has " + (overflow ? "more than 2^63" : std::to_string(n)) +
                     " elements, more than a model can hold");
  // Every element takes at least one raw byte or one typed value: a shape larger than the data
  // is refused before allocating for it (fuzz_onnx: a 2^31-element claim allocated 16 GB).
  const int64_t have = static_cast<int64_t>(t.raw_data().size()) + t.float_data_size() + t.int32_data_size() +
                       t.int64_data_size() + t.double_data_size() + t.uint64_data_size();
  if (n > have)
    return data_loss(where + " holds " + std::to_string(have) + " values or bytes but its shape needs " +
                     std::to_string(n) + " elements");
  h.bytes.resize(static_cast<size_t>(n) * dtype_size(h.dtype));
  KILN_TRY(t.raw_data().empty() ? read_typed_values(t, where, n, &h) : read_raw_values(t, where, n, &h));
  return h;
}

Result<core::AttrStore> attrs_from_node(const onnx::NodeProto& node) {
  core::AttrStore a;
  for (const onnx::AttributeProto& at : node.attribute()) {
    switch (at.type()) {
      case onnx::AttributeProto::INT: a.set_int(at.name(), at.i()); break;
      case onnx::AttributeProto::FLOAT: a.set_float(at.name(), at.f()); break;
      case onnx::AttributeProto::INTS: a.set_ints(at.name(), {at.ints().begin(), at.ints().end()}); break;
      case onnx::AttributeProto::FLOATS: a.set_floats(at.name(), {at.floats().begin(), at.floats().end()}); break;
      case onnx::AttributeProto::STRING: a.set_str(at.name(), at.s()); break;
      case onnx::AttributeProto::STRINGS: {
        std::string joined;
        for (const std::string& s : at.strings()) joined += (joined.empty() ? "" : ",") + s;
        a.set_str(at.name(), joined);
        break;
      }
      case onnx::AttributeProto::TENSOR: {
        KILN_ASSIGN_OR_RETURN(HostTensor t, tensor_from_proto(at.t(), "attribute '" + at.name() + "' of node '" + node.name() + "'"));
        size_t n = t.bytes.size() / dtype_size(t.dtype);
        if (t.dtype == DType::kF32) {
          const float* p = reinterpret_cast<const float*>(t.bytes.data());
          a.set_floats(at.name(), std::vector<float>(p, p + n));
        } else {
          std::vector<int64_t> v(n);
          for (size_t k = 0; k < n; ++k) {
            if (t.dtype == DType::kI64) v[k] = reinterpret_cast<const int64_t*>(t.bytes.data())[k];
            else if (t.dtype == DType::kI32) v[k] = reinterpret_cast<const int32_t*>(t.bytes.data())[k];
            else v[k] = t.bytes[k];
          }
          a.set_ints(at.name(), v);
        }
        a.set_int(at.name() + "_dtype", at.t().data_type());
        break;
      }
      case onnx::AttributeProto::GRAPH: break;
      default:
        return unimplemented("node '" + node.name() + "' (" + node.op_type() + "): attribute '" + at.name() +
                             "' has a type Kiln does not read");
    }
  }
  return a;
}

void count_uses(const onnx::GraphProto& g, std::map<std::string, int>* uses) {
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& in : n.input()) ++(*uses)[in];
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.type() == onnx::AttributeProto::GRAPH) count_uses(a.g(), uses);  // outer-scope reads
  }
  for (const onnx::ValueInfoProto& o : g.output()) ++(*uses)[o.name()];
}

Status read_model_file(const std::string& model_path, onnx::ModelProto* model) {
  std::error_code ec;
  const auto status = std::filesystem::status(model_path, ec);
  if (ec || !std::filesystem::exists(status)) return io_error("cannot open model '" + model_path + "': no such file");
  if (std::filesystem::is_directory(status)) return io_error("cannot read model '" + model_path + "': it is a directory");
  if (!std::filesystem::is_regular_file(status)) return io_error("cannot read model '" + model_path + "': not a regular file");
  if (std::filesystem::file_size(model_path, ec) == 0) return data_loss("'" + model_path + "' is empty, not an ONNX model");
  std::ifstream f(model_path, std::ios::binary);
  if (!f) return io_error("cannot open model '" + model_path + "'");
  if (!model->ParseFromIstream(&f)) return data_loss("'" + model_path + "' is not a readable ONNX model");
  return ok_status();
}

}  // namespace kiln::exporter
