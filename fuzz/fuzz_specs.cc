// libFuzzer target: the small text grammars of the command lines: --input_shapes (runner),
// every option of kiln export (its one parser).
#include <cstdint>
#include <string>

#include "export/export_options.h"
#include "tooling/runner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  (void)kiln::tooling::parse_shapes(s);
  (void)kiln::exporter::parse_dim_arg(s);
  (void)kiln::exporter::parse_input_arg(s);
  for (const kiln::exporter::ExportFlagSpec& spec : kiln::exporter::export_flag_specs())
    (void)kiln::exporter::parse_export_flags({{spec.flag, s}, {spec.flag, s}});
  return 0;
}
