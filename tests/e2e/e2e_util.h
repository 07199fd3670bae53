#pragma once
// Helpers for end-to-end tests that drive the real kiln / kiln_runner binaries.

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
#include "scratch_dir.h"

namespace kiln::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr interleaved
};

/// Runs a shell command, optionally feeding `stdin_text`.
inline CommandResult run_command(const std::string& cmd, const std::string& stdin_text = "") {
  std::string full = cmd;
  std::string in_path;
  if (!stdin_text.empty()) {
    in_path = ::kiln::testing::scratch_dir() + "/stdin_" + std::to_string(reinterpret_cast<uintptr_t>(&cmd)) + ".txt";
    std::ofstream(in_path) << stdin_text;
    full += " < " + in_path;
  }
  full += " 2>&1";
  CommandResult r;
  FILE* p = popen(full.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string bin(const std::string& tool) { return std::string(KILN_BIN_DIR) + "/" + tool; }

inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

inline void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
}

}  // namespace kiln::testing
