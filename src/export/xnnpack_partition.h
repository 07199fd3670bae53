#pragma once
// Export side of the XNNPACK delegate: which instructions it takes (support checks in
// delegates/xnnpack/support.h), regions of consecutive supported instructions, channels-last
// twins of activations inside regions with layout changes only at their edges, Relu/Clip
// folded into the op before them, coverage (instructions and FLOPs at the bound), and the
// delegated schedule's own arena plan.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::exporter {

/// Fills `m->delegate` (backend "xnnpack") and appends the channels-last twin values it
/// needs. `constants` is the program's constant segment. The portable schedule is unchanged.
Status partition_xnnpack(format::MethodDesc* m, const std::vector<uint8_t>& constants);

/// Multiply-adds (counted 2) of instruction i at the bound: convolutions and matrix products
/// (float and integer) by their weights' size, every other op one per output element.
double instruction_flops(const format::MethodDesc& m, size_t i);

/// "xnnpack: 61/63 instructions, 99.2% of FLOPs at the bound, 2 regions, 4 layout changes"
std::string coverage_line(const std::string& backend, size_t delegated, size_t total, uint64_t delegated_flops,
                          uint64_t flops, size_t regions, uint32_t layout_changes);
/// Declined instructions grouped by op and reason: "Gather x19: op not supported by XNNPACK".
/// `declined` holds (op, reason) pairs.
std::vector<std::string> group_declined(const std::vector<std::pair<std::string, std::string>>& declined);

}  // namespace kiln::exporter
