#pragma once
// Opens a .kiln image in memory: header checks, FlatBuffers verifier, then a semantic pass
// (indices, offsets, alignment, sizes within their slots, slots alive together apart) and
// every instruction's shape function run again over the program's own expressions. After
// read_program() succeeds the runtime trusts every index, offset, size and attribute.

#include <cstddef>
#include <cstdint>

#include "core/attrs.h"
#include "kiln/status.h"
#include "format/control.h"
#include "format/schedule.h"
#include "program_generated.h"

namespace kiln::format {

struct ProgramFile {
  const fb::Program* program = nullptr;
  const uint8_t* constants = nullptr;  ///< start of the constant segment (inside the image)
  uint64_t constants_size = 0;
  uint32_t constants_crc = 0;  ///< what the header says the segment's CRC-32C is
  uint32_t format_version = 0;  ///< the header's
};

/// Validates `size` bytes at `data` (which must stay alive) as a .kiln program: the header
/// (magic, version, size, its checksum, segments inside the file and apart), the program
/// section's checksum, every string valid UTF-8, then the semantic checks. The constant
/// segment's checksum is checked when `verify_constants` (else later by verify_constants()).
/// Errors are kDataLoss with a message naming what is wrong and where.
Result<ProgramFile> read_program(const uint8_t* data, size_t size, bool verify_constants = true);

/// Checks the constant segment against its checksum (the lazy half of read_program).
Status verify_constants(const ProgramFile& f);
/// The steps of a method's portable schedule, or (`delegated`) of its delegated one (regions'
/// ops in place of the instructions they cover). The method must have passed the reader.
/// `loops` (optional) receives the schedule's runtime loop spans (schedule.h).
std::vector<Step> schedule_steps(const fb::Method* m, bool delegated, std::vector<LoopSpan>* loops = nullptr);
/// The method's runtime branches (KilnIf/KilnElse blocks, see control.h), checked to nest.
Result<std::vector<Branch>> method_branches(const fb::Method* m);
/// Its values' lifetimes over that schedule (export's planning rule).
Lifetimes method_lifetimes(const fb::Method* m, bool delegated);

/// Every string field of the program is valid UTF-8; the error names the first that is not.
Status check_strings(const fb::Program* p);

/// An instruction attribute as kernels read it; points into the program, which must outlive
/// it. read_program has checked that the field its kind names is present.
core::AttrRef attr_ref(const fb::Attribute* a);

}  // namespace kiln::format
