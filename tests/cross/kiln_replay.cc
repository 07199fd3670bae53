// kiln_replay: runs programs exported on one machine on another and compares the outputs.
// scripts/zoo_cases.py exports every zoo, op-zoo and quantized-zoo model on x86-64 and writes
// cases.tsv; `kiln_replay record cases.tsv` (x86-64) runs every case, delegated and portable,
// and writes the outputs beside it; `kiln_replay compare cases.tsv` (arm64, under qemu) runs
// the same .kiln files on the same inputs and compares with what x86-64 wrote, within each
// model's tolerance (relative, |a - b| / (1 + |b|)) or, for the integer outputs of quantized
// models, within its number of quanta. Only the public API and the .npy reader: it builds in
// the runtime-only profile, so it runs where the exporter does not.
//
// A detector's rows of equal score may come in any order among themselves (tests/tied_rows.h).
//
// cases.tsv: one case per line, tab-separated:
//   model  case  kiln_file  tolerance  quanta(or -)  input.npy[,input.npy...]  output_prefix  ties
// ties: the index of a detector's scores output, or -.
// Relative paths are relative to the directory of cases.tsv. Outputs are
// <output_prefix>-<xnnpack|none>-<k>.npy. Exit status: 0 when every case matches (compare) or
// ran (record), 1 otherwise; a line per model says the largest difference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/method.h"
#include "kiln/program.h"
#include "tied_rows.h"
#include "tooling/npy.h"

namespace {

using kiln::DType;

struct Case {
  std::string model, name, kiln_file, output_prefix;
  double tolerance = 1e-4;
  double quanta = -1;  // < 0: integer outputs too are held to the relative tolerance
  int ties = -1;       // a detector's scores output (tied_rows.h), or -1
  std::vector<std::string> inputs;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

std::string resolve(const std::string& dir, const std::string& p) { return p.empty() || p[0] == '/' ? p : dir + "/" + p; }

bool read_cases(const std::string& path, std::vector<Case>* cases, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot open " + path;
    return false;
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> col = split(line, '\t');
    if (col.size() != 8) {
      *error = path + ":" + std::to_string(n) + ": expected 8 tab-separated columns, found " + std::to_string(col.size());
      return false;
    }
    Case c;
    c.model = col[0];
    c.name = col[1];
    c.kiln_file = resolve(dir, col[2]);
    c.tolerance = std::stod(col[3]);
    c.quanta = col[4] == "-" ? -1 : std::stod(col[4]);
    for (const std::string& in : split(col[5], ',')) c.inputs.push_back(resolve(dir, in));
    c.output_prefix = resolve(dir, col[6]);
    c.ties = col[7] == "-" ? -1 : std::stoi(col[7]);
    cases->push_back(std::move(c));
  }
  return true;
}

double element(DType dtype, const void* data, size_t i) {
  switch (dtype) {
    case DType::kF32: return static_cast<const float*>(data)[i];
    case DType::kI64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DType::kI32: return static_cast<const int32_t*>(data)[i];
    case DType::kBool: return static_cast<const uint8_t*>(data)[i];
    case DType::kI8: return static_cast<const int8_t*>(data)[i];
    case DType::kU8: return static_cast<const uint8_t*>(data)[i];
  }
  return 0;
}

/// Runs one case with or without the delegate; fills `outputs` (views into the Method, which
/// `method` keeps alive). An error message, or "".
std::string run(const Case& c, bool delegate, std::unique_ptr<kiln::Program>* program,
                std::unique_ptr<kiln::Method>* method) {
  auto p = kiln::Program::load(c.kiln_file);
  if (!p.ok()) return p.status().message();
  *program = std::move(*p);
  kiln::MethodOptions options;
  options.use_delegate = delegate;
  auto m = kiln::Method::create(**program, (*program)->method_name(0), options);
  if (!m.ok()) return m.status().message();
  *method = std::move(*m);
  std::vector<kiln::tooling::NpyArray> arrays;
  std::vector<kiln::TensorView> views;
  for (const std::string& path : c.inputs) {
    auto a = kiln::tooling::read_npy(path);
    if (!a.ok()) return a.status().message();
    arrays.push_back(std::move(*a));
  }
  for (auto& a : arrays) {
    kiln::TensorView v;
    v.dtype = a.dtype;
    v.rank = static_cast<int32_t>(a.shape.size());
    std::copy(a.shape.begin(), a.shape.end(), v.dims);
    v.data = a.data.data();
    views.push_back(v);
  }
  kiln::Status s = (*method)->set_inputs(views.data(), views.size());
  if (s.ok()) s = (*method)->execute();
  return s.ok() ? "" : s.message();
}

std::string output_path(const Case& c, bool delegate, size_t k) {
  return c.output_prefix + (delegate ? "-xnnpack-" : "-none-") + std::to_string(k) + ".npy";
}

/// Compares output `got` with the recorded `want`; the largest difference goes to *max_err.
/// `rows` (tied_rows): row i of `got` is row rows[i] of `want`, for an output of rows.size()
/// rows; empty, or another row count: in place. An error message, or "".
std::string compare(const Case& c, const kiln::TensorView& got, const kiln::tooling::NpyArray& want,
                    const std::vector<size_t>& rows, double* max_err) {
  std::vector<int64_t> shape(got.dims, got.dims + got.rank);
  if (shape != want.shape || got.dtype != want.dtype) return "shape or dtype differs from the recorded output";
  const bool in_quanta = c.quanta >= 0 && got.dtype != DType::kF32;
  const size_t n = static_cast<size_t>(got.numel());
  const size_t row = !rows.empty() && got.rank > 0 && static_cast<size_t>(got.dims[0]) == rows.size() ? n / rows.size() : 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t ref = row ? rows[i / row] * row + i % row : i;
    const double g = element(got.dtype, got.data, i), w = element(want.dtype, want.data.data(), ref);
    if (std::isnan(g) != std::isnan(w)) return "element " + std::to_string(i) + ": NaN on one side only";
    if (std::isnan(g) || (std::isinf(w) && g == w)) continue;
    const double err = in_quanta ? std::abs(g - w) : std::abs(g - w) / (1.0 + std::abs(w));
    *max_err = std::max(*max_err, in_quanta ? 0.0 : err);
    if (err > (in_quanta ? c.quanta : c.tolerance)) {
      std::ostringstream msg;
      msg << "element " << i << ": " << g << " here, " << w << " recorded (tolerance "
          << (in_quanta ? c.quanta : c.tolerance) << (in_quanta ? " quanta)" : ")");
      return msg.str();
    }
  }
  return "";
}

/// Every output of a run against the recorded ones, a detector's tied rows matched first. An
/// error message, or "".
std::string compare_all(const Case& c, const kiln::Method& method, bool delegate, double* max_err) {
  std::vector<kiln::tooling::NpyArray> wants;
  for (size_t k = 0; k < method.num_outputs(); ++k) {
    auto want = kiln::tooling::read_npy(output_path(c, delegate, k));
    if (!want.ok()) return want.status().message();
    wants.push_back(std::move(*want));
  }
  std::vector<size_t> rows;
  if (c.ties >= 0 && static_cast<size_t>(c.ties) < wants.size() && wants[c.ties].shape.size() == 1) {
    const size_t r = static_cast<size_t>(wants[c.ties].shape[0]);
    std::vector<double> scores(r);
    for (size_t i = 0; i < r; ++i) scores[i] = element(wants[c.ties].dtype, wants[c.ties].data.data(), i);
    std::vector<kiln::testing::RowOutput> outputs;
    for (size_t k = 0; k < wants.size() && r > 0; ++k) {
      const kiln::TensorView& g = method.output(k);
      const kiln::tooling::NpyArray& w = wants[k];
      std::vector<int64_t> shape(g.dims, g.dims + g.rank);
      if (shape != w.shape || g.dtype != w.dtype || w.shape.empty() || static_cast<size_t>(w.shape[0]) != r) continue;
      outputs.push_back({static_cast<size_t>(g.numel()) / r, [&g](size_t i) { return element(g.dtype, g.data, i); },
                         [&w](size_t i) { return element(w.dtype, w.data.data(), i); }});
    }
    rows = kiln::testing::tied_rows(scores, outputs, c.tolerance);
  }
  for (size_t k = 0; k < wants.size(); ++k) {
    const std::string e = compare(c, method.output(k), wants[k], rows, max_err);
    if (!e.empty()) return "output " + std::to_string(k) + " " + e;
  }
  return "";
}

int main_impl(const std::string& mode, const std::string& cases_path) {
  std::vector<Case> cases;
  std::string error;
  if (!read_cases(cases_path, &cases, &error)) {
    std::fprintf(stderr, "kiln_replay: %s\n", error.c_str());
    return 2;
  }
  const bool record = mode == "record";
  std::map<std::string, double> max_err;  // per model
  std::vector<std::string> order;
  int failures = 0, runs = 0;
  for (const Case& c : cases) {
    if (!max_err.count(c.model)) order.push_back(c.model);
    double& err = max_err[c.model];
    for (bool delegate : {true, false}) {
      std::unique_ptr<kiln::Program> program;
      std::unique_ptr<kiln::Method> method;
      std::string what = c.model + " " + c.name + (delegate ? " (xnnpack)" : " (portable)");
      std::string e = run(c, delegate, &program, &method);
      for (size_t k = 0; e.empty() && record && k < method->num_outputs(); ++k) {
        const kiln::TensorView& out = method->output(k);
        std::vector<int64_t> shape(out.dims, out.dims + out.rank);
        kiln::Status s = kiln::tooling::write_npy(output_path(c, delegate, k), out.dtype, shape, out.data);
        if (!s.ok()) e = s.message();
      }
      if (e.empty() && !record) e = compare_all(c, *method, delegate, &err);
      ++runs;
      if (!e.empty()) {
        ++failures;
        std::printf("FAIL %s: %s\n", what.c_str(), e.c_str());
      }
    }
  }
  if (!record)
    for (const std::string& m : order) std::printf("%-28s largest difference %.2e\n", m.c_str(), max_err[m]);
  std::printf("kiln_replay %s: %d runs of %zu cases (delegated and portable), %d failed\n", mode.c_str(), runs,
              cases.size(), failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "record") != 0 && std::strcmp(argv[1], "compare") != 0)) {
    std::fprintf(stderr, "usage: kiln_replay record|compare CASES.tsv\n");
    return 2;
  }
  return main_impl(argv[1], argv[2]);
}
