// kiln: inspect and check .kiln programs.
#include <CLI/CLI.hpp>

#include <iostream>

#include "kiln/program.h"
#include "tooling/inspect.h"
#include "tooling/runner.h"

int main(int argc, char** argv) {
  CLI::App app{"Kiln: shape-contract-aware programs for devices.\n"
               "examples:\n  kiln inspect examples/cnn.kiln --json\n"
               "  kiln check examples/cnn.kiln --input_shapes=1x3x17x17"};
  app.require_subcommand(1);

  std::string path, shapes, method = "forward";
  bool json = false;
  CLI::App* inspect = app.add_subcommand("inspect", "show methods, signatures, dims, guards, memory and ops");
  inspect->add_option("file", path, "program")->required();
  inspect->add_flag("--json", json, "machine-readable output");
  CLI::App* check = app.add_subcommand("check", "do these input shapes satisfy the contract? (exit 0 yes, 1 no)");
  check->add_option("file", path, "program")->required();
  check->add_option("--input_shapes", shapes, "e.g. 1x3x256x256,1x4")->required();
  check->add_option("--method_name", method, "method")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto program = kiln::Program::load(path);
  if (!program.ok()) {
    std::cerr << "error: " << program.status().message() << "\n";
    return 1;
  }
  if (inspect->parsed()) {
    if (json) std::cout << kiln::tooling::inspect_json(**program, path).dump(2) << "\n";
    else std::cout << kiln::tooling::inspect_text(**program, path);
    return 0;
  }
  auto parsed = kiln::tooling::parse_shapes(shapes);
  if (!parsed.ok()) {
    std::cerr << "error: " << parsed.status().message() << "\n";
    return 1;
  }
  kiln::Status s = kiln::tooling::check_shapes(**program, method, *parsed);
  if (!s.ok()) {
    std::cout << "no: " << s.message() << "\n";
    return 1;
  }
  std::cout << "ok: " << shapes << " satisfies the contract of method '" << method << "'\n";
  return 0;
}
