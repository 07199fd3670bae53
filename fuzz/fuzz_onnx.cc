// libFuzzer target: the ONNX importer (kiln export) on mutated models; then the program is
// serialized and loaded back. The contract declares exactly the dim names the model's inputs
// use (a --dim naming no axis is itself an export error, which would stop every input there):
// the names of the seed corpus get their usual bounds, any other name 1..8.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "export/onnx/onnx_import.h"
#include "format/program_desc.h"
#include "kiln/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::map<std::string, std::string> kBounds = {
      {"batch", "1..4"}, {"seq", "1..32"}, {"time", "1..16"}, {"length", "4..64"}, {"H", "8..64:8"}, {"W", "8..64:8"}};
  kiln::exporter::ExportOptions opts;
  onnx::ModelProto proto;
  if (size <= static_cast<size_t>(INT32_MAX) && proto.ParseFromArray(data, static_cast<int>(size))) {
    std::set<std::string> names;
    for (const auto& in : proto.graph().input())
      for (const auto& d : in.type().tensor_type().shape().dim())
        if (d.has_dim_param()) names.insert(d.dim_param());
    for (const std::string& name : names) {
      auto it = kBounds.find(name);
      auto a = kiln::exporter::parse_dim_arg(name + "=" + (it == kBounds.end() ? "1..8" : it->second));
      if (a.ok()) opts.dims.push_back(*a);  // a name no --dim can spell stays undeclared
    }
  }
  kiln::format::ProgramDesc program;
  auto report = kiln::exporter::export_onnx_bytes(data, size, opts, &program);
  if (!report.ok()) return 0;
  auto bytes = kiln::format::serialize_program(program);
  if (!bytes.ok()) return 0;
  std::vector<uint64_t> aligned(bytes->size() / 8 + 1);
  std::memcpy(aligned.data(), bytes->data(), bytes->size());
  auto loaded = kiln::Program::load_buffer(aligned.data(), bytes->size());
  if (!loaded.ok()) {  // what export writes, load must accept
    std::fprintf(stderr, "fuzz_onnx: export wrote a program that load rejects: %s\n",
                 loaded.status().message().c_str());
    std::abort();
  }
  return 0;
}
