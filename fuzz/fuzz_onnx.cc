// libFuzzer target: the ONNX importer (kiln export) on mutated models, with a contract that
// names the dims the zoo models use; then the program is serialized and loaded back.
#include <cstdint>
#include <cstring>
#include <vector>

#include "export/onnx/onnx_import.h"
#include "format/program_desc.h"
#include "kiln/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::exporter::ExportOptions opts;
  for (const char* d : {"batch=1..4", "seq=1..32", "time=1..16", "length=4..64", "H=8..64:8", "W=8..64:8"}) {
    auto a = kiln::exporter::parse_dim_arg(d);
    if (a.ok()) opts.dims.push_back(*a);
  }
  kiln::format::ProgramDesc program;
  auto report = kiln::exporter::export_onnx_bytes(data, size, opts, &program);
  if (!report.ok()) return 0;
  auto bytes = kiln::format::serialize_program(program);
  if (!bytes.ok()) return 0;
  std::vector<uint64_t> aligned(bytes->size() / 8 + 1);
  std::memcpy(aligned.data(), bytes->data(), bytes->size());
  auto loaded = kiln::Program::load_buffer(aligned.data(), bytes->size());
  if (!loaded.ok()) std::abort();  // what export writes, load must accept
  return 0;
}
