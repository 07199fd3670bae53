// libFuzzer target: the small text grammars of the command lines: --input_shapes (runner),
// --dim and --input (export).
#include <cstdint>
#include <string>

#include "export/onnx/onnx_import.h"
#include "tooling/runner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  (void)kiln::tooling::parse_shapes(s);
  (void)kiln::exporter::parse_dim_arg(s);
  (void)kiln::exporter::parse_input_arg(s);
  return 0;
}
