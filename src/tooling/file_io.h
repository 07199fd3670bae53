#pragma once
// Whole-file reads and writes for the tools, with one-line errors for every failure a user
// can cause: a missing file, a directory, a device, a read error, a full disk. A write that
// fails part-way removes the partial file, so no truncated output is left behind.

#include <cstddef>
#include <cstdint>
#include <string>

#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::tooling {

/// The bytes of the regular file at `path` (at most `max_bytes`).
Result<std::string> read_file(const std::string& path, size_t max_bytes = size_t{1} << 40);

/// A regular file read in pieces at offsets (a bound-sized raw input is read where the
/// requested shape lies, never whole). Errors as read_file's.
class FileReader {
 public:
  static Result<FileReader> open(const std::string& path);
  FileReader(FileReader&& o) noexcept : fd_(o.fd_), size_(o.size_), path_(std::move(o.path_)) { o.fd_ = -1; }
  FileReader& operator=(FileReader&&) = delete;
  FileReader(const FileReader&) = delete;
  ~FileReader();
  uint64_t size() const { return size_; }
  /// Reads bytes [offset, offset + n) into dst.
  Status read_at(uint64_t offset, void* dst, size_t n) const;

 private:
  FileReader(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

/// Writes [data, data + n) to `path` (created or truncated); on any failure removes it.
Status write_file(const std::string& path, const void* data, size_t n);

/// format::serialize_program, then write_file.
Status write_program_file(const format::ProgramDesc& desc, const std::string& path);

}  // namespace kiln::tooling
