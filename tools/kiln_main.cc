// kiln: inspect and check .kiln programs.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

#include <chrono>

#include "export/onnx/onnx_import.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "explain.h"
#include "tooling/file_io.h"
#include "tooling/inspect.h"
#include "tooling/runner.h"
#include "tooling/sweep.h"

namespace {

int kiln_main(int argc, char** argv) {
  CLI::App app{"Kiln: shape-contract-aware programs for devices.\n"
               "examples:\n  kiln export model.onnx -o model.kiln --dim batch=1..8 --dim H=32..224:32\n"
               "  kiln inspect examples/cnn.kiln --json\n"
               "  kiln check examples/cnn.kiln --input_shapes=1x3x17x17"};
  app.require_subcommand(1);

  std::string path, shapes, method = "forward";
  bool json = false;
  std::string model, out;
  std::vector<std::string> input_args, dim_args, const_args;
  CLI::App* exp = app.add_subcommand("export", "ONNX model -> .kiln program under a stated shape contract");
  exp->add_option("model", model, "ONNX model")->required();
  exp->add_option("-o,--output", out, "program to write")->required();
  exp->add_option("--input", input_args, "NAME=D0,D1,... or NAME=D0xD1x... (integers static, names dynamic)");
  exp->add_option("--dim", dim_args, "NAME=MIN..MAX[:STEP] bounds a dim, NAME=V pins it");
  exp->add_option("--const", const_args, "NAME=VALUE pins a scalar input as a constant");
  exp->add_option("--method_name", method, "method name")->capture_default_str();
  std::string delegate = "xnnpack";
  double require_coverage = 0;
  exp->add_option("--delegate", delegate, "xnnpack (partition for the XNNPACK delegate; the portable path stays) or none")
      ->capture_default_str();
  exp->add_option("--require-coverage", require_coverage, "fail unless the delegate takes this share of FLOPs (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  std::string bucket_arg;
  std::vector<std::string> pad_args;
  exp->add_option("--bucket", bucket_arg, "DIM=S1,S2,...: one static method per size, dispatched to the smallest that "
                                          "fits (inputs padded, outputs cut back)");
  exp->add_option("--pad", pad_args, "INPUT=VALUE: what a bucket pads that input with (default 0)");
  bool no_fusion = false;
  exp->add_flag("--no-fusion", no_fusion, "keep LayerNorm and GELU chains as the model wrote them (no fused instructions)");
  CLI::App* inspect = app.add_subcommand("inspect", "show methods, signatures, dims, guards, memory and ops; of an ONNX "
                                                    "model, its inputs, dim names and the --dim flags to write");
  inspect->add_option("file", path, "program (.kiln) or model (.onnx)")->required();
  inspect->add_flag("--json", json, "machine-readable output");
  bool list_instructions = false;
  inspect->add_flag("--instructions", list_instructions, "list every instruction with its outputs' symbolic shapes");
  std::string arena_at;
  inspect->add_option("--arena-at", arena_at, "input shapes: the arena bytes the values take there (each plan), "
                                              "against the bytes alive at once there");
  inspect->add_option("--method_name", method, "method (--arena-at)")->capture_default_str();
  CLI::App* check = app.add_subcommand("check", "do these input shapes satisfy the contract? (exit 0 yes, 1 no)");
  check->add_option("file", path, "program")->required();
  check->add_option("--input_shapes", shapes, "e.g. 1x3x256x256,1x4 or 1,3,256,256;1,4")->required();
  check->add_option("--method_name", method, "method")->capture_default_str();
  bool explain = false;
  std::string explain_model;
  check->add_flag("--explain", explain, "when refused: the three ways out (host normalization, a bounded dim, buckets) "
                                        "as commands with their costs");
  check->add_option("--model", explain_model, "the ONNX model the program came from: --explain measures each way out");
  kiln::tooling::SweepOptions sweep_opts;
  CLI::App* sweep = app.add_subcommand("sweep", "run at many shapes inside the contract (min, max, random), twice each over "
                                                "differently poisoned arenas; exit 1 on any failure");
  sweep->add_option("file", path, "program")->required();
  sweep->add_option("--method_name", sweep_opts.method_name, "method")->capture_default_str();
  sweep->add_option("--samples", sweep_opts.samples, "random samples besides all-min and all-max")->capture_default_str();
  sweep->add_option("--seed", sweep_opts.seed, "random seed")->capture_default_str();
  sweep->add_flag("--json", json, "machine-readable output");
  CLI11_PARSE(app, argc, argv);

  if (exp->parsed()) {
    kiln::exporter::ExportOptions opts;
    opts.method_name = method;
    opts.delegate = delegate;
    opts.require_coverage = require_coverage;
    opts.fuse = !no_fusion;
    for (const std::string& a : input_args) {
      auto r = kiln::exporter::parse_input_arg(a);
      if (!r.ok()) return std::cerr << "error: " << r.status().message() << "\n", 1;
      opts.inputs.push_back(*r);
    }
    for (const std::string& a : dim_args) {
      auto r = kiln::exporter::parse_dim_arg(a);
      if (!r.ok()) return std::cerr << "error: " << r.status().message() << "\n", 1;
      opts.dims.push_back(*r);
    }
    for (const std::string& a : const_args) {
      size_t eq = a.find('=');
      if (eq == std::string::npos || eq == 0) return std::cerr << "error: cannot parse --const '" << a << "': write NAME=VALUE\n", 1;
      opts.consts.emplace_back(a.substr(0, eq), a.substr(eq + 1));
    }
    if (!bucket_arg.empty()) {
      const size_t eq = bucket_arg.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == bucket_arg.size())
        return std::cerr << "error: cannot parse --bucket '" << bucket_arg << "': write DIM=S1,S2,...\n", 1;
      opts.bucket_dim = bucket_arg.substr(0, eq);
      std::stringstream ss(bucket_arg.substr(eq + 1));
      for (std::string tok; std::getline(ss, tok, ',');) {
        if (tok.empty() || tok.size() > 15 || tok.find_first_not_of("0123456789") != std::string::npos)
          return std::cerr << "error: cannot parse --bucket '" << bucket_arg << "': sizes are positive integers\n", 1;
        opts.bucket_sizes.push_back(std::stoll(tok));
      }
    }
    for (const std::string& a : pad_args) {
      const size_t eq = a.find('=');
      char* end = nullptr;
      const double v = eq == std::string::npos ? 0 : std::strtod(a.c_str() + eq + 1, &end);
      if (eq == std::string::npos || eq == 0 || !end || *end || end == a.c_str() + eq + 1)
        return std::cerr << "error: cannot parse --pad '" << a << "': write INPUT=VALUE\n", 1;
      opts.pads[a.substr(0, eq)] = v;
    }
    auto t0 = std::chrono::steady_clock::now();
    kiln::format::ProgramDesc program;
    auto report = kiln::exporter::export_onnx(model, opts, &program);
    kiln::Status s = report.ok() ? kiln::tooling::write_program_file(program, out) : report.status();
    if (!s.ok()) return std::cerr << "error: export " << model << ": " << s.message() << "\n", 1;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "exported " << model << " -> " << out << " (method '" << method << "', " << ms << " ms)\n"
              << kiln::exporter::format_report(*report);
    return 0;
  }
  // An ONNX model: what to know before writing kiln export's flags.
  if (inspect->parsed() && path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) {
    auto text = kiln::exporter::describe_onnx(path);
    if (!text.ok()) return std::cerr << "error: " << text.status().message() << "\n", 1;
    std::cout << *text;
    return 0;
  }
  auto program = kiln::Program::load(path);
  if (!program.ok()) {
    std::cerr << "error: " << program.status().message() << "\n";
    return 1;
  }
  if (inspect->parsed() && !arena_at.empty()) {
    auto meta = (*program)->method_meta(method);
    if (!meta.ok()) return std::cerr << "error: " << meta.status().message() << "\n", 1;
    auto shapes = kiln::tooling::parse_shapes(arena_at, meta->inputs.size());
    if (!shapes.ok()) return std::cerr << "error: " << shapes.status().message() << "\n", 1;
    for (bool delegated : {false, true}) {
      kiln::MethodOptions o;
      o.use_delegate = delegated;
      auto m = kiln::Method::create(**program, method, o);
      if (!m.ok()) return std::cerr << "error: " << m.status().message() << "\n", 1;
      if (delegated && !(*m)->delegated()) continue;
      kiln::Status b = (*m)->bind_shapes(*shapes);
      if (!b.ok()) return std::cout << "no: " << b.message() << "\n", 1;
      const uint64_t used = (*m)->arena_bytes_in_use(), lower = (*m)->live_lower_bound_bytes();
      std::printf("%-9s at %s: %llu bytes in use, live lower bound %llu (%.3fx); allocated at the bound %llu\n",
                  delegated ? "delegated" : "portable", arena_at.c_str(), static_cast<unsigned long long>(used),
                  static_cast<unsigned long long>(lower), lower ? static_cast<double>(used) / static_cast<double>(lower) : 1.0,
                  static_cast<unsigned long long>((*m)->planned_arena_bytes()));
    }
    return 0;
  }
  if (inspect->parsed()) {
    if (json) std::cout << kiln::tooling::inspect_json(**program, path).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else std::cout << kiln::tooling::inspect_text(**program, path, list_instructions);
    return 0;
  }
  if (sweep->parsed()) {
    auto r = kiln::tooling::sweep(**program, sweep_opts);
    if (!r.ok()) return std::cerr << "error: " << r.status().message() << "\n", 1;
    if (json) std::cout << kiln::tooling::sweep_json(*r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else std::cout << kiln::tooling::sweep_text(*r);
    return r->failures() == 0 ? 0 : 1;
  }
  auto meta = (*program)->method_meta(method);
  auto parsed = kiln::tooling::parse_shapes(shapes, meta.ok() ? meta->inputs.size() : 0);
  if (!parsed.ok()) {
    std::cerr << "error: " << parsed.status().message() << "\n";
    return 1;
  }
  if (explain) return kiln::tools::explain(**program, path, method, *parsed, explain_model, std::cout);
  kiln::Status s = kiln::tooling::check_shapes(**program, method, *parsed);
  if (!s.ok()) {
    std::cout << "no: " << s.message() << "\n";
    return 1;
  }
  std::cout << "ok: " << shapes << " satisfies the contract of method '" << method << "'\n";
  return 0;
}

}  // namespace

// No exception leaves a tool: whatever escapes is reported in one line, exit status 1.
int main(int argc, char** argv) {
  try {
    return kiln_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: unexpected exception: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "error: unexpected exception\n";
  }
  return 1;
}
