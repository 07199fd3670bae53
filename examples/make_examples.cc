// Writes the bundled example programs: make_examples OUT_DIR
#include <iostream>

#include "tooling/examples.h"
#include "tooling/file_io.h"

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "examples";
  struct Entry { const char* file; kiln::Result<kiln::tooling::ExampleModel> (*make)(); };
  const Entry entries[] = {{"mlp.kiln", &kiln::tooling::make_mlp_example}, {"cnn.kiln", &kiln::tooling::make_cnn_example}};
  for (const Entry& e : entries) {
    auto m = e.make();
    kiln::Status s = m.ok() ? kiln::tooling::write_program_file(m->program, dir + "/" + e.file) : m.status();
    if (!s.ok()) {
      std::cerr << "error: " << e.file << ": " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << dir << "/" << e.file << "\n";
  }
  return 0;
}
