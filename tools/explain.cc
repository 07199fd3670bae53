#include "explain.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

#include "export/onnx/onnx_import.h"
#include "kiln/method.h"
#include "tooling/runner.h"

namespace kiln::tools {

namespace {

bool is_channels(int64_t c) { return c == 1 || c == 3 || c == 4; }

std::string mb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// One input axis the shapes ask for and the contract refuses.
struct Refused {
  size_t input;
  size_t axis;
  int64_t want;
  int64_t have_min, have_max;  // what the program admits on that axis
};

// The name a re-export gives axis k of input t: its dim's, or H/W for an image's spatial
// axes, or "<input>_d<k>".
std::string axis_name(const TensorSpec& t, const MethodMeta& m, size_t k) {
  if (t.axes[k].dim >= 0) return m.dims[static_cast<size_t>(t.axes[k].dim)].name;
  if (t.axes.size() == 4 && t.axes[1].dim < 0 && is_channels(t.axes[1].size) && (k == 2 || k == 3)) return k == 2 ? "H" : "W";
  return t.name + "_d" + std::to_string(k);
}

// The axes that `shapes` asks for and the contract refuses. False when a rank differs.
bool find_refused(const MethodMeta& meta, const std::vector<std::vector<int64_t>>& shapes, std::vector<Refused>* refused) {
  for (size_t i = 0; i < meta.inputs.size() && i < shapes.size(); ++i) {
    const TensorSpec& t = meta.inputs[i];
    if (shapes[i].size() != t.axes.size()) return false;
    for (size_t k = 0; k < t.axes.size(); ++k) {
      const int64_t want = shapes[i][k];
      if (t.axes[k].dim < 0) {
        if (want != t.axes[k].size) refused->push_back({i, k, want, t.axes[k].size, t.axes[k].size});
        continue;
      }
      const DimSpec& d = meta.dims[static_cast<size_t>(t.axes[k].dim)];
      if (want < d.min || want > d.max || want % d.step != 0) refused->push_back({i, k, want, d.min, d.max});
    }
  }
  return true;
}

// Way out 1: the program stays; the host fits the data to it (letterbox, crop or resize for an
// image's spatial axes, pad or truncate otherwise).
void explain_host_normalization(const Method& m, const std::string& program_path,
                                const std::vector<std::vector<int64_t>>& shapes, const std::vector<Refused>& refused,
                                std::ostream& out) {
  const MethodMeta& meta = m.meta();
  out << "1. normalize on the host (no re-export):\n";
  const Refused& r0 = refused.front();
  const TensorSpec& t0 = meta.inputs[r0.input];
  const bool image = t0.axes.size() == 4 && t0.axes[1].dim < 0 && is_channels(t0.axes[1].size) &&
                     std::all_of(refused.begin(), refused.end(), [&](const Refused& r) { return r.input == r0.input && r.axis >= 2; });
  if (!image) {
    for (const Refused& r : refused)
      out << "   input '" << meta.inputs[r.input].name << "' axis " << r.axis << ": pad or truncate " << r.want << " to "
          << std::clamp(r.want, r.have_min, r.have_max) << " on the host (the padded positions are computed too; truncation "
          << "drops data)\n";
    return;
  }
  const std::vector<int64_t>& want = shapes[r0.input];
  const std::vector<std::vector<int64_t>> bound = m.bound_shapes();
  const double fh = static_cast<double>(want[2]), fw = static_cast<double>(want[3]);
  const double th = static_cast<double>(bound[r0.input][2]), tw = static_cast<double>(bound[r0.input][3]);
  const double fit = std::min(th / fh, tw / fw), cover = std::max(th / fh, tw / fw);
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.0f%% of the input is padding; the frame is scaled by %.3f", 100.0 * (1.0 - fit * fh * fit * fw / (th * tw)), fit);
  out << "   kiln_runner --model_path=" << program_path << " --image=FRAME --preprocess=letterbox   (" << buf << ")\n";
  std::snprintf(buf, sizeof buf, "%.0f%% of the frame is cut away", 100.0 * (1.0 - th * tw / (cover * fh * cover * fw)));
  out << "   ... --preprocess=crop   (" << buf << ")   or --preprocess=resize (the aspect changes by "
      << (tw / fw) / (th / fh) << ")\n";
  out << "   (Python: kiln.image.preprocess(FRAME, (" << bound[r0.input][2] << ", " << bound[r0.input][3] << "), mode=...))\n";
}

// The export flags of ways out 2 and 3: every input with its refused axes made dynamic (or
// pinned at the asked size), and the dims that widen to admit the asked sizes.
struct ReExport {
  std::vector<std::string> dynamic_inputs, static_inputs;  // "name=a,b,..." per input
  std::vector<exporter::DimArg> dims;
};

ReExport re_export(const MethodMeta& meta, const std::vector<std::vector<int64_t>>& shapes,
                   const std::vector<Refused>& refused) {
  ReExport e;
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    const TensorSpec& t = meta.inputs[i];
    std::string dyn, fixed;
    for (size_t k = 0; k < t.axes.size(); ++k) {
      auto it = std::find_if(refused.begin(), refused.end(), [&](const Refused& r) { return r.input == i && r.axis == k; });
      const std::string sep = k ? "," : "";
      fixed += sep + std::to_string(shapes[i][k]);
      if (it == refused.end() && t.axes[k].dim < 0) {
        dyn += sep + std::to_string(t.axes[k].size);
        continue;
      }
      const std::string name = axis_name(t, meta, k);
      dyn += sep + name;
      if (std::any_of(e.dims.begin(), e.dims.end(), [&](const exporter::DimArg& d) { return d.name == name; })) continue;
      const bool asked = it != refused.end();
      e.dims.push_back(exporter::dim_arg(name, asked ? std::min(it->want, it->have_min) : meta.dims[t.axes[k].dim].min,
                                         asked ? std::max(it->want, it->have_max) : meta.dims[t.axes[k].dim].max));
    }
    if (t.axes.empty()) continue;
    e.dynamic_inputs.push_back(t.name + "=" + dyn);
    e.static_inputs.push_back(t.name + "=" + fixed);
  }
  return e;
}

std::string flags(const std::vector<std::string>& inputs, const std::vector<exporter::DimArg>& dims) {
  std::string s;
  for (const std::string& a : inputs) s += " --input " + a;
  for (const exporter::DimArg& d : dims) s += " --dim " + d.name + "=" + std::to_string(d.min) + ".." + std::to_string(d.max);
  return s;
}

// A trial export of the model with these flags: its arena at the bound and file size, or why
// it fails.
std::string trial_export(const std::string& model_path, const std::string& method, const std::vector<std::string>& inputs,
                         const std::vector<exporter::DimArg>& dims) {
  exporter::ExportOptions o;
  o.method_name = method;
  o.dims = dims;
  for (const std::string& a : inputs) {
    auto p = exporter::parse_input_arg(a);
    if (!p.ok()) return p.status().message();
    o.inputs.push_back(*p);
  }
  format::ProgramDesc desc;
  auto report = exporter::export_onnx(model_path, o, &desc);
  if (!report.ok()) return "export fails: " + report.status().message();
  auto bytes = format::serialize_program(desc);
  const uint64_t arena = report->delegate_arena_bytes ? report->delegate_arena_bytes : report->arena_bytes;
  return "arena " + mb(arena) + " at the bound, file " + mb(bytes.ok() ? bytes->size() : 0);
}

}  // namespace

int explain(const Program& program, const std::string& program_path, const std::string& method,
            const std::vector<std::vector<int64_t>>& shapes, const std::string& model_path, std::ostream& out) {
  auto m = Method::create(program, method);
  if (!m.ok()) return out << "error: " << m.status().message() << "\n", 1;
  Status s = (*m)->bind_shapes(shapes);
  if (s.ok()) return out << "ok: the shapes satisfy the contract of method '" << method << "'; nothing to explain\n", 0;
  out << "no: " << s.message() << "\n";
  const MethodMeta& meta = (*m)->meta();
  std::vector<Refused> refused;
  if (!find_refused(meta, shapes, &refused)) return out << "(a rank differs: only the model can change that)\n", 1;
  if (refused.empty()) {
    out << "(every size is in its range: a guard or shared dim refuses them; see the message's way out)\n";
    return 1;
  }
  out << "three ways out for method '" << method << "' (arena now " << mb((*m)->planned_arena_bytes()) << "):\n";
  explain_host_normalization(**m, program_path, shapes, refused, out);

  // 2. A bounded dynamic dim; 3. buckets (one static export per shape). Each with its costs
  // from a trial export when the model is at hand.
  const ReExport e = re_export(meta, shapes, refused);
  const std::string model = model_path.empty() ? "MODEL.onnx" : model_path;
  out << "2. a bounded dynamic dim (one program for every size in the range):\n   kiln export " << model
      << " -o OUT.kiln" << flags(e.dynamic_inputs, e.dims) << "\n";
  out << "3. buckets (one static program per shape you ship, this one kept):\n   kiln export " << model
      << " -o OUT_BUCKET.kiln" << flags(e.static_inputs, {}) << "\n";
  if (model_path.empty()) {
    out << "   (costs: give --model=MODEL.onnx and each export is tried: arena at the bound, file size)\n";
    return 1;
  }
  out << "costs (trial exports of " << model_path << "):\n   2. " << trial_export(model_path, method, e.dynamic_inputs, e.dims)
      << "\n   3. " << trial_export(model_path, method, e.static_inputs, {}) << " more, beside this program's\n";
  return 1;
}

}  // namespace kiln::tools
