#pragma once
// kiln inspect / kiln check: read a program's contract without running it.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/program.h"
#include "kiln/status.h"

namespace kiln::tooling {

/// Human-readable report: methods, signatures with dims and ranges, equalities, guards,
/// arena vs lower bound, constants, instructions by op.
/// With `instructions`, also lists every instruction with its outputs' symbolic shapes.
/// "kiln 0.9.0 (.kiln format version 2)": what `TOOL --version` prints.
std::string version_text(const std::string& tool);

std::string inspect_text(const Program& program, const std::string& path, bool instructions = false);
/// The same as JSON (stable keys, for scripts).
nlohmann::json inspect_json(const Program& program, const std::string& path);
/// Whether `shapes` satisfy the method's contract; the Status explains why not. For a bucketed
/// method (kiln export --bucket), the bucket the shapes run ("bucket 'forward@seq=32' runs (seq
/// 20 padded to 32)"); "" for a plain method.
Result<std::string> check_shapes(const Program& program, const std::string& method,
                                 const std::vector<std::vector<int64_t>>& shapes);
/// The number of inputs of `method`, a plain or a bucketed one; 0 when there is none.
size_t num_inputs(const Program& program, const std::string& method);

}  // namespace kiln::tooling
