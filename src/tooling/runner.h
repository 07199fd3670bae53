#pragma once
// The library behind kiln_runner: prepare inputs at the bound, resize them to the requested
// shapes (one helper for the normal and the server path), execute, report.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::tooling {

/// "1x3x224x224,1x4", "1,3,224,224;1,4" and "[1,3,224,224],[1,4]" -> {{1,3,224,224},{1,4}};
/// "scalar" stands for a rank-0 shape. Digits and commas alone ("1,3,224,224") are one shape
/// when `num_inputs` is 1, else one rank-1 shape per input.
Result<std::vector<std::vector<int64_t>>> parse_shapes(const std::string& text, size_t num_inputs = 0);
/// {1,3,224,224} -> "1x3x224x224"
std::string shape_string(const std::vector<int64_t>& shape);

struct RunnerOptions {
  std::string model_path;
  std::string method_name = "forward";
  std::vector<std::string> inputs;  ///< .npy or raw .bin per input (missing: ones)
  std::string input_shapes;         ///< empty: each input at its bound (or its .npy shape)
  std::string output_file;          ///< prefix: writes PREFIX-<i>.bin / .npy
  std::string output_format = "bin";
  std::string print_output = "summary";  ///< none | summary | all
  int num_executions = 1;
  int cpu_threads = 1;
  std::string delegate = "xnnpack";
  bool check_finite_inputs = true;  ///< MethodOptions::check_finite_inputs (--no_finite_check: false)
  bool profile = false;        ///< print a per-instruction profile after the timed runs
  std::string profile_json;    ///< also write it as JSON here  ///< xnnpack: run the program's delegate regions; none: portable only
  bool server_mode = false;
  std::string max_shapes;  ///< tightened bounds: the largest shapes to admit (MethodOptions::max_shapes)
  // Host normalization: input 0 from an image file, fitted to its size.
  std::string image;                 ///< PNG, JPEG or BMP
  std::string preprocess = "resize";  ///< resize | crop | letterbox
  std::string mean = "0";            ///< one value, or one per channel ("0.485,0.456,0.406")
  std::string std = "1";
  int pad = 0;                       ///< letterbox fill (0..255)
};

/// Runs kiln_runner with `opts`; server mode reads one request per line from `in`.
/// Returns the process exit code (0 ok, 1 error); messages go to `out` / `err`.
int run_runner(const RunnerOptions& opts, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace kiln::tooling
