// `kiln inspect MODEL.onnx`: what to know before writing `kiln export`'s flags. The inputs
// and outputs as the model declares them, the dim names and where each is used, and what a
// trial export with every dim in [1, 4096] finds the model needs of them (a minimum from a
// chain of downsampling nodes, a step from a reshape, a dim the model fixes to one value).
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "export/onnx/onnx_import.h"
#include "export/onnx/onnx_proto.h"
#include "core/bytes.h"
#include "core/dim_text.h"
#include "core/status.h"

namespace kiln::exporter {

namespace {

constexpr int64_t kTrialMax = 4096;

struct Axis {
  std::string text;  // "3", "height", or "?" (neither a size nor a name)
  bool named = false;
};

std::vector<Axis> axes_of(const onnx::ValueInfoProto& v, bool* has_shape) {
  std::vector<Axis> axes;
  *has_shape = v.type().has_tensor_type() && v.type().tensor_type().has_shape();
  if (!*has_shape) return axes;
  for (const auto& d : v.type().tensor_type().shape().dim()) {
    if (d.has_dim_value()) axes.push_back({std::to_string(d.dim_value()), false});
    else if (d.has_dim_param() && !d.dim_param().empty()) axes.push_back({d.dim_param(), true});
    else axes.push_back({"?", false});
  }
  return axes;
}

std::string type_text(const onnx::ValueInfoProto& v) {
  if (!v.type().has_tensor_type()) return "(not a tensor)";
  DType t;
  const int32_t e = v.type().tensor_type().elem_type();
  if (e == onnx::TensorProto::FLOAT16) return "f16 (Kiln exchanges f32: export float32 inputs and outputs)";
  if (e == onnx::TensorProto::DOUBLE) return "f64 (Kiln exchanges f32: export float32 inputs and outputs)";
  return onnx_dtype(v.type().tensor_type().elem_type(), &t) ? dtype_name(t)
                                                           : "(element type " + std::to_string(v.type().tensor_type().elem_type()) + ")";
}

std::string shape_text(const std::vector<Axis>& axes, bool has_shape) {
  if (!has_shape) return "(no declared shape)";
  std::string s = "[";
  for (size_t k = 0; k < axes.size(); ++k) s += (k ? ", " : "") + axes[k].text;
  return s + "]";
}

Result<ExportReport> trial_contract(const std::string& model_path, const std::vector<std::string>& dim_names, int64_t max) {
  ExportOptions trial;
  trial.max_arena_bytes = trial.warn_arena_bytes = 0;  // the trial's bounds are not the user's
  trial.delegate = "none";
  for (const std::string& d : dim_names) trial.dims.push_back(dim_arg(d, 1, max));
  format::ProgramDesc scratch;
  return export_onnx(model_path, trial, &scratch);
}

// Flags whose arena at the bound fits a memory budget (kiln export's --warn-arena default):
// the dims' minima as the model needs them, a batch-like dim up to 8, the others at the
// largest common bound (halving from the trial's) whose trial export fits.
void budget_flags(const std::string& model_path, const std::vector<DimSpec>& dims, int64_t trial_max, std::ostream& o) {
  constexpr uint64_t kBudget = ExportOptions::kDefaultWarnArena;
  if (dims.empty()) return;
  for (int64_t m = trial_max; m >= 1; m /= 2) {
    ExportOptions e;
    e.max_arena_bytes = e.warn_arena_bytes = 0;
    e.delegate = "none";
    std::string flags;
    for (const DimSpec& d : dims) {
      int64_t hi = std::min(d.max, core::is_batch_name(d.name) ? std::min<int64_t>(8, m) : m);
      hi = hi / d.step * d.step;
      if (hi < d.min) hi = d.min;
      e.dims.push_back(dim_arg(d.name, d.min, hi, d.step));
      flags += " --dim " + d.name + "=" + std::to_string(d.min) + ".." + std::to_string(hi) +
               (d.step > 1 ? ":" + std::to_string(d.step) : "");
    }
    format::ProgramDesc scratch;
    Result<ExportReport> r = export_onnx(model_path, e, &scratch);
    if (!r.ok() || r->arena_bytes > kBudget) continue;
    o << "or, to fit a " << core::human_bytes(kBudget) << " arena (--warn-arena's default; this one is "
      << core::human_bytes(r->arena_bytes) << " at the bound):\n  kiln export " << model_path << " -o OUT.kiln" << flags << "\n";
    return;
  }
}

}  // namespace

Result<std::string> describe_onnx(const std::string& model_path) {
  onnx::ModelProto model;
  KILN_TRY(read_model_file(model_path, &model));
  if (!model.has_graph()) return data_loss("'" + model_path + "' has no graph: not an ONNX model, or an empty one");
  const onnx::GraphProto& g = model.graph();
  int64_t opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());

  std::ostringstream o;
  o << "model '" << model_path << "': ONNX opset " << opset << ", " << g.node_size() << " nodes\n";
  o << "inputs (as declared):\n";
  std::vector<std::string> dim_names;                 // in order of first use
  std::map<std::string, std::vector<std::string>> uses;  // dim -> "input 'x' axis 2"
  std::vector<std::string> unnamed;                   // inputs with an axis of neither size nor name
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (inits.count(in.name())) continue;
    bool has_shape = false;
    const std::vector<Axis> axes = axes_of(in, &has_shape);
    o << "  '" << in.name() << "' " << type_text(in) << " " << shape_text(axes, has_shape) << "\n";
    if (!has_shape) unnamed.push_back(in.name());
    for (size_t k = 0; k < axes.size(); ++k) {
      if (axes[k].text == "?" && (unnamed.empty() || unnamed.back() != in.name())) unnamed.push_back(in.name());
      if (!axes[k].named) continue;
      if (!uses.count(axes[k].text)) dim_names.push_back(axes[k].text);
      uses[axes[k].text].push_back("input '" + in.name() + "' axis " + std::to_string(k));
    }
  }

  // A trial export: every named dim in [1, T]; its contract says what the model needs. A CNN
  // at 4096 in every dim (batch too) needs more than the planner takes: T shrinks until it fits.
  int64_t trial_max = kTrialMax;
  Result<ExportReport> report = invalid_argument("some input axes have neither a size nor a name");
  for (int64_t t = kTrialMax; unnamed.empty() && t >= 16; t /= 4) {
    Result<ExportReport> r = trial_contract(model_path, dim_names, t);
    if (t == kTrialMax || r.ok()) report = std::move(r), trial_max = t;
    if (report.ok()) break;
  }
  o << "outputs" << (report.ok() ? " (shapes from a trial export)" : " (as declared)") << ":\n";
  if (report.ok()) {
    for (const std::string& out : report->outputs) o << "  " << out << "\n";
  } else {
    for (const onnx::ValueInfoProto& out : g.output()) {
      bool has_shape = false;
      const std::vector<Axis> axes = axes_of(out, &has_shape);
      o << "  '" << out.name() << "' " << type_text(out) << " " << shape_text(axes, has_shape) << "\n";
    }
  }
  if (dim_names.empty()) {
    o << "dims: none (every axis has a size: the program will be static)\n";
  } else {
    o << "dims (each needs --dim NAME=MIN..MAX[:STEP], or --dim NAME=V to pin it):\n";
    for (const std::string& d : dim_names) {
      o << "  " << d << ": ";
      for (size_t k = 0; k < uses[d].size(); ++k) o << (k ? ", " : "") << uses[d][k];
      if (uses[d].size() > 1) o << " (equal at run time: one name)";
      o << "\n";
    }
  }
  for (const std::string& name : unnamed)
    o << "input '" << name << "' has an axis with neither a size nor a name: give its shape with --input " << name
      << "=D0,D1,... (sizes, or dim names for the dynamic axes)\n";
  if (!report.ok()) {
    if (unnamed.empty())
      o << "a trial export with every dim in [1, " << kTrialMax << "] (and smaller) fails: " << report.status().message() << "\n";
    return o.str();
  }
  if (trial_max < kTrialMax)
    o << "(a trial export with every dim in [1, " << kTrialMax << "] does not plan; the trial took [1, " << trial_max << "])\n";
  if (!report->narrowed.empty()) {
    o << "what the model needs of its dims (a trial export with each in [1, " << trial_max << "]):\n";
    for (const std::string& n : report->narrowed) o << "  " << n << "\n";
  }
  o << "start from (choose each MAX; the arena is planned at it):\n  kiln export " << model_path << " -o OUT.kiln";
  for (const DimSpec& d : report->contract_dims)
    o << " --dim " << d.name << "=" << d.min << ".." << (d.max < trial_max ? std::to_string(d.max) : std::string("MAX"))
      << (d.step > 1 ? ":" + std::to_string(d.step) : "");
  o << "\n";
  budget_flags(model_path, report->contract_dims, trial_max, o);
  return o.str();
}

}  // namespace kiln::exporter
