// libFuzzer target: Program::load_buffer on arbitrary bytes; when it loads, every method is
// created, bound at admissible shapes drawn from the input's last bytes, and executed. The
// corpus starts from real programs (fuzz/corpus/load). Must never crash, leak or hang.
// The mutated image is sealed with valid checksums first (format::seal_checksums), as a buggy
// writer would leave it: otherwise nearly every mutation stops at the checksum test and the
// structural checks behind it are never reached. (Checksum refusals have their own tests.)
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/file_header.h"
#include "format/program_desc.h"
#include "kiln/method.h"
#include "kiln/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint64_t> aligned(size / 8 + 1);  // load_buffer wants 8-byte alignment
  if (size) std::memcpy(aligned.data(), data, size);
  if (size >= kiln::format::kHeaderSize) kiln::format::seal_checksums(reinterpret_cast<uint8_t*>(aligned.data()), size);
  auto program = kiln::Program::load_buffer(aligned.data(), size);
  if (!program.ok()) return 0;
  size_t pick = size;  // shapes from the input's own bytes: deterministic per input
  for (size_t i = 0; i < (*program)->num_methods(); ++i) {
    auto meta = (*program)->method_meta((*program)->method_name(i));
    auto m = kiln::Method::create(**program, (*program)->method_name(i));
    if (!meta.ok() || !m.ok()) continue;
    for (int round = 0; round < 3; ++round) {
      std::vector<std::vector<int64_t>> shapes = (*m)->bound_shapes();
      for (auto& s : shapes)
        for (int64_t& d : s) {
          const uint8_t b = pick ? data[--pick] : 0;
          d = round == 0 ? d : 1 + static_cast<int64_t>(b) % d;  // the bound, then at or below it
        }
      if (!(*m)->bind_shapes(shapes).ok()) continue;  // a guard or a step refuses it
      (void)(*m)->execute();
    }
  }
  return 0;
}
