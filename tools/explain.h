#pragma once
// kiln check --explain: when shapes are refused, the three ways out as commands with costs.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/program.h"

namespace kiln::tools {

/// Checks `shapes`; when refused, prints host normalization (the runner's flags and what is
/// padded or cut), a bounded dynamic dim and buckets (the kiln export commands), each with
/// its arena and file size from a trial export of `model_path` when given. A bucketed method:
/// the bucket that runs, or (above the largest) the ways out. Exit status: 0 when the shapes
/// are admitted, 1 when refused, 2 when the method cannot be made.
int explain(const Program& program, const std::string& program_path, const std::string& method,
            const std::vector<std::vector<int64_t>>& shapes, const std::string& model_path, std::ostream& out);

}  // namespace kiln::tools
