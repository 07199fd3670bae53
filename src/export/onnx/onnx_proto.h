#pragma once
// Conversions from ONNX protobuf messages to Kiln's types (importer internals).

#include <map>
#include <string>
#include <vector>

#include "core/attr_store.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln::exporter {

/// A tensor's dtype, shape and row-major bytes in a Kiln dtype.
struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// ONNX TensorProto element type -> Kiln dtype (f64 and f16 convert to f32); false if none.
bool onnx_dtype(int32_t elem_type, DType* out);
/// Reads raw_data or the typed fields; external data and unsupported types are errors.
Result<HostTensor> tensor_from_proto(const onnx::TensorProto& t, const std::string& where);
/// Converts a node's attributes; GRAPH attributes are skipped (the importer handles If),
/// STRINGS are joined with ','; a TENSOR attribute becomes a kFloats/kInts list of its
/// values plus "<name>_dtype" (ONNX code).
Result<core::AttrStore> attrs_from_node(const onnx::NodeProto& node);
/// How many times each value is read: node inputs (subgraphs' outer-scope reads included)
/// and graph outputs.
void count_uses(const onnx::GraphProto& g, std::map<std::string, int>* uses);
/// Parses the ONNX model at `path`; errors name a missing, empty, unreadable or non-ONNX file.
Status read_model_file(const std::string& path, onnx::ModelProto* model);

}  // namespace kiln::exporter
