// libFuzzer target: kiln_runner's server mode reading arbitrary request lines against a small
// program (the MLP example, written once). Every line must get one reply; nothing may crash.
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <sstream>
#include <string>

#include "format/program_desc.h"
#include "tooling/examples.h"
#include "tooling/file_io.h"
#include "tooling/runner.h"

namespace {
std::string model_path() {
  static const std::string path = [] {
    const std::string p = "/tmp/kiln_fuzz_server_mlp.kiln";
    auto m = kiln::tooling::make_mlp_example();
    if (!m.ok() || !kiln::tooling::write_program_file(m->program, p).ok()) std::abort();
    return p;
  }();
  return path;
}

// Where requests' output files go: made once per process.
const std::string& scratch_dir() {
  static const std::string dir = [] {
    const std::string d = "/tmp/kiln_fuzz_server_out";
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) std::abort();
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::tooling::RunnerOptions o;
  o.model_path = model_path();
  o.server_mode = true;
  o.print_output = "none";
  std::string text(reinterpret_cast<const char*>(data), size);
  // Output files a request may name go into one scratch directory, which scripts/fuzz.sh removes
  // after the run (a name with a '/' after the prefix names a directory that does not exist).
  for (size_t at = text.find("--output_file="); at != std::string::npos; at = text.find("--output_file=", at + 1))
    text.replace(at, 14, "--output_file=" + scratch_dir() + "/out_");
  std::istringstream in(text);
  std::ostringstream out, err;
  (void)kiln::tooling::run_runner(o, in, out, err);
  return 0;
}
