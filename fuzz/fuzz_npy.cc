// libFuzzer target: the .npy parser (kiln_runner --inputs) on arbitrary bytes.
#include <cstdint>
#include <string>

#include "tooling/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)kiln::tooling::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  return 0;
}
