// kiln: inspect and check .kiln programs.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <tuple>

#include <chrono>

#include "export/onnx/onnx_import.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "runtime/program_impl.h"
#include "explain.h"
#include "tooling/file_io.h"
#include "tooling/inspect.h"
#include "tooling/runner.h"
#include "tooling/sweep.h"

namespace {

int fail(const std::string& message) { return std::cerr << "error: " << message << "\n", 1; }

// --- kiln export ------------------------------------------------------------------------
struct ExportArgs {
  std::string model, out, method = "forward", delegate = "xnnpack", bucket, max_arena = "64GiB", warn_arena = "1GiB";
  std::vector<std::string> inputs, dims, consts, pads;
  double require_coverage = 0;
  bool no_fusion = false;
};

void add_export(CLI::App* exp, ExportArgs& a) {
  exp->add_option("model", a.model, "ONNX model")->required();
  exp->add_option("-o,--output", a.out, "program to write")->required();
  exp->add_option("--input", a.inputs, "NAME=D0,D1,... or NAME=D0xD1x... (integers static, names dynamic)");
  exp->add_option("--dim", a.dims, "NAME=MIN..MAX[:STEP] bounds a dim, NAME=V pins it");
  exp->add_option("--const", a.consts, "NAME=VALUE pins a scalar input as a constant");
  exp->add_option("--method_name", a.method, "method name")->capture_default_str();
  exp->add_option("--delegate", a.delegate, "xnnpack (partition for the XNNPACK delegate; the portable path stays) or none")
      ->capture_default_str();
  exp->add_option("--require-coverage", a.require_coverage, "fail unless the delegate takes this share of FLOPs (0..1)")
      ->check(CLI::Range(0.0, 1.0));
  exp->add_option("--bucket", a.bucket, "DIM=S1,S2,...: one static method per size, dispatched to the smallest that "
                                        "fits (inputs padded, outputs cut back)");
  exp->add_option("--pad", a.pads, "INPUT=VALUE: what a bucket pads that input with (default 0)");
  exp->add_option("--max-arena", a.max_arena, "refuse a contract whose arena at the bound is above SIZE (e.g. 512M, "
                                              "2G, 1.5GiB; 0: no limit)")->capture_default_str();
  exp->add_option("--warn-arena", a.warn_arena, "warn when the arena at the bound is above SIZE (0: never)")
      ->capture_default_str();
  exp->add_flag("--no-fusion", a.no_fusion, "keep LayerNorm and GELU chains as the model wrote them (no fused instructions)");
}

// The exporter's options from the flags; an error names the flag that does not parse.
kiln::Result<kiln::exporter::ExportOptions> export_options(const ExportArgs& a) {
  kiln::exporter::ExportOptions opts;
  opts.method_name = a.method;
  opts.delegate = a.delegate;
  opts.require_coverage = a.require_coverage;
  opts.fuse = !a.no_fusion;
  for (const auto& [flag, text, out] : {std::tuple{"--max-arena", &a.max_arena, &opts.max_arena_bytes},
                                        std::tuple{"--warn-arena", &a.warn_arena, &opts.warn_arena_bytes}}) {
    auto bytes = kiln::exporter::parse_byte_size(*text);
    if (!bytes.ok()) return bytes.status().with_prefix(std::string(flag) + ": ");
    *out = *bytes;
  }
  for (const std::string& arg : a.inputs) {
    KILN_ASSIGN_OR_RETURN(auto input, kiln::exporter::parse_input_arg(arg));
    opts.inputs.push_back(input);
  }
  for (const std::string& arg : a.dims) {
    KILN_ASSIGN_OR_RETURN(auto dim, kiln::exporter::parse_dim_arg(arg));
    opts.dims.push_back(dim);
  }
  for (const std::string& arg : a.consts) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) return kiln::invalid_argument("cannot parse --const '" + arg + "': write NAME=VALUE");
    opts.consts.emplace_back(arg.substr(0, eq), arg.substr(eq + 1));
  }
  if (!a.bucket.empty()) {
    const size_t eq = a.bucket.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.bucket.size())
      return kiln::invalid_argument("cannot parse --bucket '" + a.bucket + "': write DIM=S1,S2,...");
    opts.bucket_dim = a.bucket.substr(0, eq);
    std::stringstream ss(a.bucket.substr(eq + 1));
    for (std::string tok; std::getline(ss, tok, ',');) {
      if (tok.empty() || tok.size() > 15 || tok.find_first_not_of("0123456789") != std::string::npos)
        return kiln::invalid_argument("cannot parse --bucket '" + a.bucket + "': sizes are positive integers");
      opts.bucket_sizes.push_back(std::stoll(tok));
    }
  }
  for (const std::string& arg : a.pads) {
    const size_t eq = arg.find('=');
    char* end = nullptr;
    const double v = eq == std::string::npos ? 0 : std::strtod(arg.c_str() + eq + 1, &end);
    if (eq == std::string::npos || eq == 0 || !end || *end || end == arg.c_str() + eq + 1)
      return kiln::invalid_argument("cannot parse --pad '" + arg + "': write INPUT=VALUE");
    opts.pads[arg.substr(0, eq)] = v;
  }
  return opts;
}

int run_export(const ExportArgs& a) {
  auto opts = export_options(a);
  if (!opts.ok()) return fail(opts.status().message());
  auto t0 = std::chrono::steady_clock::now();
  kiln::format::ProgramDesc program;
  auto report = kiln::exporter::export_onnx(a.model, *opts, &program);
  kiln::Status s = report.ok() ? kiln::tooling::write_program_file(program, a.out) : report.status();
  if (!s.ok()) return fail("export " + a.model + ": " + s.message());
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& w : report->warnings) std::cerr << "warning: " << w << "\n";
  std::cout << "exported " << a.model << " -> " << a.out << " (method '" << a.method << "', " << ms << " ms)\n"
            << kiln::exporter::format_report(*report);
  return 0;
}

// --- kiln inspect / check / sweep: commands on a program ---------------------------------
struct ProgramArgs {
  std::string path, shapes, method = "forward", arena_at, explain_model;
  bool json = false, list_instructions = false, explain = false;
  kiln::tooling::SweepOptions sweep;
};

// kiln inspect --arena-at: the arena bytes each plan's values take at those shapes.
int run_arena_at(const kiln::Program& program, const ProgramArgs& a) {
  auto meta = program.method_meta(a.method);
  if (!meta.ok()) return fail(meta.status().message());
  auto shapes = kiln::tooling::parse_shapes(a.arena_at, meta->inputs.size());
  if (!shapes.ok()) return fail(shapes.status().message());
  for (bool delegated : {false, true}) {
    kiln::MethodOptions o;
    o.use_delegate = delegated;
    auto m = kiln::Method::create(program, a.method, o);
    if (!m.ok()) return fail(m.status().message());
    if (delegated && !(*m)->delegated()) continue;
    kiln::Status b = (*m)->bind_shapes(*shapes);
    if (!b.ok()) return std::cout << "no: " << b.message() << "\n", 1;
    const uint64_t used = (*m)->arena_bytes_in_use(), lower = kiln::MethodAccess::live_lower_bound_bytes(**m);
    std::printf("%-9s at %s: %llu bytes in use, live lower bound %llu (%.3fx); allocated at the bound %llu\n",
                delegated ? "delegated" : "portable", a.arena_at.c_str(), static_cast<unsigned long long>(used),
                static_cast<unsigned long long>(lower), lower ? static_cast<double>(used) / static_cast<double>(lower) : 1.0,
                static_cast<unsigned long long>((*m)->planned_arena_bytes()));
  }
  return 0;
}

int run_inspect(const ProgramArgs& a) {
  // An ONNX model: what to know before writing kiln export's flags.
  if (a.path.size() > 5 && a.path.compare(a.path.size() - 5, 5, ".onnx") == 0) {
    auto text = kiln::exporter::describe_onnx(a.path);
    if (!text.ok()) return fail(text.status().message());
    std::cout << *text;
    return 0;
  }
  auto program = kiln::Program::load(a.path);
  if (!program.ok()) return fail(program.status().message());
  if (!a.arena_at.empty()) return run_arena_at(**program, a);
  if (a.json)
    std::cout << kiln::tooling::inspect_json(**program, a.path).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << kiln::tooling::inspect_text(**program, a.path, a.list_instructions);
  return 0;
}

int run_sweep(const ProgramArgs& a) {
  auto program = kiln::Program::load(a.path);
  if (!program.ok()) return fail(program.status().message());
  auto r = kiln::tooling::sweep(**program, a.sweep);
  if (!r.ok()) return fail(r.status().message());
  if (a.json) std::cout << kiln::tooling::sweep_json(*r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else std::cout << kiln::tooling::sweep_text(*r);
  return r->failures() == 0 ? 0 : 1;
}

int run_check(const ProgramArgs& a) {
  auto program = kiln::Program::load(a.path);
  if (!program.ok()) return fail(program.status().message());
  auto meta = (*program)->method_meta(a.method);
  auto parsed = kiln::tooling::parse_shapes(a.shapes, meta.ok() ? meta->inputs.size() : 0);
  if (!parsed.ok()) return fail(parsed.status().message());
  if (a.explain) return kiln::tools::explain(**program, a.path, a.method, *parsed, a.explain_model, std::cout);
  kiln::Status s = kiln::tooling::check_shapes(**program, a.method, *parsed);
  if (!s.ok()) return std::cout << "no: " << s.message() << "\n", 1;
  std::cout << "ok: " << a.shapes << " satisfies the contract of method '" << a.method << "'\n";
  return 0;
}

int kiln_main(int argc, char** argv) {
  CLI::App app{"Kiln: shape-contract-aware programs for devices.\n"
               "examples:\n  kiln export model.onnx -o model.kiln --dim batch=1..8 --dim H=32..224:32\n"
               "  kiln inspect examples/cnn.kiln --json\n"
               "  kiln check examples/cnn.kiln --input_shapes=1x3x17x17"};
  app.set_version_flag("--version", kiln::tooling::version_text("kiln"));
  app.require_subcommand(1);

  ExportArgs e;
  CLI::App* exp = app.add_subcommand("export", "ONNX model -> .kiln program under a stated shape contract");
  add_export(exp, e);
  ProgramArgs a;
  CLI::App* inspect = app.add_subcommand("inspect", "show methods, signatures, dims, guards, memory and ops; of an ONNX "
                                                    "model, its inputs, dim names and the --dim flags to write");
  inspect->add_option("file", a.path, "program (.kiln) or model (.onnx)")->required();
  inspect->add_flag("--json", a.json, "machine-readable output");
  inspect->add_flag("--instructions", a.list_instructions, "list every instruction with its outputs' symbolic shapes");
  inspect->add_option("--arena-at", a.arena_at, "input shapes: the arena bytes the values take there (each plan), "
                                                "against the bytes alive at once there");
  inspect->add_option("--method_name", a.method, "method (--arena-at)")->capture_default_str();
  CLI::App* check = app.add_subcommand("check", "do these input shapes satisfy the contract? (exit 0 yes, 1 no)");
  check->add_option("file", a.path, "program")->required();
  check->add_option("--input_shapes", a.shapes, "e.g. 1x3x256x256,1x4 or 1,3,256,256;1,4")->required();
  check->add_option("--method_name", a.method, "method")->capture_default_str();
  check->add_flag("--explain", a.explain, "when refused: the three ways out (host normalization, a bounded dim, buckets) "
                                          "as commands with their costs");
  check->add_option("--model", a.explain_model, "the ONNX model the program came from: --explain measures each way out");
  CLI::App* sweep = app.add_subcommand("sweep", "run at many shapes inside the contract (min, max, random), twice each over "
                                                "differently poisoned arenas; exit 1 on any failure");
  sweep->add_option("file", a.path, "program")->required();
  sweep->add_option("--method_name", a.sweep.method_name, "method")->capture_default_str();
  sweep->add_option("--samples", a.sweep.samples, "random samples besides all-min and all-max")->capture_default_str();
  sweep->add_option("--seed", a.sweep.seed, "random seed")->capture_default_str();
  sweep->add_flag("--json", a.json, "machine-readable output");
  sweep->add_flag_function("--no_finite_check", [&a](int64_t) { a.sweep.check_finite_inputs = false; },
                  "run the delegate without execute's NaN/Inf input check: a NaN it turns into a number fails the sweep");
  CLI11_PARSE(app, argc, argv);

  if (exp->parsed()) return run_export(e);
  if (inspect->parsed()) return run_inspect(a);
  if (sweep->parsed()) return run_sweep(a);
  return run_check(a);
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
