#include "explain.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

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
  for (size_t i = 0; i < meta.inputs.size() && i < shapes.size(); ++i) {
    const TensorSpec& t = meta.inputs[i];
    if (shapes[i].size() != t.axes.size()) return out << "(a rank differs: only the model can change that)\n", 1;
    for (size_t k = 0; k < t.axes.size(); ++k) {
      const int64_t want = shapes[i][k];
      if (t.axes[k].dim < 0) {
        if (want != t.axes[k].size) refused.push_back({i, k, want, t.axes[k].size, t.axes[k].size});
        continue;
      }
      const DimSpec& d = meta.dims[static_cast<size_t>(t.axes[k].dim)];
      if (want < d.min || want > d.max || want % d.step != 0) refused.push_back({i, k, want, d.min, d.max});
    }
  }
  if (refused.empty()) {
    out << "(every size is in its range: a guard or shared dim refuses them; see the message's way out)\n";
    return 1;
  }
  const uint64_t arena_now = (*m)->planned_arena_bytes();
  out << "three ways out for method '" << method << "' (arena now " << mb(arena_now) << "):\n";

  // 1. Host normalization: the program stays; the host fits the data to it.
  out << "1. normalize on the host (no re-export):\n";
  const Refused& r0 = refused.front();
  const TensorSpec& t0 = meta.inputs[r0.input];
  const bool image = t0.axes.size() == 4 && t0.axes[1].dim < 0 && is_channels(t0.axes[1].size) &&
                     std::all_of(refused.begin(), refused.end(), [&](const Refused& r) { return r.input == r0.input && r.axis >= 2; });
  if (image) {
    const std::vector<int64_t>& want = shapes[r0.input];
    const std::vector<std::vector<int64_t>> bound = (*m)->bound_shapes();
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
  } else {
    for (const Refused& r : refused)
      out << "   input '" << meta.inputs[r.input].name << "' axis " << r.axis << ": pad or truncate " << r.want << " to "
          << std::clamp(r.want, r.have_min, r.have_max) << " on the host (the padded positions are computed too; truncation "
          << "drops data)\n";
  }

  // 2. A bounded dynamic dim; 3. buckets (one static export per shape). Each with its costs
  // from a trial export when the model is at hand.
  std::ostringstream dims_flags, input_flags, static_flags;
  std::vector<exporter::DimArg> dyn_dims;
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    const TensorSpec& t = meta.inputs[i];
    std::vector<std::string> dyn_axes, static_axes;
    bool touched = false;
    for (size_t k = 0; k < t.axes.size(); ++k) {
      auto it = std::find_if(refused.begin(), refused.end(), [&](const Refused& r) { return r.input == i && r.axis == k; });
      const std::string name = axis_name(t, meta, k);
      static_axes.push_back(std::to_string(shapes[i][k]));
      if (it == refused.end() && t.axes[k].dim < 0) {
        dyn_axes.push_back(std::to_string(t.axes[k].size));
        continue;
      }
      touched = touched || it != refused.end();
      dyn_axes.push_back(name);
      if (std::any_of(dyn_dims.begin(), dyn_dims.end(), [&](const exporter::DimArg& d) { return d.name == name; })) continue;
      dyn_dims.push_back(exporter::dim_arg(
          name, it != refused.end() ? std::min(it->want, it->have_min) : meta.dims[t.axes[k].dim].min,
          it != refused.end() ? std::max(it->want, it->have_max) : meta.dims[t.axes[k].dim].max));
    }
    if (touched || t.axes.size() > 0) {
      std::string a, b;
      for (size_t k = 0; k < dyn_axes.size(); ++k) a += (k ? "," : "") + dyn_axes[k], b += (k ? "," : "") + static_axes[k];
      input_flags << " --input " << t.name << "=" << a;
      static_flags << " --input " << t.name << "=" << b;
    }
  }
  for (const exporter::DimArg& d : dyn_dims) dims_flags << " --dim " << d.name << "=" << d.min << ".." << d.max;
  const std::string model = model_path.empty() ? "MODEL.onnx" : model_path;
  out << "2. a bounded dynamic dim (one program for every size in the range):\n   kiln export " << model
      << " -o OUT.kiln" << input_flags.str() << dims_flags.str() << "\n";
  out << "3. buckets (one static program per shape you ship, this one kept):\n   kiln export " << model
      << " -o OUT_BUCKET.kiln" << static_flags.str() << "\n";
  if (model_path.empty()) {
    out << "   (costs: give --model=MODEL.onnx and each export is tried: arena at the bound, file size)\n";
    return 1;
  }
  auto trial = [&](const std::vector<std::string>& input_args, const std::vector<exporter::DimArg>& dims,
                   std::string* what) {
    exporter::ExportOptions o;
    o.method_name = method;
    o.dims = dims;
    for (const std::string& a : input_args) {
      auto p = exporter::parse_input_arg(a);
      if (!p.ok()) return *what = p.status().message(), false;
      o.inputs.push_back(*p);
    }
    format::ProgramDesc desc;
    auto report = exporter::export_onnx(model_path, o, &desc);
    if (!report.ok()) return *what = "export fails: " + report.status().message(), false;
    auto bytes = format::serialize_program(desc);
    const uint64_t arena = report->delegate_arena_bytes ? report->delegate_arena_bytes : report->arena_bytes;
    *what = "arena " + mb(arena) + " at the bound, file " + mb(bytes.ok() ? bytes->size() : 0);
    return true;
  };
  auto args_of = [](const std::string& flags) {
    std::vector<std::string> v;
    std::istringstream ss(flags);
    for (std::string tok; ss >> tok;)
      if (tok != "--input") v.push_back(tok);
    return v;
  };
  std::string dyn_cost, static_cost;
  trial(args_of(input_flags.str()), dyn_dims, &dyn_cost);
  trial(args_of(static_flags.str()), {}, &static_cost);
  out << "costs (trial exports of " << model_path << "):\n   2. " << dyn_cost << "\n   3. " << static_cost
      << " more, beside this program's\n";
  return 1;
}

}  // namespace kiln::tools
