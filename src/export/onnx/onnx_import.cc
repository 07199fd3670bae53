// The ONNX importer: a ModelProto's graph into a GraphBuilder under the shape contract the
// options state (inputs, dims, consts), node by node through each op's shape function, with
// the ops Kiln resolves at export (Constant, Identity, Dropout, NonZero, Compress, Unique) and
// the fusions of fuse_patterns.h. Control flow is in onnx_control_flow.cc; what export does
// with the graph (emit, delegate, arena limits, buckets) in export/pipeline.cc.
#include "export/onnx/onnx_import.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "export/graph.h"
#include "export/onnx/batch_norm_fold.h"
#include "export/onnx/contrib_ops.h"
#include "export/onnx/fuse_patterns.h"
#include "export/onnx/qdq_fold.h"
#include "export/onnx/importer.h"
#include "export/onnx/onnx_proto.h"
#include "core/status.h"

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
  KILN_ASSIGN_OR_RETURN(size_t contrib, rewrite_contrib_ops(&graph));
  report_->contrib_rewritten += contrib;
  KILN_ASSIGN_OR_RETURN(size_t bn_folded, fold_batch_norms(&graph));
  report_->removed_nodes += bn_folded;
  if (opts_.fuse) {
    KILN_ASSIGN_OR_RETURN(size_t qdq_removed, fold_qdq(&graph, &report_->qdq_folded));
    report_->removed_nodes += qdq_removed;
    KILN_ASSIGN_OR_RETURN(report_->retyped_u8, retype_u8_activations(&graph));
    size_t dyn_removed = 0;
    KILN_ASSIGN_OR_RETURN(report_->dynamic_matmuls_folded, fold_dynamic_matmuls(&graph, &dyn_removed));
    report_->removed_nodes += dyn_removed;
  }
  KILN_TRY(check_supported(graph));
  g_.set_rewrites(opts_.fuse);  // --no-fusion keeps a channel shuffle's Transpose too
  if (opts_.fuse) {
    std::vector<FusionMiss> misses;
    fusions_ = find_fusions(graph, opset_, &misses);
    auto node_text = [&](int i) {
      const onnx::NodeProto& n = graph.node(i);
      return "'" + (n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name()) + "' (" + n.op_type() + ")";
    };
    for (const FusionMiss& m : misses)
      report_->fusion_misses.push_back(m.op + " from " + node_text(m.anchor) + ": stopped at " + node_text(m.stop) + ": " + m.why);
  }
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
    case DType::kI8: { KILN_ASSIGN_OR_RETURN(id, g_.add_constant(name, dtype, {}, std::vector<int8_t>{static_cast<int8_t>(v)})); break; }
    case DType::kU8: { KILN_ASSIGN_OR_RETURN(id, g_.add_constant(name, dtype, {}, std::vector<uint8_t>{static_cast<uint8_t>(v)})); break; }
  }
  names_[name] = id;
  return ok_status();
}

// ---- nodes -----------------------------------------------------------------------------
Status Importer::check_supported(const onnx::GraphProto& graph) {
  // Grouped by op type (a quantized model repeats a few types hundreds of times): each type
  // with its count and its first node names, in the order the types first appear.
  constexpr size_t kNamesShown = 3;
  std::vector<std::pair<std::string, std::vector<std::string>>> missing;
  size_t nodes = 0;
  for (const onnx::NodeProto& n : graph.node()) {
    bool known_domain = n.domain().empty() || n.domain() == "ai.onnx";
    // Kiln's own instructions (KilnIf, ...) are made by export, never read from a model.
    const bool internal = n.op_type().rfind("Kiln", 0) == 0;
    if (known_domain && !internal && (kImporterOps.count(n.op_type()) || kernels::find_op(n.op_type().c_str()))) continue;
    const std::string type = (known_domain ? "" : n.domain() + ".") + n.op_type();
    auto it = std::find_if(missing.begin(), missing.end(), [&](const auto& m) { return m.first == type; });
    if (it == missing.end()) it = missing.insert(missing.end(), {type, {}});
    it->second.push_back(n.name());
    ++nodes;
  }
  if (missing.empty()) return ok_status();
  std::string msg = "unsupported ops in " + std::to_string(nodes) + " node(s) of " + std::to_string(missing.size()) + " type(s): ";
  for (size_t i = 0; i < missing.size(); ++i) {
    const auto& [type, names] = missing[i];
    msg += (i ? "; " : "") + type + " x" + std::to_string(names.size()) + " (";
    for (size_t k = 0; k < names.size() && k < kNamesShown; ++k) msg += (k ? ", '" : "'") + names[k] + "'";
    msg += names.size() > kNamesShown ? ", ...)" : ")";
  }
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
    if (xs.empty() || !p.is_const_value(xs.back(), f.channels)) {
      report_->fusion_misses.push_back(f.op + " from '" + first + "': matched, but x's last axis is not statically " +
                                       std::to_string(f.channels) + " (Scale's length)");
      return false;
    }
  } else if (f.op == "Gelu") {
    if (static_cast<int>(xs.size()) < f.const_rank) return false;  // a constant would add axes
  } else if (!attention_shapes_agree(f, inputs)) {
    report_->fusion_misses.push_back(f.op + " from '" + first + "': matched, but the symbolic shapes of Q, K, V and the masks "
                                     "do not agree as the fused op needs (one rank, the same batch axes, D and Lk matching)");
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

Result<std::vector<int>> Importer::lookup_inputs(const onnx::NodeProto& n, const std::string& name) {
  std::vector<int> ids;
  for (const std::string& in : n.input()) {
    if (in.empty()) {  // an omitted optional input
      ids.push_back(-1);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int id, lookup(in, name));
    ids.push_back(id);
  }
  return ids;
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
  if (op == "NonMaxSuppression") return import_nms(n, name);
  if (op == "TopK" && k_from_data(n)) return import_topk_from_data(n, name);
  if (op == "Loop") return import_loop(n, name);
  if (op == "Scan") return import_scan(n, name);
  if (op == "SequenceEmpty" || op == "SequenceInsert" || op == "ConcatFromSequence") return import_sequence_op(n, name);
  KILN_ASSIGN_OR_RETURN(core::AttrStore attrs, attrs_from_node(n));
  KILN_ASSIGN_OR_RETURN(std::vector<int> inputs, lookup_inputs(n, name));
  if (op == "QuantizeLinear" || op == "DequantizeLinear")  // the QDQ form's scales are the model's constants
    for (size_t k = 1; k < inputs.size() && k < 3; ++k)
      if (inputs[k] >= 0 && !g_.is_constant(inputs[k]))
        return invalid_argument("node '" + name + "' (" + op + "): its " + (k == 1 ? "scale" : "zero point") +
                                " (input #" + std::to_string(k) + ") is computed while executing; Kiln takes a quantized "
                                "model's scales and zero points as constants");
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
// (DimSpec::data) bounded by the input's element count, known once the instruction runs.
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

// TopK's K sizes its outputs. Known at export (a constant, or computed from sizes, e.g.
// torchvision's min(1000, n) over a NonZero's count n), it takes the generic path. Read from
// the data, it is a data-dependent dim bounded by the axis's largest size (or the contract's
// --dim topk=..N); the outputs are reserved at that bound and take the K found.
bool Importer::k_from_data(const onnx::NodeProto& n) const {
  if (n.input_size() < 2 || n.input(1).empty()) return false;
  auto it = names_.find(n.input(1));
  if (it == names_.end() || g_.is_constant(it->second)) return false;
  const std::vector<core::ExprId>& v = g_.sym_values(it->second);
  return v.size() != 1 || v[0] == core::kNoExpr;
}

Status Importer::import_topk_from_data(const onnx::NodeProto& n, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(int x, lookup(n.input(0), name));
  KILN_ASSIGN_OR_RETURN(int k, lookup(n.input(1), name));
  KILN_ASSIGN_OR_RETURN(core::AttrStore a, attrs_from_node(n));
  const std::vector<core::ExprId>& xs = g_.shape(x);
  int64_t axis = a.view().get_int("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(xs.size());
  const int64_t most = axis >= 0 && axis < static_cast<int64_t>(xs.size()) ? g_.pool().range(xs[static_cast<size_t>(axis)]).hi : 0;
  KILN_ASSIGN_OR_RETURN(int d, data_dim("topk", most, name));
  a.set_int("dim", d);
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, g_.add_op("TopK", name, {x, k}, a, static_cast<size_t>(n.output_size())));
  for (int j = 0; j < n.output_size(); ++j)
    if (!n.output(j).empty()) names_[n.output(j)] = outs[static_cast<size_t>(j)];
  return ok_status();
}

// NonMaxSuppression's count of kept boxes is a data-dependent dim bounded by batch x classes x
// min(max_output_boxes_per_class, boxes) at their largest (a max_output_boxes_per_class that
// is not a constant counts as every box), or by the contract's --dim nms=..N.
Status Importer::import_nms(const onnx::NodeProto& n, const std::string& name) {
  if (n.input_size() < 2 || n.input_size() > 5 || n.output_size() != 1)
    return invalid_argument("node '" + name + "' (NonMaxSuppression) takes 2 to 5 inputs and gives 1 output");
  KILN_ASSIGN_OR_RETURN(std::vector<int> ins, lookup_inputs(n, name));
  KILN_ASSIGN_OR_RETURN(core::AttrStore a, attrs_from_node(n));
  auto most = [&](int v, size_t axis) {
    const std::vector<core::ExprId>& s = g_.shape(v);
    return axis < s.size() ? std::max<int64_t>(0, g_.pool().range(s[axis]).hi) : 0;
  };
  int64_t per_class = most(ins[0], 1);
  if (ins.size() > 2 && ins[2] >= 0) {
    const std::vector<uint8_t>* m = g_.constant_bytes(ins[2]);
    int64_t v = 0;
    if (m && m->size() == sizeof v && g_.dtype(ins[2]) == DType::kI64) {
      std::memcpy(&v, m->data(), sizeof v);
      per_class = std::min(per_class, std::max<int64_t>(0, v));
    }
  } else {
    per_class = 0;  // absent: no box is kept
  }
  int64_t bound = 0;
  if (__builtin_mul_overflow(most(ins[0], 0), most(ins[1], 1), &bound) || __builtin_mul_overflow(bound, per_class, &bound))
    bound = INT64_MAX;
  KILN_ASSIGN_OR_RETURN(int d, data_dim("nms", bound, name));
  a.set_int("dim", d);
  KILN_ASSIGN_OR_RETURN(int out, g_.add("NonMaxSuppression", name, ins, a));
  names_[n.output(0)] = out;
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
  if (op == "RoiAlign" && opset_ < 16 && !attrs->view().has("coordinate_transformation_mode"))
    attrs->set_str("coordinate_transformation_mode", "output_half_pixel");  // RoiAlign-10 has no -0.5 shift
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
    const DimSpec& d = pool.dims()[c.dims[0]];
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

/// Reads the model into a fresh ModelProto.
using ReadModel = std::function<Status(onnx::ModelProto*)>;

// The pipeline with an ONNX model as its import step. Import changes the graph it reads
// (BatchNormalization folded), so each import reads the model again, except the first: it
// takes the model read up front (a file that cannot be read is the first error).
Result<ExportReport> export_model(const ReadModel& read, const std::string& model_path, const ExportOptions& opts,
                                  format::ProgramDesc* program) {
  auto first = std::make_unique<onnx::ModelProto>();
  KILN_TRY(read(first.get()));
  const ImportGraph import = [&](const ExportOptions& o, GraphBuilder* g, ExportReport* report) -> Status {
    std::unique_ptr<onnx::ModelProto> model = std::move(first);
    if (!model) {
      model = std::make_unique<onnx::ModelProto>();
      KILN_TRY(read(model.get()));
    }
    if (!model->has_graph() || model->graph().output_size() == 0)
      return data_loss("'" + model_path + "' has no graph outputs: not an ONNX model, or an empty one");
    return Importer(o, *g, report).run(*model);
  };
  return run_export(import, opts, program);
}

}  // namespace

Result<ExportReport> export_onnx(const std::string& model_path, const ExportOptions& opts, format::ProgramDesc* program) {
  const ReadModel read = [&](onnx::ModelProto* model) { return read_model_file(model_path, model); };
  return export_model(read, model_path, opts, program);
}

Result<ExportReport> export_onnx_bytes(const void* data, size_t size, const ExportOptions& opts, format::ProgramDesc* program) {
  const ReadModel parse = [&](onnx::ModelProto* model) -> Status {
    if (size > static_cast<size_t>(INT32_MAX) || !model->ParseFromArray(data, static_cast<int>(size)))
      return data_loss("the bytes are not a readable ONNX model");
    return ok_status();
  };
  return export_model(parse, "<buffer>", opts, program);
}

}  // namespace kiln::exporter
