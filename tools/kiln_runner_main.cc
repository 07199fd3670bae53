// kiln_runner: run a .kiln program at any shape inside its contract.
#include <CLI/CLI.hpp>

#include <iostream>

#include "tooling/inspect.h"
#include "tooling/runner.h"

namespace {

int runner_main(int argc, char** argv) {
  kiln::tooling::RunnerOptions o;
  std::string inputs;
  CLI::App app{"Runs a .kiln program at any shape inside its contract.\n"
               "example: kiln_runner --model_path=examples/cnn.kiln --input_shapes=1x3x17x17 --print_output=summary"};
  app.set_version_flag("--version", kiln::tooling::version_text("kiln_runner"));
  app.add_option("--model_path", o.model_path, "program to run")->required();
  app.add_option("--method_name", o.method_name, "method to run")->capture_default_str();
  app.add_option("--inputs", inputs, "comma-separated .npy or raw .bin files, one per input (default: ones)");
  app.add_option("--input_shapes", o.input_shapes, "shapes to run at, e.g. 1x144x200,1x256x98 or 1,144,200;1,256,98 (default: the bound)");
  app.add_option("--output_file", o.output_file, "write outputs to PREFIX-<i>.bin or .npy");
  app.add_option("--output_format", o.output_format, "bin or npy")->capture_default_str();
  app.add_option("--print_output", o.print_output, "none, summary or all")->capture_default_str();
  app.add_option("--num_executions", o.num_executions, "times to execute")->capture_default_str();
  app.add_option("--cpu_threads", o.cpu_threads, "threads of the method's pool (the delegate and parallel kernels)")->capture_default_str();
  app.add_option("--delegate", o.delegate, "xnnpack (the program's delegate regions) or none (portable kernels)")->capture_default_str();
  app.add_flag_function("--no_finite_check", [&o](int64_t) { o.check_finite_inputs = false; },
               "delegated: skip execute's NaN/Inf check of the float inputs (XNNPACK may then turn a NaN into a number)");
  app.add_flag("--profile", o.profile, "after the runs, print time per instruction and per op type");
  app.add_option("--profile_json", o.profile_json, "also write the profile as JSON to this file");
  app.add_flag("--server_mode", o.server_mode, "run one inference per stdin line");
  app.add_option("--image", o.image, "feed input 0 from a PNG, JPEG or BMP image, fitted to its size");
  app.add_option("--preprocess", o.preprocess, "how --image fits: resize, crop (center) or letterbox (aspect kept)")
      ->capture_default_str();
  app.add_option("--mean", o.mean, "--image normalization: (pixel/255 - mean) / std, one value or one per channel")
      ->capture_default_str();
  app.add_option("--std", o.std, "see --mean")->capture_default_str();
  app.add_option("--pad", o.pad, "letterbox fill value (0..255)")->capture_default_str();
  app.add_option("--max_shapes", o.max_shapes, "tightened bounds: the largest input shapes to admit; the arena is "
                                                "allocated for them (default: the program's bound)");
  CLI11_PARSE(app, argc, argv);
  // `--input_shapes= --inputs=a.npy` (an empty value) must not take the next flag as a value.
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{"--model_path", &o.model_path},
                                    {"--inputs", &inputs}, {"--input_shapes", &o.input_shapes},
                                    {"--output_file", &o.output_file}, {"--profile_json", &o.profile_json}})
    if (value->rfind("--", 0) == 0) {
      std::cerr << "error: " << flag << " needs a value, got '" << *value << "' (another flag?); write " << flag << "=VALUE\n";
      return 1;
    }
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

}  // namespace

// No exception leaves a tool: whatever escapes is reported in one line, exit status 1.
int main(int argc, char** argv) {
  try {
    return runner_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: unexpected exception: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "error: unexpected exception\n";
  }
  return 1;
}
