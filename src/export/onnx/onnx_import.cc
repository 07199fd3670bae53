// The ONNX importer: a ModelProto's graph into a GraphBuilder under the shape contract the
// options state (inputs, dims, consts), node by node through each op's shape function, with
// the ops Kiln resolves at export (Constant, Identity, Dropout, NonZero, Compress, Unique) and
// the fusions of fuse_patterns.h. Control flow is in onnx_control_flow.cc. Then what export
// does with the graph: emit, delegate, arena limits, buckets.
#include "export/onnx/onnx_import.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "core/bytes.h"
#include "export/graph.h"
#include "export/memory_plan.h"
#include "export/xnnpack_partition.h"
#include "export/onnx/batch_norm_fold.h"
#include "export/onnx/fuse_patterns.h"
#include "export/onnx/importer.h"
#include "export/onnx/onnx_proto.h"

namespace kiln::exporter {

namespace {

// Ops the importer resolves itself instead of passing to the registry.
const std::set<std::string> kImporterOps = {"Constant", "Identity", "Dropout", "If", "NonZero", "Compress", "Unique", "Loop", "Scan",
                                             "SequenceEmpty", "SequenceInsert", "ConcatFromSequence"};

/// Half and double precision compute as float32 inside Kiln (their weights are converted at
/// export), but a graph input or output keeps the type its caller exchanges: a contract
/// never says f32 where the model says float16.
Status check_io_type(const onnx::ValueInfoProto& v, const char* what) {
  const int32_t t = v.type().has_tensor_type() ? v.type().tensor_type().elem_type() : 0;
  if (t != onnx::TensorProto::FLOAT16 && t != onnx::TensorProto::DOUBLE) return ok_status();
  const char* name = t == onnx::TensorProto::FLOAT16 ? "float16" : "double";
  return unimplemented(std::string(what) + " '" + v.name() + "' is " + name + "; Kiln exchanges float32 (its " + name +
                       " weights and casts compute in float32): export the model with float32 inputs and outputs, "
                       "e.g. onnxconverter_common's convert_float_to_float16(model, keep_io_types=True)");
}

}  // namespace

Status Importer::run(onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
  report_->opset = opset_;
  // Opsets 19-21 change the ops Kiln runs by adding types and modes (Pad wrap, GridSample's
  // names, GroupNormalization's per-channel scale, AveragePool's dilations); each kernel
  // refuses what it does not implement.
  if (opset_ < 7 || opset_ > 21)
    return unimplemented("the model uses ONNX opset " + std::to_string(opset_) + "; Kiln imports opsets 7 to 21");
  onnx::GraphProto& graph = *model.mutable_graph();
  report_->onnx_nodes = static_cast<size_t>(graph.node_size());
  KILN_ASSIGN_OR_RETURN(size_t bn_folded, fold_batch_norms(&graph));
  report_->removed_nodes += bn_folded;
  KILN_TRY(check_supported(graph));
  if (opts_.fuse) fusions_ = find_fusions(graph, opset_);
  for (const onnx::TensorProto& t : graph.initializer()) {
    KILN_ASSIGN_OR_RETURN(HostTensor h, tensor_from_proto(t, "initializer '" + t.name() + "'"));
    KILN_ASSIGN_OR_RETURN(int id, g_.add_constant(t.name(), h.dtype, h.shape, h.bytes.data(), h.bytes.size()));
    names_[t.name()] = id;
  }
  KILN_TRY(add_inputs(graph));
  KILN_TRY(import_nodes(graph, true));
  if (!data_bounds_.empty())
    return invalid_argument("--dim names '" + data_bounds_.begin()->first +
                            "', which no input axis uses and no data-dependent size (NonZero's, Compress's, Unique's) takes");
  for (const onnx::ValueInfoProto& o : graph.output()) {
    KILN_TRY(check_io_type(o, "output"));
    auto it = names_.find(o.name());
    if (it == names_.end()) return invalid_argument("graph output '" + o.name() + "' is produced by no node");
    KILN_TRY(g_.mark_output(it->second, o.name()));
  }
  KILN_TRY(check_specializations());
  KILN_ASSIGN_OR_RETURN(std::vector<DimNarrowing> narrowed, g_.narrow_dims());
  for (const DimNarrowing& n : narrowed) report_->narrowed.push_back(n.text());
  return ok_status();
}

// ---- contract ------------------------------------------------------------------------
// The contract's inputs: each from --input or as the model declares it, its dynamic axes
// bounded by --dim (or pinned); a scalar input --const names becomes a constant. Every
// problem found is reported at once, before anything is added.
Status Importer::add_inputs(const onnx::GraphProto& graph) {
  std::set<std::string> inits;
  for (const auto& t : graph.initializer()) inits.insert(t.name());
  InputContract c;
  for (const DimArg& d : opts_.dims)
    if (!c.dims.emplace(d.name, d).second) c.errors.push_back("--dim '" + d.name + "' is given more than once");
  for (const onnx::ValueInfoProto& in : graph.input()) {
    if (inits.count(in.name())) continue;
    c.known_inputs.insert(in.name());
    if (!in.type().has_tensor_type()) return unimplemented("input '" + in.name() + "' is not a tensor");
    DType dtype;
    KILN_TRY(check_io_type(in, "input"));
    if (!onnx_dtype(in.type().tensor_type().elem_type(), &dtype))
      return unimplemented("input '" + in.name() + "' has an element type Kiln does not support");
    auto cst = std::find_if(opts_.consts.begin(), opts_.consts.end(), [&](auto& k) { return k.first == in.name(); });
    if (cst != opts_.consts.end()) {
      KILN_TRY(add_const_input(in.name(), dtype, cst->second));
      continue;
    }
    std::vector<std::string> spec;
    if (!input_spec(in, &c, &spec)) continue;
    c.inputs.push_back({in.name(), dtype, input_axes(in.name(), spec, &c)});
  }
  check_flag_names(&c);
  if (!c.errors.empty()) {
    std::string msg = c.errors.size() == 1 ? c.errors[0] : std::to_string(c.errors.size()) + " problems with the shape contract:";
    if (c.errors.size() > 1)
      for (const std::string& e : c.errors) msg += "\n  " + e;
    return invalid_argument(msg);
  }
  for (const std::string& d : c.used_dims) {
    const DimArg& a = c.dims[d];
    if (!a.pinned) KILN_TRY(g_.add_dim(a.name, a.min, a.max, a.step));
  }
  for (InputContract::Input& p : c.inputs) {
    KILN_ASSIGN_OR_RETURN(int id, g_.add_input(p.name, p.dtype, p.axes));
    names_[p.name] = id;
  }
  return ok_status();
}

// Input `in`'s axes as text: from its --input (a size or a dim name each), else as the model
// declares them ("?" for an axis with neither). False when there are none to read.
bool Importer::input_spec(const onnx::ValueInfoProto& in, InputContract* c, std::vector<std::string>* spec) {
  auto given = std::find_if(opts_.inputs.begin(), opts_.inputs.end(), [&](auto& p) { return p.first == in.name(); });
  const bool has_shape = in.type().tensor_type().has_shape();
  const auto& shape = in.type().tensor_type().shape();
  if (given != opts_.inputs.end()) {
    *spec = split_x_axes(given->second, [&](const std::string& s) { return c->dims.count(s) > 0; });
    if (has_shape && shape.dim_size() != static_cast<int>(spec->size()))
      c->errors.push_back("--input " + in.name() + " gives " + std::to_string(spec->size()) + " axes but the model declares rank " +
                          std::to_string(shape.dim_size()));
    return true;
  }
  if (!has_shape) {
    c->errors.push_back("input '" + in.name() + "' has no declared shape; give one with --input " + in.name() + "=D0,D1,...");
    return false;
  }
  for (int k = 0; k < shape.dim_size(); ++k) {
    const auto& d = shape.dim(k);
    if (d.has_dim_value()) {
      spec->push_back(std::to_string(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      spec->push_back(d.dim_param());
    } else {
      c->errors.push_back("input '" + in.name() + "' axis " + std::to_string(k) +
                          " has neither a size nor a name in the model; give it with --input " + in.name() + "=D0,D1,...");
      spec->push_back("?");
    }
  }
  return true;
}

// The axes `spec` states for `input`: sizes, dims bounded by a --dim (pinned ones as sizes).
std::vector<Axis> Importer::input_axes(const std::string& input, const std::vector<std::string>& spec, InputContract* c) {
  std::vector<Axis> axes;
  for (size_t k = 0; k < spec.size(); ++k) {
    const std::string& s = spec[k];
    if (is_size_text(s)) {
      axes.emplace_back(std::stoll(s));
      continue;
    }
    if (s == "?") continue;
    if (s[0] == '-' || std::isdigit(static_cast<unsigned char>(s[0]))) {
      c->errors.push_back("input '" + input + "' axis " + std::to_string(k) + " has size " + s +
                          ", which is neither a size (up to 15 digits) nor a dim name");
      continue;
    }
    auto it = c->dims.find(s);
    if (it == c->dims.end()) {
      c->errors.push_back("input '" + input + "' axis " + std::to_string(k) + " is dynamic ('" + s +
                          "') but has no bound; add --dim " + s + "=MIN..MAX (or --dim " + s + "=V to pin it)");
      continue;
    }
    c->used_dims.insert(s);
    if (it->second.pinned) {
      axes.emplace_back(it->second.min);
    } else {
      axes.emplace_back(s);
    }
  }
  return axes;
}

// --input and --const flags that name no input; a --dim no input axis uses bounds a
// data-dependent size (NonZero's, ...), checked after import, unless the contract is refused.
void Importer::check_flag_names(InputContract* c) {
  std::set<std::string> given_inputs;
  for (const auto& [name, axes] : opts_.inputs) given_inputs.insert(name);
  for (const std::string& n : given_inputs)
    if (!c->known_inputs.count(n)) c->errors.push_back("--input names '" + n + "', which is not an input of the model");
  for (const auto& [n, v] : opts_.consts)
    if (!c->known_inputs.count(n)) c->errors.push_back("--const names '" + n + "', which is not an input of the model");
  for (const DimArg& d : opts_.dims)
    if (!c->used_dims.count(d.name)) data_bounds_[d.name] = d;
  if (!c->errors.empty())  // the contract is refused before import: a data-dependent size cannot claim these
    for (const auto& [n, d] : data_bounds_) c->errors.push_back("--dim names '" + n + "', which no input axis uses");
}

Status Importer::add_const_input(const std::string& name, DType dtype, const std::string& text) {
  KILN_ASSIGN_OR_RETURN(const double v, parse_const_value(name, text));
  int id = -1;
  switch (dtype) {
    case DType::kF32: { KILN_ASSIGN_OR_RETURN(id, g_.add_constant(name, dtype, {}, std::vector<float>{static_cast<float>(v)})); break; }
    case DType::kI64: { KILN_ASSIGN_OR_RETURN(id, g_.add_constant(name, dtype, {}, std::vector<int64_t>{static_cast<int64_t>(v)})); break; }
    case DType::kI32: { KILN_ASSIGN_OR_RETURN(id, g_.add_constant(name, dtype, {}, std::vector<int32_t>{static_cast<int32_t>(v)})); break; }
    case DType::kBool: { KILN_ASSIGN_OR_RETURN(id, g_.add_constant(name, dtype, {}, std::vector<uint8_t>{v != 0})); break; }
  }
  names_[name] = id;
  return ok_status();
}

// ---- nodes -----------------------------------------------------------------------------
Status Importer::check_supported(const onnx::GraphProto& graph) {
  std::vector<std::string> missing;
  for (const onnx::NodeProto& n : graph.node()) {
    bool known_domain = n.domain().empty() || n.domain() == "ai.onnx";
    // Kiln's own instructions (KilnIf, ...) are made by export, never read from a model.
    const bool internal = n.op_type().rfind("Kiln", 0) == 0;
    if (known_domain && !internal && (kImporterOps.count(n.op_type()) || kernels::find_op(n.op_type().c_str()))) continue;
    missing.push_back("'" + n.name() + "' (" + (known_domain ? "" : n.domain() + ".") + n.op_type() + ")");
  }
  if (missing.empty()) return ok_status();
  std::string msg = "unsupported ops in " + std::to_string(missing.size()) + " node(s): ";
  for (size_t i = 0; i < missing.size(); ++i) msg += (i ? ", " : "") + missing[i];
  return unimplemented(msg + "; Kiln's op list is src/kernels/portable/ops.inc");
}

/// `main`: the model's graph (where fusions_ apply), not an inlined If branch. A fusion
/// candidate's nodes are imported as they come; at its last node (where every operand it
/// reads exists) the fused instruction replaces that node when the shapes allow, and the
/// chain's other instructions, read by nothing else, are dropped as dead at emit.
Status Importer::import_nodes(const onnx::GraphProto& graph, bool main) {
  std::map<int, const FusionCandidate*> at_last;
  if (main)
    for (const FusionCandidate& f : fusions_) at_last[f.nodes.back()] = &f;
  int counter = 0;
  for (const onnx::NodeProto& n : graph.node()) {
    const int index = counter++;
    std::string name = (n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name()) + iteration_suffix_;
    auto f = at_last.find(index);
    if (f != at_last.end()) {
      KILN_ASSIGN_OR_RETURN(bool taken, import_fusion(graph, *f->second));
      if (taken) continue;
    }
    KILN_TRY(import_node(n, name));
  }
  return ok_status();
}

/// FusedAttention's operands structurally as the fused op needs them (no new guards): one
/// rank, the same batch axes, D and Lk matching, the Softmax over the last axis, and post
/// tensors that broadcast onto the scores without growing them.
bool Importer::attention_shapes_agree(const FusionCandidate& f, const std::vector<int>& in) {
  core::ExprPool& p = g_.pool();
  const auto& q = g_.shape(in[0]);
  const auto& k = g_.shape(in[1]);
  const auto& v = g_.shape(in[2]);
  const size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r || g_.dtype(in[1]) != DType::kF32 || g_.dtype(in[2]) != DType::kF32)
    return false;
  if (f.softmax_axis != -1 && f.softmax_axis != static_cast<int64_t>(r) - 1) return false;
  for (size_t a = 0; a + 2 < r; ++a)
    if (q[a] != k[a] || q[a] != v[a]) return false;
  const bool kt = f.attrs.view().get_int("k_transposed", 1) != 0;
  const core::ExprId d = kt ? k[r - 2] : k[r - 1], lk = kt ? k[r - 1] : k[r - 2];
  if (q[r - 1] != d || lk != v[r - 2]) return false;
  std::vector<core::ExprId> scores(q.begin(), q.end() - 1);
  scores.push_back(lk);
  for (size_t i = 3; i < in.size(); ++i) {
    const auto& s = g_.shape(in[i]);
    if (s.size() > r) return false;
    for (size_t a = 0; a < s.size(); ++a)
      if (!p.is_const_value(s[a], 1) && s[a] != scores[r - s.size() + a]) return false;
  }
  return true;
}

/// Adds candidate `f` as one instruction when the symbolic shapes allow it (see
/// fuse_patterns.h); false leaves its nodes to be imported one by one.
Result<bool> Importer::import_fusion(const onnx::GraphProto& graph, const FusionCandidate& f) {
  const std::string first = graph.node(f.nodes[0]).name();
  std::vector<int> inputs;
  for (const std::string& in : f.inputs) {
    auto it = names_.find(in);
    if (it == names_.end()) return false;
    inputs.push_back(it->second);
  }
  if (g_.dtype(inputs[0]) != DType::kF32) return false;
  core::ExprPool& p = g_.pool();
  const std::vector<core::ExprId>& xs = g_.shape(inputs[0]);
  if (f.op == "LayerNormalization") {
    if (xs.empty() || !p.is_const_value(xs.back(), f.channels)) return false;
  } else if (f.op == "Gelu") {
    if (static_cast<int>(xs.size()) < f.const_rank) return false;  // a constant would add axes
  } else if (!attention_shapes_agree(f, inputs)) {
    return false;
  }
  // Named after the first node's scope: "/layers.0/ln1/ReduceMean" -> "/layers.0/ln1/LayerNormalization".
  const std::string base = first.rfind('/') != std::string::npos ? first.substr(0, first.rfind('/') + 1) + f.op : f.op;
  std::string name = base;
  for (int k = 2; fused_names_.count(name); ++k) name = base + "#" + std::to_string(k);
  fused_names_.insert(name);
  std::vector<std::string> from;
  for (int i : f.nodes) from.push_back(graph.node(i).name().empty() ? graph.node(i).op_type() + "_" + std::to_string(i) : graph.node(i).name());
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, g_.add_op(f.op, name, inputs, f.attrs, 1, from));
  names_[f.out] = outs[0];
  report_->fusions.push_back(f.op + " '" + name + "' <- " + std::to_string(f.nodes.size()) + " nodes");
  report_->fused_nodes += f.nodes.size();
  return true;
}

Result<int> Importer::lookup(const std::string& value, const std::string& node) {
  auto it = names_.find(value);
  if (it == names_.end()) return invalid_argument("node '" + node + "' reads '" + value + "', which nothing produces");
  return it->second;
}

Status Importer::import_node(const onnx::NodeProto& n, const std::string& name) {
  const std::string& op = n.op_type();
  for (const std::string& out : n.output()) producers_[out] = &n;
  // The ops imported here read their operands by position (the rest: each kernel's shape
  // function counts them); found by fuzz_onnx: a Constant with no output.
  struct Arity {
    const char* op;
    int inputs, outputs;
  };
  static const Arity kOwn[] = {{"Constant", 0, 1}, {"Identity", 1, 1}, {"Dropout", 1, 1}, {"If", 1, 1}, {"NonZero", 1, 1},
                               {"Loop", 2, 0}, {"Scan", 1, 1}};
  for (const Arity& a : kOwn)
    if (op == a.op && (n.input_size() < a.inputs || n.output_size() < a.outputs))
      return invalid_argument("node '" + name + "' (" + op + "): expects at least " + std::to_string(a.inputs) +
                              " inputs and " + std::to_string(a.outputs) + " outputs, got " +
                              std::to_string(n.input_size()) + " and " + std::to_string(n.output_size()));
  if (op == "Constant") return import_constant(n, name);
  if (op == "Identity" || op == "Dropout") {
    KILN_ASSIGN_OR_RETURN(int in, lookup(n.input(0), name));
    names_[n.output(0)] = in;
    if (op == "Dropout") KILN_TRY(import_dropout_extras(n, name, in));
    ++report_->removed_nodes;
    return ok_status();
  }
  if (op == "If") return import_if(n, name);
  if (op == "NonZero") return import_nonzero(n, name);
  if (op == "Compress") return import_compress(n, name);
  if (op == "Unique") return import_unique(n, name);
  if (op == "Loop") return import_loop(n, name);
  if (op == "Scan") return import_scan(n, name);
  if (op == "SequenceEmpty" || op == "SequenceInsert" || op == "ConcatFromSequence") return import_sequence_op(n, name);
  KILN_ASSIGN_OR_RETURN(core::AttrStore attrs, attrs_from_node(n));
  std::vector<int> inputs;
  for (const std::string& in : n.input()) {
    if (in.empty()) {
      inputs.push_back(-1);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int id, lookup(in, name));
    inputs.push_back(id);
  }
  std::string kernel_op = op;
  adapt_to_opset(kernel_op, &inputs, &attrs);
  // Trailing optional outputs that nobody names are still produced (the op decides).
  size_t num_outputs = static_cast<size_t>(n.output_size());
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, g_.add_op(kernel_op, name, inputs, attrs, num_outputs));
  for (size_t k = 0; k < num_outputs; ++k)
    if (!n.output(static_cast<int>(k)).empty()) names_[n.output(static_cast<int>(k))] = outs[k];
  return ok_status();
}

// NonZero's output size depends on the input's values: its count is a data-dependent dim
// (DimInfo::data) bounded by the input's element count, known once the instruction runs.
// One case is known at export: torch before opset 11 lowers arange(n) to
// NonZero(ConstantOfShape([n], value != 0)), whose result is [[0, 1, ..., n-1]]; it becomes
// Unsqueeze(Range(0, n, 1)), which shape math folds like any arange.
/// A data-dependent dim named `base` (or base2, ...) bounded by `max`, or by the contract's
/// `--dim NAME=..K` when it names this dim (no input axis uses that name).
Result<int> Importer::data_dim(const std::string& base, int64_t max, const std::string& node) {
  std::string name = base;
  for (int k = 2; g_.pool().find_dim(name) >= 0; ++k) name = base + std::to_string(k);
  auto bound = data_bounds_.find(name);
  if (bound != data_bounds_.end()) {
    if (bound->second.pinned || bound->second.step != 1)
      return invalid_argument("--dim '" + name + "' bounds node '" + node + "''s data-dependent size: give it as " + name +
                              "=..MAX (its value is known only while executing)");
    max = std::min(max, bound->second.max);
    data_bounds_.erase(bound);
  }
  return g_.add_data_dim(name, std::max<int64_t>(max, 0));
}

/// The most items an op over `x` selects from: the length of its `axis` attribute's axis,
/// or (no axis) every element; the largest over the contract.
int64_t Importer::most_items(int x, const core::Attrs& attrs) {
  const std::vector<core::ExprId>& xs = g_.shape(x);
  core::Interval items{1, 1};
  if (attrs.has("axis")) {
    int64_t axis = attrs.get_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(xs.size());
    if (axis >= 0 && axis < static_cast<int64_t>(xs.size())) items = g_.pool().range(xs[static_cast<size_t>(axis)]);
  } else {
    for (core::ExprId e : xs) items = core::node_range(core::ExprOp::kMul, items, g_.pool().range(e), 0);
  }
  return items.hi;
}

Status Importer::import_compress(const onnx::NodeProto& n, const std::string& name) {
  if (n.input_size() != 2 || n.output_size() != 1) return invalid_argument("node '" + name + "' (Compress) takes 2 inputs and gives 1 output");
  KILN_ASSIGN_OR_RETURN(int x, lookup(n.input(0), name));
  KILN_ASSIGN_OR_RETURN(int cond, lookup(n.input(1), name));
  KILN_ASSIGN_OR_RETURN(core::AttrStore a, attrs_from_node(n));
  // At most the condition's length, and the length of what it selects from.
  int64_t bound = g_.shape(cond).size() == 1 ? g_.pool().range(g_.shape(cond)[0]).hi : 0;
  KILN_ASSIGN_OR_RETURN(int d, data_dim("compress", std::min(bound, most_items(x, a.view())), name));
  a.set_int("dim", d);
  KILN_ASSIGN_OR_RETURN(int out, g_.add("Compress", name, {x, cond}, a));
  names_[n.output(0)] = out;
  return ok_status();
}

Status Importer::import_unique(const onnx::NodeProto& n, const std::string& name) {
  if (n.input_size() != 1 || n.output_size() < 1 || n.output_size() > 4)
    return invalid_argument("node '" + name + "' (Unique) takes 1 input and gives 1 to 4 outputs");
  KILN_ASSIGN_OR_RETURN(int x, lookup(n.input(0), name));
  KILN_ASSIGN_OR_RETURN(core::AttrStore a, attrs_from_node(n));
  KILN_ASSIGN_OR_RETURN(int d, data_dim("unique", most_items(x, a.view()), name));
  a.set_int("dim", d);
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, g_.add_op("Unique", name, {x}, a, static_cast<size_t>(n.output_size())));
  for (int k = 0; k < n.output_size(); ++k)
    if (!n.output(k).empty()) names_[n.output(k)] = outs[static_cast<size_t>(k)];
  return ok_status();
}

Status Importer::import_nonzero(const onnx::NodeProto& n, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(int x, lookup(n.input(0), name));
  auto data_dependent = [&]() -> Status {
    core::Interval count{1, 1};
    for (core::ExprId e : g_.shape(x)) count = core::node_range(core::ExprOp::kMul, count, g_.pool().range(e), 0);
    KILN_ASSIGN_OR_RETURN(const int d, data_dim("nonzero", count.hi, name));
    core::AttrStore a;
    a.set_int("dim", d);
    KILN_ASSIGN_OR_RETURN(int out, g_.add("NonZero", name, {x}, a));
    names_[n.output(0)] = out;
    return ok_status();
  };
  auto it = producers_.find(n.input(0));
  if (it == producers_.end() || it->second->op_type() != "ConstantOfShape" || it->second->input_size() < 1)
    return data_dependent();
  const onnx::NodeProto& fill = *it->second;
  bool nonzero = false;  // ConstantOfShape's default value is 0
  for (const onnx::AttributeProto& a : fill.attribute()) {
    if (a.name() != "value") continue;
    KILN_ASSIGN_OR_RETURN(HostTensor t, tensor_from_proto(a.t(), "node '" + fill.name() + "' (ConstantOfShape)"));
    if (t.dtype == DType::kF32) {
      float v = 0.f;
      if (t.bytes.size() == sizeof v) std::memcpy(&v, t.bytes.data(), sizeof v);
      nonzero = v != 0.f;
    } else {
      nonzero = std::any_of(t.bytes.begin(), t.bytes.end(), [](uint8_t b) { return b != 0; });
    }
  }
  KILN_ASSIGN_OR_RETURN(int dims, lookup(fill.input(0), name));
  const std::vector<core::ExprId>& ds = g_.shape(dims);
  if (!nonzero || ds.size() != 1 || !g_.pool().is_const_value(ds[0], 1)) return data_dependent();
  core::AttrStore axis0;
  axis0.set_ints("axes", {0});
  KILN_ASSIGN_OR_RETURN(int count, g_.add("Squeeze", name + "/count", {dims}, axis0));
  KILN_ASSIGN_OR_RETURN(int start, g_.add_constant(name + "/start", DType::kI64, {}, std::vector<int64_t>{0}));
  KILN_ASSIGN_OR_RETURN(int delta, g_.add_constant(name + "/delta", DType::kI64, {}, std::vector<int64_t>{1}));
  KILN_ASSIGN_OR_RETURN(int range, g_.add("Range", name + "/range", {start, count, delta}));
  KILN_ASSIGN_OR_RETURN(int out, g_.add("Unsqueeze", name, {range}, axis0));
  names_[n.output(0)] = out;
  return ok_status();
}

// Inference Dropout passes its input through; its optional mask output is then all true.
// training_mode true drops values at random unless the ratio is a constant 0 (torchvision's
// Swin calls dropout with training=True and p=0): refused otherwise.
Status Importer::import_dropout_extras(const onnx::NodeProto& n, const std::string& name, int in) {
  auto constant_nonzero = [&](const std::string& value, bool* nonzero) -> Status {
    KILN_ASSIGN_OR_RETURN(int id, lookup(value, name));
    const std::vector<uint8_t>* bytes = g_.constant_bytes(id);
    if (!bytes) return unimplemented("node '" + name + "' (Dropout): its ratio and training_mode must be constants");
    *nonzero = std::any_of(bytes->begin(), bytes->end(), [](uint8_t b) { return b != 0; });  // bool, or f32 0.0
    return ok_status();
  };
  bool training = false, dropping = true;  // the ratio defaults to 0.5
  if (n.input_size() > 2 && !n.input(2).empty()) KILN_TRY(constant_nonzero(n.input(2), &training));
  if (training && n.input_size() > 1 && !n.input(1).empty()) KILN_TRY(constant_nonzero(n.input(1), &dropping));
  if (training && dropping)
    return unimplemented("node '" + name +
                         "' (Dropout): training_mode is true with a non-zero ratio, so it drops values at random; "
                         "export the model in eval mode");
  if (n.output_size() < 2 || n.output(1).empty()) return ok_status();
  KILN_ASSIGN_OR_RETURN(int shape, g_.add("Shape", name + "/mask_shape", {in}));
  core::AttrStore ones;
  ones.set_ints("value", {1}).set_int("dtype", 9);  // bool true
  KILN_ASSIGN_OR_RETURN(int mask, g_.add("ConstantOfShape", name + "/mask", {shape}, ones));
  names_[n.output(1)] = mask;
  return ok_status();
}

// Semantics that changed across opsets, mapped onto one kernel.
void Importer::adapt_to_opset(std::string& op, std::vector<int>* inputs, core::AttrStore* attrs) {
  if (op == "Cast" || op == "CastLike") {  // half and double compute as float32 (see check_io_type)
    const int64_t to = attrs->view().get_int("to", -1);
    if (to == onnx::TensorProto::FLOAT16 || to == onnx::TensorProto::DOUBLE) attrs->set_int("to", onnx::TensorProto::FLOAT);
  }
  if ((op == "Softmax" || op == "LogSoftmax") && opset_ < 13) {
    attrs->set_int("coerce_2d", 1);
    if (!attrs->view().has("axis")) attrs->set_int("axis", 1);
  }
  if (op == "Resize" && opset_ == 10) {
    // Resize-10 is (X, scales) with Upsample's geometry: asymmetric coordinates, and the
    // nearest input is found by ONNX Runtime's "simple" rule (floor, ceil when shrinking).
    if (inputs->size() == 2) inputs->insert(inputs->begin() + 1, -1);  // (X, roi, scales)
    attrs->set_str("coordinate_transformation_mode", "asymmetric");
    attrs->set_str("nearest_mode", "simple");
  }
  if (op == "ConstantOfShape" && attrs->view().has("value_dtype")) attrs->set_int("dtype", attrs->view().get_int("value_dtype", 1));
}

Status Importer::import_constant(const onnx::NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    int id = -1;
    if (a.name() == "value") {
      KILN_ASSIGN_OR_RETURN(HostTensor t, tensor_from_proto(a.t(), "node '" + name + "' (Constant)"));
      KILN_ASSIGN_OR_RETURN(id, g_.add_constant(n.output(0), t.dtype, t.shape, t.bytes.data(), t.bytes.size()));
    } else if (a.name() == "value_float") {
      KILN_ASSIGN_OR_RETURN(id, g_.add_constant(n.output(0), DType::kF32, {}, std::vector<float>{a.f()}));
    } else if (a.name() == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      KILN_ASSIGN_OR_RETURN(id, g_.add_constant(n.output(0), DType::kF32, {static_cast<int64_t>(v.size())}, v));
    } else if (a.name() == "value_int") {
      KILN_ASSIGN_OR_RETURN(id, g_.add_constant(n.output(0), DType::kI64, {}, std::vector<int64_t>{a.i()}));
    } else if (a.name() == "value_ints") {
      std::vector<int64_t> v(a.ints().begin(), a.ints().end());
      KILN_ASSIGN_OR_RETURN(id, g_.add_constant(n.output(0), DType::kI64, {static_cast<int64_t>(v.size())}, v));
    } else {
      continue;
    }
    names_[n.output(0)] = id;
    ++report_->removed_nodes;
    return ok_status();
  }
  return unimplemented("node '" + name + "' (Constant) has no value Kiln can read (sparse or string constants are not supported)");
}

// A guard over one dim that only one value satisfies means the model forces that dim:
// report it as a specialization with its origin instead of exporting a contract that
// admits just one size. A guard no value satisfies is an error too.
Status Importer::check_specializations() {
  core::ExprPool& pool = g_.pool();
  for (const kernels::Guard& gd : g_.guards()) {
    core::ExprPool::Census c = pool.census(gd.lhs, static_cast<core::ExprPool::Relation>(gd.op), gd.rhs, 100000);
    if (!c.complete || c.dims.size() != 1) continue;
    const core::DimInfo& d = pool.dims()[c.dims[0]];
    std::string origin = "node '" + gd.node_name + "' (" + gd.op_type + ")";
    if (c.satisfied == 0)
      return invalid_argument("no value of dim '" + d.name + "' in [" + std::to_string(d.min) + ", " + std::to_string(d.max) +
                              "] satisfies what " + origin + " needs " + gd.context + "; widen or move the --dim range");
    if (c.satisfied == 1 && c.assignments > 1) {
      std::string v = std::to_string(c.last_solution[0]);
      return invalid_argument("dim '" + d.name + "' is specialized to " + v + " by " + origin +
                              (gd.context.empty() ? "" : " " + gd.context) + "; export with --dim " + d.name + "=" + v +
                              " to accept that, or change the model so it does not fix the size "
                              "(e.g. reshape with -1 or x.shape[0] instead of a literal)");
    }
  }
  return ok_status();
}

namespace {

/// For a guard `D % k == 0` on a bare dim D, the --dim that states it in the contract instead
/// (the multiples of lcm(step, k) within D's range); empty when there is none.
std::string step_hint(const core::ExprPool& pool, const kernels::Guard& g) {
  if (g.op != kernels::Guard::Op::kDivisible || !pool.is_const(g.rhs)) return "";
  const core::ExprNode& n = pool.node(g.lhs);
  if (n.op != core::ExprOp::kDim) return "";
  const core::DimInfo& d = pool.dims()[n.a];
  const int64_t k = pool.const_value(g.rhs);
  if (k <= 1 || k > (int64_t{1} << 30)) return "";
  const int64_t step = std::lcm(d.step, k), lo = (d.min + step - 1) / step * step, hi = d.max / step * step;
  if (lo > hi) return "";
  return "; to state it in the contract instead: --dim " + d.name + "=" + std::to_string(lo) + ".." +
         std::to_string(hi) + ":" + std::to_string(step);
}


}  // namespace

namespace {
/// Exports again under other options (without arena limits) and returns the arena at the bound:
/// how a suggested smaller bound is confirmed to fit.
using Reexport = std::function<Result<uint64_t>(const ExportOptions&)>;
Result<ExportReport> export_model(onnx::ModelProto& model, const std::string& model_path, const ExportOptions& opts,
                                  format::ProgramDesc* program, const Reexport& reexport = nullptr);
}  // namespace

Status read_model_file(const std::string& model_path, onnx::ModelProto* model) {
  std::error_code ec;
  const auto status = std::filesystem::status(model_path, ec);
  if (ec || !std::filesystem::exists(status)) return io_error("cannot open model '" + model_path + "': no such file");
  if (std::filesystem::is_directory(status)) return io_error("cannot read model '" + model_path + "': it is a directory");
  if (!std::filesystem::is_regular_file(status)) return io_error("cannot read model '" + model_path + "': not a regular file");
  if (std::filesystem::file_size(model_path, ec) == 0) return data_loss("'" + model_path + "' is empty, not an ONNX model");
  std::ifstream f(model_path, std::ios::binary);
  if (!f) return io_error("cannot open model '" + model_path + "'");
  if (!model->ParseFromIstream(&f)) return data_loss("'" + model_path + "' is not a readable ONNX model");
  return ok_status();
}

namespace {

// --bucket: a probe export with the dim dynamic over the sizes finds the axes that carry it;
// then one export per size with the dim pinned, each marked as a bucket.
Result<ExportReport> export_buckets(const onnx::ModelProto& model, const std::string& model_path, const ExportOptions& opts,
                                    format::ProgramDesc* program) {
  std::vector<int64_t> sizes = opts.bucket_sizes;
  std::sort(sizes.begin(), sizes.end());
  if (sizes.front() < 1 || std::adjacent_find(sizes.begin(), sizes.end()) != sizes.end())
    return invalid_argument("--bucket " + opts.bucket_dim + ": sizes must be positive and distinct");
  auto without_dim = [&](ExportOptions o) {
    o.bucket_sizes.clear();
    o.dims.erase(std::remove_if(o.dims.begin(), o.dims.end(), [&](const DimArg& d) { return d.name == opts.bucket_dim; }),
                 o.dims.end());
    return o;
  };
  ExportOptions probe = without_dim(opts);
  probe.dims.push_back({opts.bucket_dim, sizes.front(), sizes.back(), 1, false});
  probe.delegate = "none";
  probe.max_arena_bytes = probe.warn_arena_bytes = 0;  // each bucket is weighed, not the probe
  format::ProgramDesc scratch;
  onnx::ModelProto probe_model = model;
  KILN_TRY(export_model(probe_model, model_path, probe, &scratch).status());
  const format::MethodDesc& pm = scratch.methods.back();
  int dim = -1;
  for (size_t d = 0; d < pm.dims.size(); ++d)
    if (pm.dims[d].name == opts.bucket_dim) dim = static_cast<int>(d);
  if (dim < 0) return invalid_argument("--bucket names dim '" + opts.bucket_dim + "', which no input axis uses");
  format::BucketDesc bucket;
  bucket.of = opts.method_name;
  bucket.dim = opts.bucket_dim;
  auto axes_of = [&](const std::vector<int32_t>& ids, std::vector<int32_t>* out) {
    for (size_t i = 0; i < ids.size(); ++i) {
      const format::ValueDesc& v = pm.values[static_cast<size_t>(ids[i])];
      for (size_t k = 0; k < v.shape.size(); ++k) {
        const core::ExprNode& e = pm.exprs[static_cast<size_t>(v.shape[k])];
        if (e.op == core::ExprOp::kDim && e.a == dim) out->insert(out->end(), {static_cast<int32_t>(i), static_cast<int32_t>(k)});
      }
    }
  };
  axes_of(pm.inputs, &bucket.input_axes);
  axes_of(pm.outputs, &bucket.output_axes);
  std::vector<std::string> padded;
  for (int32_t id : pm.inputs) {
    const std::string& name = pm.values[static_cast<size_t>(id)].name;
    auto it = opts.pads.find(name);
    bucket.pads.push_back(it == opts.pads.end() ? 0.0 : it->second);
  }
  for (const auto& pad : opts.pads)
    if (std::none_of(pm.inputs.begin(), pm.inputs.end(), [&](int32_t id) { return pm.values[static_cast<size_t>(id)].name == pad.first; }))
      return invalid_argument("--pad names '" + pad.first + "', which is not an input");
  ExportReport report;
  std::string written;
  for (int64_t size : sizes) {
    ExportOptions o = without_dim(opts);
    o.dims.push_back({opts.bucket_dim, size, size, 1, true});
    o.method_name = opts.method_name + "@" + opts.bucket_dim + "=" + std::to_string(size);
    onnx::ModelProto copy = model;
    KILN_ASSIGN_OR_RETURN(report, export_model(copy, model_path, o, program));
    bucket.size = size;
    program->methods.back().bucket = bucket;
    written += (written.empty() ? "" : ", ") + o.method_name;
  }
  report.notes.push_back("buckets of '" + opts.method_name + "' over " + opts.bucket_dim + ": " + written +
                         " (the last one's summary above)");
  bool masked = false;
  for (int32_t id : pm.inputs) {
    std::string n = pm.values[static_cast<size_t>(id)].name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    masked = masked || n.find("mask") != std::string::npos;
  }
  if (!masked)
    report.notes.push_back("warning: no input looks like a mask, so padded positions are not masked out: outputs at a "
                           "padded length may differ from the same input unpadded; compare with a static export");
  return report;
}

}  // namespace

namespace {
// The arena at the bound of an export under `o`, without limits (a Reexport).
Result<uint64_t> unlimited_arena(onnx::ModelProto& model, const std::string& model_path, ExportOptions o) {
  o.max_arena_bytes = o.warn_arena_bytes = 0;
  format::ProgramDesc scratch;
  KILN_ASSIGN_OR_RETURN(ExportReport r, export_model(model, model_path, o, &scratch));
  return std::max(r.arena_bytes, r.delegate_arena_bytes);
}
}  // namespace

Result<ExportReport> export_onnx(const std::string& model_path, const ExportOptions& opts, format::ProgramDesc* program) {
  onnx::ModelProto model;
  KILN_TRY(read_model_file(model_path, &model));
  if (!opts.bucket_sizes.empty()) return export_buckets(model, model_path, opts, program);
  const Reexport reexport = [&](const ExportOptions& o) -> Result<uint64_t> {
    onnx::ModelProto fresh;
    KILN_TRY(read_model_file(model_path, &fresh));
    return unlimited_arena(fresh, model_path, o);
  };
  return export_model(model, model_path, opts, program, reexport);
}

Result<ExportReport> export_onnx_bytes(const void* data, size_t size, const ExportOptions& opts, format::ProgramDesc* program) {
  onnx::ModelProto model;
  if (size > static_cast<size_t>(INT32_MAX) || !model.ParseFromArray(data, static_cast<int>(size)))
    return data_loss("the bytes are not a readable ONNX model");
  const Reexport reexport = [&](const ExportOptions& o) -> Result<uint64_t> {
    onnx::ModelProto fresh;
    if (!fresh.ParseFromArray(data, static_cast<int>(size))) return data_loss("the bytes are not a readable ONNX model");
    return unlimited_arena(fresh, "<buffer>", o);
  };
  return export_model(model, "<buffer>", opts, program, reexport);
}

namespace {

// The larger of the method's arenas (portable, delegated) when every dim d is at most caps[d].
uint64_t arena_at(const format::MethodDesc& m, const std::vector<int64_t>& caps) {
  uint64_t a = std::min(m.arena_bytes, arena_at_caps(m, m.placement, caps));
  if (!m.delegate.backend.empty() && !m.delegate.regions.empty())
    a = std::max(a, std::min(m.delegate.arena_bytes, arena_at_caps(m, m.delegate.placement, caps)));
  return a;
}

// Each dim's smallest admissible value (min rounded up to its step).
int64_t lowest(const core::DimInfo& d) { return core::ceil_div(d.min, d.step) * d.step; }

// `--dim` flags a user can shrink: bounded dims of the contract that a --dim states.
std::vector<bool> shrinkable_dims(const format::MethodDesc& m, const ExportOptions& opts) {
  std::vector<bool> out(m.dims.size(), false);
  for (size_t d = 0; d < m.dims.size(); ++d)
    out[d] = !m.dims[d].data && m.dims[d].max > lowest(m.dims[d]) &&
             std::any_of(opts.dims.begin(), opts.dims.end(), [&](const DimArg& a) { return a.name == m.dims[d].name && !a.pinned; });
  return out;
}

// Smaller maxima for the dims, found by halving (on each dim's step grid) the dim whose halving
// shrinks the arena most (ties: the dim with the larger max), until the arena fits `limit`.
// `caps` starts at the bound; false when even every shrinkable dim at its minimum is over.
bool shrink_to_fit(const format::MethodDesc& m, const std::vector<bool>& shrinkable, uint64_t limit,
                   std::vector<int64_t>* caps) {
  uint64_t now = arena_at(m, *caps);
  for (int round = 0; now > limit && round < 4096; ++round) {
    int best = -1;
    uint64_t best_arena = 0;
    int64_t best_value = 0;
    for (size_t d = 0; d < caps->size(); ++d) {
      if (!shrinkable[d] || (*caps)[d] <= lowest(m.dims[d])) continue;
      const int64_t step = m.dims[d].step;
      const int64_t half = std::max(lowest(m.dims[d]), (*caps)[d] / 2 / step * step);
      std::vector<int64_t> trial = *caps;
      trial[d] = half;
      const uint64_t a = arena_at(m, trial);
      if (best < 0 || a < best_arena || (a == best_arena && (*caps)[d] > (*caps)[static_cast<size_t>(best)]))
        best = static_cast<int>(d), best_arena = a, best_value = half;
    }
    if (best < 0) return false;
    (*caps)[static_cast<size_t>(best)] = best_value;
    now = best_arena;
  }
  return now <= limit;
}

// What a contract costs: the arenas at the minimum for the summary, then the limits. Over
// `warn_arena_bytes` adds a warning, over `max_arena_bytes` refuses; both name the dims the
// arena grows with and a smaller bound that fits (confirmed by `reexport` when given).
Status weigh_arena(const format::MethodDesc& m, const ExportOptions& opts, const Reexport& reexport, ExportReport* report) {
  std::vector<int64_t> bound, minimum;
  for (const core::DimInfo& d : m.dims) bound.push_back(d.max), minimum.push_back(d.data ? d.max : lowest(d));
  report->arena_min_bytes = std::min(m.arena_bytes, arena_at_caps(m, m.placement, minimum));
  if (!m.delegate.backend.empty() && !m.delegate.regions.empty())
    report->delegate_arena_min_bytes = std::min(m.delegate.arena_bytes, arena_at_caps(m, m.delegate.placement, minimum));
  const uint64_t arena = arena_at(m, bound);
  const bool refuse = opts.max_arena_bytes && arena > opts.max_arena_bytes;
  const uint64_t warn_at = opts.max_arena_bytes ? std::min(opts.warn_arena_bytes, opts.max_arena_bytes) : opts.warn_arena_bytes;
  if (!refuse && !(warn_at && arena > warn_at)) return ok_status();
  const uint64_t limit = refuse ? opts.max_arena_bytes : warn_at;
  // Dims in the order the --dim flags give them, then the rest.
  std::vector<size_t> order;
  for (const DimArg& a : opts.dims)
    for (size_t d = 0; d < m.dims.size(); ++d)
      if (m.dims[d].name == a.name && std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  for (size_t d = 0; d < m.dims.size(); ++d)
    if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
  // The dims the arena grows with: at their minimum (the others at the bound) it is smaller.
  std::string responsible;
  for (size_t d : order) {
    if (m.dims[d].data || m.dims[d].max <= lowest(m.dims[d])) continue;
    std::vector<int64_t> one = bound;
    one[d] = lowest(m.dims[d]);
    if (arena_at(m, one) < arena)
      responsible += (responsible.empty() ? "" : ", ") + m.dims[d].name + "=" + std::to_string(m.dims[d].max);
  }
  const std::vector<bool> shrinkable = shrinkable_dims(m, opts);
  std::vector<int64_t> caps = bound;
  bool fits = shrink_to_fit(m, shrinkable, limit, &caps);
  std::string flags;
  uint64_t target = limit;
  for (int confirm = 0; fits && reexport && confirm < 3; ++confirm) {  // the plan a re-export makes at those bounds
    ExportOptions o = opts;
    for (DimArg& a : o.dims)
      for (size_t d = 0; d < m.dims.size(); ++d)
        if (a.name == m.dims[d].name && caps[d] != bound[d]) a.max = caps[d];
    Result<uint64_t> replanned = reexport(o);
    if (!replanned.ok() || *replanned <= limit) break;
    // The re-export planned more than this placement estimated: aim lower by that ratio.
    target = static_cast<uint64_t>(static_cast<double>(target) * static_cast<double>(limit) / static_cast<double>(*replanned));
    fits = shrink_to_fit(m, shrinkable, target, &caps);
  }
  for (size_t d : order)
    if (fits && caps[d] != bound[d])
      flags += (flags.empty() ? "" : " ") + std::string("--dim ") + m.dims[d].name + "=" + std::to_string(lowest(m.dims[d])) +
               ".." + std::to_string(caps[d]) + (m.dims[d].step > 1 ? ":" + std::to_string(m.dims[d].step) : "");
  const std::string what = refuse ? "the limit of " + core::human_bytes(limit) : "the warning threshold of " + core::human_bytes(limit);
  const std::string raise = refuse ? "raise --max-arena" : "raise --warn-arena";
  std::string text = "arena at the bound is " + core::human_bytes(arena) + (responsible.empty() ? "" : " (" + responsible + ")") +
                     ", over " + what + " (" + core::human_bytes(report->arena_min_bytes) + " at the minimum)";
  text += fits ? "; lower the bounds, e.g. " + flags + ", or " + raise
               : "; no smaller --dim bounds fit (the arena at the minimum is over it too): " + raise;
  if (refuse) return failed_precondition(text);
  report->warnings.push_back(text);
  return ok_status();
}

Result<ExportReport> export_model(onnx::ModelProto& model, const std::string& model_path, const ExportOptions& opts,
                                  format::ProgramDesc* program, const Reexport& reexport) {
  if (!model.has_graph() || model.graph().output_size() == 0)
    return data_loss("'" + model_path + "' has no graph outputs: not an ONNX model, or an empty one");
  ExportReport report;
  Importer imp(opts, &report);
  KILN_TRY(imp.run(model));
  GraphBuilder& g = imp.builder();
  KILN_ASSIGN_OR_RETURN(MethodStats stats, g.emit(program));
  format::MethodDesc& m = program->methods.back();
  if (opts.delegate == "xnnpack") {
    KILN_TRY(partition_xnnpack(&m, program->constants));
    const format::DelegateDesc& d = m.delegate;
    size_t delegated = 0;
    for (const auto& r : d.regions) delegated += static_cast<size_t>(r.count);
    report.coverage = coverage_line(d.backend, delegated, m.instructions.size(), d.delegated_flops, d.flops,
                                    d.regions.size(), d.layout_changes);
    std::vector<std::pair<std::string, std::string>> declined;
    for (const auto& x : d.declined) declined.emplace_back(m.instructions[x.instruction].op, x.reason);
    report.declined = group_declined(declined);
    report.delegate_arena_bytes = d.arena_bytes;
    report.delegate_lower_bound_bytes = d.lower_bound_bytes;
    const double share = d.flops ? static_cast<double>(d.delegated_flops) / static_cast<double>(d.flops) : 1.0;
    if (share < opts.require_coverage) {
      std::string list;
      for (const std::string& x : report.declined) list += "; " + x;
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.1f%% < required %.1f%%", 100 * share, 100 * opts.require_coverage);
      return failed_precondition(std::string("the xnnpack delegate covers ") + buf + " of FLOPs; declined" + list);
    }
  } else if (opts.delegate != "none") {
    return invalid_argument("unknown --delegate '" + opts.delegate + "'; use xnnpack or none");
  }
  report.instructions = stats.instructions;
  report.views = stats.views;
  report.folded_constant_nodes = g.folded_constant_nodes();
  report.folded_shape_nodes = g.folded_shape_nodes();
  report.arena_bytes = stats.arena_bytes;
  report.lower_bound_bytes = stats.lower_bound_bytes;
  report.constant_bytes = stats.constant_bytes;
  const core::ExprPool& pool = g.pool();
  report.contract_dims = pool.dims();
  for (const core::DimInfo& d : pool.dims())
    report.dims.push_back(d.name + " in [" + std::to_string(d.min) + ", " + std::to_string(d.max) + "]" +
                          (d.step > 1 ? " step " + std::to_string(d.step) : "") +
                          (d.data ? " (data-dependent: NonZero's count, known while executing)" : ""));
  for (int32_t id : m.inputs)
    report.inputs.push_back("'" + m.values[id].name + "' " + dtype_name(m.values[id].dtype) + " " + pool.shape_to_string(m.values[id].shape));
  for (int32_t id : m.outputs)
    report.outputs.push_back("'" + m.values[id].name + "' " + dtype_name(m.values[id].dtype) + " " + pool.shape_to_string(m.values[id].shape));
  for (const kernels::Guard& gd : m.guards) {
    std::string text = core::relation_text(pool.to_string(gd.lhs), static_cast<core::ExprPool::Relation>(gd.op),
                                           pool.to_string(gd.rhs));
    report.guards.push_back(text + "  (node '" + gd.node_name + "' (" + gd.op_type + ")" +
                            (gd.context.empty() ? "" : " " + gd.context) + ")" + step_hint(pool, gd));
  }
  for (const auto& in : m.instructions) ++report.ops[in.op];
  KILN_TRY(weigh_arena(m, opts, reexport, &report));
  return report;
}

}  // namespace

}  // namespace kiln::exporter
