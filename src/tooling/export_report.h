#pragma once
// kiln export's summary: what `kiln export` prints after "exported ..." and what Python's
// kiln.export_onnx returns, from the report the export pipeline fills (export/pipeline.h).

#include <string>

#include "export/pipeline.h"

namespace kiln::tooling {

/// The report as indented lines: opset and node counts, runtime branches and loops, fusions,
/// the contract (inputs, dims, narrowed dims, outputs, guards), memory, ops, notes, warnings,
/// and the delegate's coverage with what it declined.
std::string format_report(const exporter::ExportReport& r);

}  // namespace kiln::tooling
