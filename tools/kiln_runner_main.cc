// kiln_runner: run a .kiln program at any shape inside its contract.
#include <CLI/CLI.hpp>

#include <iostream>

#include "tooling/runner.h"

int main(int argc, char** argv) {
  kiln::tooling::RunnerOptions o;
  std::string inputs;
  CLI::App app{"Runs a .kiln program at any shape inside its contract.\n"
               "example: kiln_runner --model_path=examples/cnn.kiln --input_shapes=1x3x17x17 --print_output=summary"};
  app.add_option("--model_path", o.model_path, "program to run")->required();
  app.add_option("--method_name", o.method_name, "method to run")->capture_default_str();
  app.add_option("--inputs", inputs, "comma-separated .npy or raw .bin files, one per input (default: ones)");
  app.add_option("--input_shapes", o.input_shapes, "shapes to run at, e.g. 1x144x200,1x256x98 (default: the bound)");
  app.add_option("--output_file", o.output_file, "write outputs to PREFIX-<i>.bin or .npy");
  app.add_option("--output_format", o.output_format, "bin or npy")->capture_default_str();
  app.add_option("--print_output", o.print_output, "none, summary or all")->capture_default_str();
  app.add_option("--num_executions", o.num_executions, "times to execute")->capture_default_str();
  app.add_option("--cpu_threads", o.cpu_threads, "threads of the method's pool (the delegate and parallel kernels)")->capture_default_str();
  app.add_option("--delegate", o.delegate, "xnnpack (the program's delegate regions) or none (portable kernels)")->capture_default_str();
  app.add_flag("--profile", o.profile, "after the runs, print time per instruction and per op type");
  app.add_option("--profile_json", o.profile_json, "also write the profile as JSON to this file");
  app.add_flag("--server_mode", o.server_mode, "run one inference per stdin line");
  CLI11_PARSE(app, argc, argv);
  if (!inputs.empty()) {
    size_t start = 0;
    while (start <= inputs.size()) {
      size_t comma = inputs.find(',', start);
      if (comma == std::string::npos) comma = inputs.size();
      o.inputs.push_back(inputs.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return kiln::tooling::run_runner(o, std::cin, std::cout, std::cerr);
}
