#include "explain.h"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

#include "core/dim_text.h"
#include "export/onnx/onnx_import.h"
#include "kiln/bucketed.h"
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
// The image input's target for host normalization: each spatial axis at the nearest size its
// dim admits (on the step grid, in range; a tie goes up), checked by binding; the bound when
// those sizes do not bind together. Static axes keep their size.
std::vector<int64_t> image_target(Method& m, const std::vector<std::vector<int64_t>>& shapes, size_t input) {
  const MethodMeta& meta = m.meta();
  const TensorSpec& t = meta.inputs[input];
  std::vector<int64_t> target = shapes[input];
  target[0] = 1;
  for (size_t k : {size_t{2}, size_t{3}}) {
    if (t.axes[k].dim < 0) {
      target[k] = t.axes[k].size;
      continue;
    }
    const DimSpec& d = meta.dims[static_cast<size_t>(t.axes[k].dim)];
    const int64_t lo = (d.min + d.step - 1) / d.step * d.step, hi = d.max / d.step * d.step;
    const int64_t down = std::clamp(shapes[input][k] / d.step * d.step, lo, hi);
    const int64_t up = std::clamp((shapes[input][k] + d.step - 1) / d.step * d.step, lo, hi);
    target[k] = up - shapes[input][k] <= shapes[input][k] - down ? up : down;
  }
  std::vector<std::vector<int64_t>> trial = shapes;
  trial[input] = target;
  if (!m.bind_shapes(trial).ok()) target = m.bound_shapes()[input];
  return target;
}

void explain_host_normalization(Method& m, const std::string& program_path,
                                const std::vector<std::vector<int64_t>>& shapes, const std::vector<Refused>& refused,
                                std::ostream& out) {
  const MethodMeta& meta = m.meta();
  out << "1. normalize on the host (no re-export):\n";
  const Refused& r0 = refused.front();
  const TensorSpec& t0 = meta.inputs[r0.input];
  const bool image = t0.axes.size() == 4 && t0.axes[1].dim < 0 && is_channels(t0.axes[1].size) &&
                     std::all_of(refused.begin(), refused.end(), [&](const Refused& r) { return r.input == r0.input && r.axis >= 2; });
  if (!image) {
    for (const Refused& r : refused) {
      const int64_t to = std::clamp(r.want, r.have_min, r.have_max);
      out << "   input '" << meta.inputs[r.input].name << "' axis " << r.axis << ": ";
      if (r.axis == 0 && core::is_batch_name(axis_name(meta.inputs[r.input], meta, 0)))  // a batch: split or pad, never truncate
        out << (r.want > to ? "split the batch into calls of at most " + std::to_string(to)
                            : "pad the batch to " + std::to_string(to) + " and drop the padded rows' outputs")
            << " on the host\n";
      else
        out << "pad or truncate " << r.want << " to " << to << " on the host (the padded positions are computed too; "
            << "truncation drops data)\n";
    }
    return;
  }
  const std::vector<int64_t>& want = shapes[r0.input];
  const std::vector<int64_t> target = image_target(m, shapes, r0.input);
  const bool dynamic = t0.axes[2].dim >= 0 || t0.axes[3].dim >= 0;
  std::string target_flag;  // a dynamic program: the runner fits the frame to --input_shapes
  for (size_t i = 0; dynamic && i < shapes.size(); ++i) {
    const std::vector<int64_t>& s = i == r0.input ? target : shapes[i];
    target_flag += i ? "," : " --input_shapes=";
    for (size_t k = 0; k < s.size(); ++k) target_flag += (k ? "x" : "") + std::to_string(s[k]);
  }
  const double fh = static_cast<double>(want[2]), fw = static_cast<double>(want[3]);
  const double th = static_cast<double>(target[2]), tw = static_cast<double>(target[3]);
  const double fit = std::min(th / fh, tw / fw), cover = std::max(th / fh, tw / fw);
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.0f%% of the input is padding; the frame is scaled by %.3f", 100.0 * (1.0 - fit * fh * fit * fw / (th * tw)), fit);
  out << "   kiln_runner --model_path=" << program_path << " --image=FRAME" << target_flag << " --preprocess=letterbox   ("
      << buf << ")\n";
  std::snprintf(buf, sizeof buf, "%.0f%% of the frame is cut away", 100.0 * (1.0 - th * tw / (cover * fh * cover * fw)));
  out << "   ... --preprocess=crop   (" << buf << ")   or --preprocess=resize (the aspect changes by "
      << (tw / fw) / (th / fh) << ")\n";
  out << "   (Python: kiln.image.preprocess(FRAME, (" << target[2] << ", " << target[3] << "), mode=...))\n";
}

// The export flags of ways out 2 and 3: every input with its refused axes made dynamic (or
// pinned at the asked size), and the dims that widen to admit the asked sizes.
struct ReExport {
  std::vector<std::string> dynamic_inputs;  // "name=a,b,..." per input
  std::vector<exporter::DimArg> dims;
};

ReExport re_export(const MethodMeta& meta, const std::vector<Refused>& refused) {
  ReExport e;
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    const TensorSpec& t = meta.inputs[i];
    std::string dyn;
    for (size_t k = 0; k < t.axes.size(); ++k) {
      auto it = std::find_if(refused.begin(), refused.end(), [&](const Refused& r) { return r.input == i && r.axis == k; });
      const std::string sep = k ? "," : "";
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

// Way out 3 as one kiln export --bucket command. Buckets go over one dim: the refused axes must
// ask for one size and hold one size now (H = W both 224 -> 256 become one dim S); otherwise it
// says why buckets do not fit these shapes.
std::string bucket_command(const MethodMeta& meta, const std::vector<Refused>& refused, const std::string& model) {
  const Refused& r0 = refused.front();
  std::string name = axis_name(meta.inputs[r0.input], meta, r0.axis);
  bool one_dim = true;
  for (const Refused& r : refused)
    one_dim = one_dim && r.want == r0.want && r.have_max == r0.have_max && r.have_min == r0.have_min;
  if (!one_dim)
    return "(buckets go over one dim; these shapes differ from the program's on axes of different sizes: a bounded dim "
           "(2.) or a separate static export per shape)";
  const bool shared_name = std::all_of(refused.begin(), refused.end(), [&](const Refused& r) {
    return axis_name(meta.inputs[r.input], meta, r.axis) == name;
  });
  if (!shared_name) name = "S";
  std::string inputs;
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    const TensorSpec& t = meta.inputs[i];
    if (t.axes.empty()) continue;
    std::string axes;
    for (size_t k = 0; k < t.axes.size(); ++k) {
      const bool hit = std::any_of(refused.begin(), refused.end(), [&](const Refused& r) { return r.input == i && r.axis == k; });
      axes += (k ? "," : "") + (hit ? name : t.axes[k].dim >= 0 ? meta.dims[static_cast<size_t>(t.axes[k].dim)].name
                                                                : std::to_string(t.axes[k].size));
    }
    inputs += " --input " + t.name + "=" + axes;
  }
  std::string dims;
  for (const DimSpec& d : meta.dims)
    if (d.name != name) dims += " --dim " + d.name + "=" + std::to_string(d.min) + ".." + std::to_string(d.max);
  const int64_t have = r0.have_min == r0.have_max ? r0.have_max : (r0.want > r0.have_max ? r0.have_max : r0.have_min);
  const int64_t lo = std::min(have, r0.want), hi = std::max(have, r0.want);
  return "kiln export " + model + " -o OUT.kiln" + inputs + dims + " --bucket " + name + "=" + std::to_string(lo) + "," +
         std::to_string(hi) + "   (add every size you ship)";
}

// kiln check --explain on a bucketed method: which bucket runs, or the ways out when the dim
// is above the largest bucket.
int explain_buckets(const Program& program, const std::string& method, const std::vector<std::vector<int64_t>>& shapes,
                    const std::string& model_path, std::ostream& out) {
  auto b = BucketedMethod::create(program, method);
  if (!b.ok()) return out << "error: " << b.status().message() << "\n", 2;
  const BucketSpec& spec = (*b)->spec();
  Status s = (*b)->bind_shapes(shapes);
  if (s.ok()) return out << "ok: bucket '" << (*b)->last_bucket() << "' of method '" << method << "' runs; nothing to explain\n", 0;
  out << "no: " << s.message() << "\n";
  auto chosen = (*b)->select(shapes);
  if (chosen.ok())
    return out << "(bucket '" << spec.bucket_methods[*chosen] << "' fits " << spec.dim << "; its own contract refuses the "
               << "other axes: kiln check FILE --method_name=" << spec.bucket_methods[*chosen] << " --explain)\n", 1;
  if (s.code() != Code::kOutOfRange) return 1;
  const BucketSpec::Axis& a = spec.inputs.front();
  const int64_t want = shapes[static_cast<size_t>(a.index)][static_cast<size_t>(a.axis)];
  std::string sizes;
  for (int64_t v : spec.sizes) sizes += std::to_string(v) + ",";
  const std::string model = model_path.empty() ? "MODEL.onnx" : model_path;
  out << "three ways out for method '" << method << "' (buckets over " << spec.dim << ": " << sizes.substr(0, sizes.size() - 1)
      << "):\n"
      << "1. on the host: truncate input '" << a.tensor << "' axis " << a.axis << " to " << spec.sizes.back()
      << " (or split it into pieces of at most " << spec.sizes.back() << " when the model allows)\n"
      << "2. a larger bucket, the others kept:\n   kiln export " << model << " -o OUT.kiln ... --bucket " << spec.dim << "="
      << sizes << want << "\n"
      << "3. a bounded dynamic dim instead of buckets:\n   kiln export " << model << " -o OUT.kiln ... --dim " << spec.dim
      << "=1.." << want << "\n   (... : the other --input/--dim flags of the export that made this program)\n";
  return 1;
}

}  // namespace

int explain(const Program& program, const std::string& program_path, const std::string& method,
            const std::vector<std::vector<int64_t>>& shapes, const std::string& model_path, std::ostream& out) {
  if (!program.method_meta(method).ok() && BucketedMethod::has_buckets(program, method))
    return explain_buckets(program, method, shapes, model_path, out);
  auto m = Method::create(program, method);
  if (!m.ok()) return out << "error: " << m.status().message() << "\n", 2;
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
  const ReExport e = re_export(meta, refused);
  const std::string model = model_path.empty() ? "MODEL.onnx" : model_path;
  out << "2. a bounded dynamic dim (one program for every size in the range):\n   kiln export " << model
      << " -o OUT.kiln" << flags(e.dynamic_inputs, e.dims) << "\n";
  out << "3. buckets (one static method per size in one file, called as one method; the smallest that fits runs):\n   "
      << bucket_command(meta, refused, model) << "\n";
  if (model_path.empty()) {
    out << "   (costs: give --model=MODEL.onnx and each export is tried: arena at the bound, file size)\n";
    return 1;
  }
  out << "costs (trial exports of " << model_path << "):\n   2. " << trial_export(model_path, method, e.dynamic_inputs, e.dims)
      << "\n";
  return 1;
}

}  // namespace kiln::tools
