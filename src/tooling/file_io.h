#pragma once
// Whole-file reads and writes for the tools, with one-line errors for every failure a user
// can cause: a missing file, a directory, a device, a read error, a full disk. A write that
// fails part-way removes the partial file, so no truncated output is left behind.

#include <cstddef>
#include <string>

#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::tooling {

/// The bytes of the regular file at `path` (at most `max_bytes`).
Result<std::string> read_file(const std::string& path, size_t max_bytes = size_t{1} << 40);

/// Writes [data, data + n) to `path` (created or truncated); on any failure removes it.
Status write_file(const std::string& path, const void* data, size_t n);

/// format::serialize_program, then write_file.
Status write_program_file(const format::ProgramDesc& desc, const std::string& path);

}  // namespace kiln::tooling
