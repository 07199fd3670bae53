#pragma once
// Serializes a program description and loads it: the Status a damaged schedule gets at load
// (the file is a trust boundary; the delegate and conv-gate tests damage it on purpose).

#include "aligned_bytes.h"
#include "core/status.h"
#include "format/program_desc.h"

namespace kiln::testing {

inline Status load_status(const format::ProgramDesc& desc) {
  auto bytes = format::serialize_program(desc);
  if (!bytes.ok()) return bytes.status();
  AlignedBytes image(*bytes);
  auto p = image.load();
  return p.ok() ? ok_status() : p.status();
}

}  // namespace kiln::testing
