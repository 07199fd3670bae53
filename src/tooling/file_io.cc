#include "tooling/file_io.h"
#include "core/status.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::tooling {

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  KILN_ASSIGN_OR_RETURN(FileReader f, FileReader::open(path));
  if (f.size() > max_bytes)
    return invalid_argument("'" + path + "' has " + std::to_string(f.size()) + " bytes, more than the " +
                            std::to_string(max_bytes) + " allowed here");
  std::string bytes(static_cast<size_t>(f.size()), '\0');
  KILN_TRY(f.read_at(0, bytes.data(), bytes.size()));
  return bytes;
}

Result<FileReader> FileReader::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return io_error("cannot stat '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("cannot read '" + path + "': " + (S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file"));
  }
  return FileReader(fd, static_cast<uint64_t>(st.st_size), path);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileReader::read_at(uint64_t offset, void* dst, size_t n) const {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(dst) + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return io_error("cannot read '" + path_ + "': " + (r < 0 ? std::strerror(errno) : "the file shrank while being read"));
    got += static_cast<size_t>(r);
  }
  return ok_status();
}

Status write_file(const std::string& path, const void* data, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return io_error("cannot open '" + path + "' for writing: " + std::strerror(errno));
  const size_t wrote = n ? std::fwrite(data, 1, n, f) : 0;
  const int e = wrote != n ? errno : 0;
  const bool flushed = std::fflush(f) == 0;
  const int fe = flushed ? 0 : errno;
  const bool closed = std::fclose(f) == 0;
  if (wrote != n || !flushed || !closed) {
    std::remove(path.c_str());
    const int err = e ? e : fe ? fe : errno;
    return io_error("cannot write '" + path + "' (" + std::to_string(wrote) + " of " + std::to_string(n) +
                    " bytes written): " + std::strerror(err) + "; the partial file was removed");
  }
  return ok_status();
}

Status write_program_file(const format::ProgramDesc& desc, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, format::serialize_program(desc));
  return write_file(path, bytes.data(), bytes.size());
}

}  // namespace kiln::tooling
