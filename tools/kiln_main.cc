// kiln: inspect and check .kiln programs.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

#include <chrono>

#include "export/onnx/onnx_import.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "runtime/program_impl.h"
#include "explain.h"
#include "tooling/export_report.h"
#include "tooling/file_io.h"
#include "tooling/inspect.h"
#include "tooling/runner.h"
#include "tooling/sweep.h"

namespace {

int fail(const std::string& message) { return std::cerr << "error: " << message << "\n", 1; }

// --- kiln export ------------------------------------------------------------------------
// The options are export_flag_specs()'s; each flag's texts, as given, go to the one parser.
struct ExportArgs {
  std::string model, out;
  std::vector<std::vector<std::string>> values;  // per export_flag_specs() entry
};

void add_export(CLI::App* exp, ExportArgs& a) {
  exp->add_option("model", a.model, "ONNX model")->required();
  exp->add_option("-o,--output", a.out, "program to write")->required();
  const auto& specs = kiln::exporter::export_flag_specs();
  a.values.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const kiln::exporter::ExportFlagSpec& s = specs[i];
    std::vector<std::string>& values = a.values[i];
    if (s.repeat == kiln::exporter::FlagRepeat::kSwitch) {
      exp->add_flag_function(s.flag, [&values](int64_t) { values.assign(1, ""); }, s.help);
      continue;
    }
    CLI::Option* o = exp->add_option(s.flag, values, s.help);
    // One value per flag (`--delegate none model.onnx` leaves the model alone); a repeat
    // reaches the parser, which combines it or says why not.
    if (s.repeat != kiln::exporter::FlagRepeat::kAdds)
      o->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    if (*s.default_text) o->default_str(s.default_text);
  }
}

// The flags as given, in export_flag_specs() order.
std::vector<kiln::exporter::ExportFlag> export_flags(const ExportArgs& a) {
  std::vector<kiln::exporter::ExportFlag> flags;
  const auto& specs = kiln::exporter::export_flag_specs();
  for (size_t i = 0; i < specs.size(); ++i)
    for (const std::string& v : a.values[i]) flags.push_back({specs[i].flag, v});
  return flags;
}

int run_export(const ExportArgs& a) {
  auto opts = kiln::exporter::parse_export_flags(export_flags(a));
  if (!opts.ok()) return fail(opts.status().message());
  auto t0 = std::chrono::steady_clock::now();
  kiln::format::ProgramDesc program;
  auto report = kiln::exporter::export_onnx(a.model, *opts, &program);
  kiln::Status s = report.ok() ? kiln::tooling::write_program_file(program, a.out) : report.status();
  if (!s.ok()) return fail("export " + a.model + ": " + s.message());
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& w : report->warnings) std::cerr << "warning: " << w << "\n";
  std::cout << "exported " << a.model << " -> " << a.out << " (method '" << opts->method_name << "', " << ms << " ms)\n"
            << kiln::tooling::format_report(*report);
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

// kiln check's exit status: 0 the shapes satisfy the contract, 1 the contract refuses them,
// 2 the check could not be made (no such file or method, shapes that do not parse).
constexpr int kCheckYes = 0, kCheckNo = 1, kCheckError = 2;

int run_check(const ProgramArgs& a) {
  auto program = kiln::Program::load(a.path);
  if (!program.ok()) return fail(program.status().message()), kCheckError;
  const size_t n_inputs = kiln::tooling::num_inputs(**program, a.method);
  auto parsed = kiln::tooling::parse_shapes(a.shapes, n_inputs);
  if (!parsed.ok()) return fail(parsed.status().message()), kCheckError;
  if (a.explain) return kiln::tools::explain(**program, a.path, a.method, *parsed, a.explain_model, std::cout);
  auto bucket = kiln::tooling::check_shapes(**program, a.method, *parsed);
  if (!bucket.ok()) {
    const kiln::Code c = bucket.status().code();
    if (n_inputs == 0 || (c != kiln::Code::kInvalidArgument && c != kiln::Code::kOutOfRange))
      return fail(bucket.status().message()), kCheckError;
    return std::cout << "no: " << bucket.status().message() << "\n", kCheckNo;
  }
  std::cout << "ok: " << a.shapes << " satisfies the contract of method '" << a.method << "'"
            << (bucket->empty() ? "" : ": " + *bucket) << "\n";
  return kCheckYes;
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
  CLI::App* check = app.add_subcommand("check", "do these input shapes satisfy the contract? (exit 0 yes, 1 no, 2 the check "
                                                "could not be made: no such file or method, shapes that do not parse)");
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
