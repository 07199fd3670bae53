#include "export/onnx/onnx_import.h"

#include <cstdio>

#include "export/xnnpack_partition.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/bytes.h"
#include "export/graph.h"
#include "export/memory_plan.h"
#include "export/onnx/batch_norm_fold.h"
#include "export/onnx/fuse_patterns.h"
#include "export/onnx/onnx_proto.h"

namespace kiln::exporter {

namespace {

// Ops the importer resolves itself instead of passing to the registry.
const std::set<std::string> kImporterOps = {"Constant", "Identity", "Dropout", "If", "NonZero", "Compress", "Unique", "Loop", "Scan",
                                             "SequenceEmpty", "SequenceInsert", "ConcatFromSequence"};

class Importer {
 public:
  Importer(const ExportOptions& opts, ExportReport* report) : opts_(opts), report_(report), g_(opts.method_name) {}

  Status run(onnx::ModelProto& model) {
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

  GraphBuilder& builder() { return g_; }

 private:
  // ---- contract ------------------------------------------------------------------------
  /// Half and double precision compute as float32 inside Kiln (their weights are converted at
  /// export), but a graph input or output keeps the type its caller exchanges: a contract
  /// never says f32 where the model says float16.
  static Status check_io_type(const onnx::ValueInfoProto& v, const char* what) {
    const int32_t t = v.type().has_tensor_type() ? v.type().tensor_type().elem_type() : 0;
    if (t != onnx::TensorProto::FLOAT16 && t != onnx::TensorProto::DOUBLE) return ok_status();
    const char* name = t == onnx::TensorProto::FLOAT16 ? "float16" : "double";
    return unimplemented(std::string(what) + " '" + v.name() + "' is " + name + "; Kiln exchanges float32 (its " + name +
                         " weights and casts compute in float32): export the model with float32 inputs and outputs, "
                         "e.g. onnxconverter_common's convert_float_to_float16(model, keep_io_types=True)");
  }

  Status add_inputs(const onnx::GraphProto& graph) {
    std::set<std::string> inits;
    for (const auto& t : graph.initializer()) inits.insert(t.name());
    std::map<std::string, DimArg> dim_args;
    std::vector<std::string> errors;
    for (const DimArg& d : opts_.dims)
      if (!dim_args.emplace(d.name, d).second) errors.push_back("--dim '" + d.name + "' is given more than once");
    std::set<std::string> used_dims, given_inputs, known_inputs;
    for (const auto& [name, axes] : opts_.inputs) given_inputs.insert(name);
    struct Pending { std::string name; DType dtype; std::vector<Axis> axes; };
    std::vector<Pending> pending;
    for (const onnx::ValueInfoProto& in : graph.input()) {
      if (inits.count(in.name())) continue;
      known_inputs.insert(in.name());
      if (!in.type().has_tensor_type()) return unimplemented("input '" + in.name() + "' is not a tensor");
      DType dtype;
      KILN_TRY(check_io_type(in, "input"));
      if (!onnx_dtype(in.type().tensor_type().elem_type(), &dtype))
        return unimplemented("input '" + in.name() + "' has an element type Kiln does not support");
      auto cst = std::find_if(opts_.consts.begin(), opts_.consts.end(), [&](auto& c) { return c.first == in.name(); });
      if (cst != opts_.consts.end()) {
        KILN_TRY(add_const_input(in.name(), dtype, cst->second));
        continue;
      }
      std::vector<std::string> spec;
      auto given = std::find_if(opts_.inputs.begin(), opts_.inputs.end(), [&](auto& p) { return p.first == in.name(); });
      const auto& shape = in.type().tensor_type().shape();
      if (given != opts_.inputs.end()) {
        spec = given->second;
        // "1x3xHxW", the runtime's syntax, reads as "1,3,H,W" when each part is a size or a --dim.
        spec = split_x_axes(spec, [&](const std::string& s) { return dim_args.count(s) > 0; });
        if (in.type().tensor_type().has_shape() && shape.dim_size() != static_cast<int>(spec.size()))
          errors.push_back("--input " + in.name() + " gives " + std::to_string(spec.size()) + " axes but the model declares rank " +
                           std::to_string(shape.dim_size()));
      } else {
        if (!in.type().tensor_type().has_shape()) {
          errors.push_back("input '" + in.name() + "' has no declared shape; give one with --input " + in.name() + "=D0,D1,...");
          continue;
        }
        for (int k = 0; k < shape.dim_size(); ++k) {
          const auto& d = shape.dim(k);
          if (d.has_dim_value()) {
            spec.push_back(std::to_string(d.dim_value()));
          } else if (d.has_dim_param() && !d.dim_param().empty()) {
            spec.push_back(d.dim_param());
          } else {
            errors.push_back("input '" + in.name() + "' axis " + std::to_string(k) +
                             " has neither a size nor a name in the model; give it with --input " + in.name() + "=D0,D1,...");
            spec.push_back("?");
          }
        }
      }
      Pending p{in.name(), dtype, {}};
      for (size_t k = 0; k < spec.size(); ++k) {
        const std::string& s = spec[k];
        if (is_size_text(s)) {
          p.axes.emplace_back(std::stoll(s));
          continue;
        }
        if (s == "?") continue;
        if (s[0] == '-' || std::isdigit(static_cast<unsigned char>(s[0]))) {
          errors.push_back("input '" + in.name() + "' axis " + std::to_string(k) + " has size " + s +
                           ", which is neither a size (up to 15 digits) nor a dim name");
          continue;
        }
        auto it = dim_args.find(s);
        if (it == dim_args.end()) {
          errors.push_back("input '" + in.name() + "' axis " + std::to_string(k) + " is dynamic ('" + s +
                           "') but has no bound; add --dim " + s + "=MIN..MAX (or --dim " + s + "=V to pin it)");
          continue;
        }
        used_dims.insert(s);
        if (it->second.pinned) {
          p.axes.emplace_back(it->second.min);
        } else {
          p.axes.emplace_back(s);
        }
      }
      pending.push_back(std::move(p));
    }
    for (const std::string& n : given_inputs)
      if (!known_inputs.count(n)) errors.push_back("--input names '" + n + "', which is not an input of the model");
    for (const auto& [n, v] : opts_.consts)
      if (!known_inputs.count(n)) errors.push_back("--const names '" + n + "', which is not an input of the model");
    for (const DimArg& d : opts_.dims)  // else a bound on a data-dependent size (NonZero's, ...), checked after import
      if (!used_dims.count(d.name)) data_bounds_[d.name] = d;
    if (!errors.empty())  // the contract is refused before import: a data-dependent size cannot claim these
      for (const auto& [n, d] : data_bounds_) errors.push_back("--dim names '" + n + "', which no input axis uses");
    if (!errors.empty()) {
      std::string msg = errors.size() == 1 ? errors[0] : std::to_string(errors.size()) + " problems with the shape contract:";
      if (errors.size() > 1)
        for (const std::string& e : errors) msg += "\n  " + e;
      return invalid_argument(msg);
    }
    for (const std::string& d : used_dims) {
      const DimArg& a = dim_args[d];
      if (!a.pinned) KILN_TRY(g_.add_dim(a.name, a.min, a.max, a.step));
    }
    for (Pending& p : pending) {
      KILN_ASSIGN_OR_RETURN(int id, g_.add_input(p.name, p.dtype, p.axes));
      names_[p.name] = id;
    }
    return ok_status();
  }

  Status add_const_input(const std::string& name, DType dtype, const std::string& text) {
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

  // ---- ops -------------------------------------------------------------------------------
  Status check_supported(const onnx::GraphProto& graph) {
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
  Status import_nodes(const onnx::GraphProto& graph, bool main = false) {
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
  bool attention_shapes_agree(const FusionCandidate& f, const std::vector<int>& in) {
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
  Result<bool> import_fusion(const onnx::GraphProto& graph, const FusionCandidate& f) {
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

  Result<int> lookup(const std::string& value, const std::string& node) {
    auto it = names_.find(value);
    if (it == names_.end()) return invalid_argument("node '" + node + "' reads '" + value + "', which nothing produces");
    return it->second;
  }

  Status import_node(const onnx::NodeProto& n, const std::string& name) {
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
  Result<int> data_dim(const std::string& base, int64_t max, const std::string& node) {
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
  int64_t most_items(int x, const core::Attrs& attrs) {
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

  Status import_compress(const onnx::NodeProto& n, const std::string& name) {
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

  Status import_unique(const onnx::NodeProto& n, const std::string& name) {
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

  Status import_nonzero(const onnx::NodeProto& n, const std::string& name) {
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
  Status import_dropout_extras(const onnx::NodeProto& n, const std::string& name, int in) {
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
  void adapt_to_opset(std::string& op, std::vector<int>* inputs, core::AttrStore* attrs) {
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

  Status import_constant(const onnx::NodeProto& n, const std::string& name) {
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

  // ---- Loop and Scan with a trip count known at export: unrolled ---------------------------
  // Each iteration imports the body once more (its nodes named "<node>@<i>"), binding the
  // body's inputs to this iteration's values; scan outputs are stacked along their axis. A
  // trip count that depends on the input shapes or data, or a Loop that stops on a computed
  // condition, is refused with what would have to be static.

  static constexpr int64_t kMaxUnrolledNodes = 200000;

  const onnx::GraphProto* body_of(const onnx::NodeProto& n) {
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "body" && a.has_g()) return &a.g();
    return nullptr;
  }

  /// A one-element integer or bool value known at export, or false.
  bool const_scalar(int id, int64_t* v) {
    const std::vector<uint8_t>* bytes = g_.constant_bytes(id);
    if (bytes && bytes->size() == 8 && g_.dtype(id) == DType::kI64) return std::memcpy(v, bytes->data(), 8), true;
    if (bytes && bytes->size() == 4 && g_.dtype(id) == DType::kI32) {
      int32_t x;
      std::memcpy(&x, bytes->data(), 4);
      return *v = x, true;
    }
    if (bytes && bytes->size() == 1 && g_.dtype(id) == DType::kBool) return *v = (*bytes)[0] != 0, true;
    const std::vector<core::ExprId>& sv = g_.sym_values(id);
    if (sv.size() == 1 && g_.pool().is_const(sv[0])) return *v = g_.pool().const_value(sv[0]), true;
    return false;
  }

  /// True unless the Loop body's condition output is a constant true or its condition input
  /// passed through (torch's `for` loops); unrolling needs the full trip count.
  static bool body_condition_computed(const onnx::GraphProto& body) {
    if (body.output_size() < 1 || body.input_size() < 2) return true;
    const std::string& out = body.output(0).name();
    if (out == body.input(1).name()) return false;
    for (const onnx::NodeProto& n : body.node()) {
      bool makes = false;
      for (const std::string& o : n.output()) makes = makes || o == out;
      if (!makes) continue;
      if (n.op_type() == "Identity" && n.input_size() == 1 && n.input(0) == body.input(1).name()) return false;
      if (n.op_type() != "Constant") return true;
      for (const onnx::AttributeProto& a : n.attribute())
        if (a.name() == "value" && a.t().data_type() == onnx::TensorProto::BOOL &&
            ((a.t().int32_data_size() == 1 && a.t().int32_data(0) != 0) || (a.t().raw_data().size() == 1 && a.t().raw_data()[0] != 0)))
          return false;
      return true;
    }
    for (const onnx::TensorProto& t : body.initializer())
      if (t.name() == out) return false;  // a constant initializer: checked when unrolled
    return true;
  }

  /// Imports `body` once with its inputs bound to `inputs`; returns its outputs' values.
  /// Iteration `i` of an unrolled loop names its nodes with "@i"; -1: a runtime loop's body.
  Result<std::vector<int>> import_iteration(const onnx::GraphProto& body, const std::vector<int>& inputs, const std::string& name,
                                            int64_t i) {
    if (body.input_size() != static_cast<int>(inputs.size()))
      return invalid_argument("node '" + name + "': its body takes " + std::to_string(body.input_size()) + " inputs, expected " +
                              std::to_string(inputs.size()));
    for (size_t k = 0; k < inputs.size(); ++k)
      if (inputs[k] >= 0) names_[body.input(static_cast<int>(k)).name()] = inputs[k];  // -1: a list (sequences_)
    const std::string saved = iteration_suffix_;
    if (i >= 0) iteration_suffix_ += "@" + std::to_string(i);
    Status st = import_nodes(body);
    iteration_suffix_ = saved;
    KILN_TRY(st);
    std::vector<int> outs;
    for (const onnx::ValueInfoProto& o : body.output()) {
      if (sequences_.count(o.name()) && !names_.count(o.name())) {  // a list: the loop reads it from sequences_
        outs.push_back(-1);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(int id, lookup(o.name(), name));
      outs.push_back(id);
    }
    return outs;
  }

  Status add_body_constants(const onnx::GraphProto& body) {
    KILN_TRY(check_supported(body));
    for (const onnx::TensorProto& t : body.initializer()) {
      KILN_ASSIGN_OR_RETURN(HostTensor h, tensor_from_proto(t, "initializer '" + t.name() + "'"));
      KILN_ASSIGN_OR_RETURN(int id, g_.add_constant(t.name(), h.dtype, h.shape, h.bytes.data(), h.bytes.size()));
      names_[t.name()] = id;
    }
    return ok_status();
  }

  /// values[0..n) stacked along a new axis `axis` (Unsqueeze each, then Concat).
  Result<int> stack(const std::vector<int>& values, int64_t axis, const std::string& name) {
    core::AttrStore ax;
    ax.set_ints("axes", {axis});
    std::vector<int> parts;
    for (size_t i = 0; i < values.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(int u, g_.add("Unsqueeze", name + "/unsqueeze@" + std::to_string(i), {values[i]}, ax));
      parts.push_back(u);
    }
    if (parts.size() == 1) return parts[0];
    core::AttrStore cat;
    cat.set_int("axis", axis);
    return g_.add("Concat", name + "/stack", parts, cat);
  }

  Status check_unroll(const std::string& name, const char* op, int64_t trips, const onnx::GraphProto& body) {
    if (trips < 1 || trips * std::max(1, body.node_size()) > kMaxUnrolledNodes)
      return unimplemented("node '" + name + "' (" + op + "): " + std::to_string(trips) + " iterations of a " +
                           std::to_string(body.node_size()) + "-node body; Kiln unrolls from 1 iteration up to " +
                           std::to_string(kMaxUnrolledNodes) + " nodes in all");
    report_->onnx_nodes += static_cast<size_t>(trips * body.node_size());
    ++report_->removed_nodes;
    return ok_status();
  }

  /// A runtime loop (GraphBuilder::begin_loop) of `body` over `trip` iterations: `init` the
  /// carried values (-1: a list the body appends to, torch's `ys.append(y)`), `cond` the
  /// initial condition; `body_inputs(iteration, slots)` gives the body's inputs (slots: -1 at
  /// the lists). Returns, per carried value, its final value (a list: -1, the stacked list in
  /// `stacked`), then the scan outputs ([trip, ...]). Refuses a body whose condition is
  /// computed when it has scan outputs or lists (their length would depend on the data).
  /// `reverse[k]`: scan output k is written from its last step back.
  Result<std::vector<int>> import_runtime_loop(const onnx::GraphProto& body, const std::string& name, const char* op,
                                               core::ExprId trip, int cond, const std::vector<int>& init,
                                               const std::function<Result<std::vector<int>>(int, const std::vector<int>&)>& body_inputs,
                                               size_t scan_outputs, const std::vector<int64_t>& reverse = {},
                                               std::vector<int>* stacked = nullptr) {
    KILN_TRY(add_body_constants(body));
    report_->onnx_nodes += static_cast<size_t>(body.node_size());
    ++report_->runtime_loops;
    std::vector<int> real_init;
    for (int v : init)
      if (v >= 0) real_init.push_back(v);
    const size_t lists = init.size() - real_init.size();
    KILN_ASSIGN_OR_RETURN(std::vector<int> state, g_.begin_loop(trip, cond, real_init, name));
    std::vector<int> slots;
    for (size_t k = 0, j = 1; k < init.size(); ++k) slots.push_back(init[k] >= 0 ? state[j++] : -1);
    KILN_ASSIGN_OR_RETURN(std::vector<int> ins, body_inputs(state[0], slots));
    KILN_ASSIGN_OR_RETURN(std::vector<int> outs, import_iteration(body, ins, name, -1));
    const bool computed_cond = std::string(op) == "Loop";
    int cond_out = -1;
    size_t at = 0;
    if (computed_cond) {
      cond_out = outs[at++];
      int64_t go = 0;
      if ((scan_outputs > 0 || lists > 0) && (!const_scalar(cond_out, &go) || !go))
        return unimplemented("node '" + name + "' (Loop): its body's condition is computed and it has scan outputs, whose "
                             "length would depend on the data; Kiln runs such loops without scan outputs");
    } else {
      KILN_ASSIGN_OR_RETURN(cond_out, g_.add_constant(name + "/go", DType::kBool, {}, std::vector<uint8_t>{1}));
    }
    std::vector<int> results, list_items;
    for (size_t k = 0; k < init.size(); ++k) {
      if (init[k] >= 0) {
        if (outs[at + k] < 0) return invalid_argument("node '" + name + "' (Loop): carried value " + std::to_string(k) + " becomes a list");
        results.push_back(outs[at + k]);
        continue;
      }
      // A list: the body must give back the list it read with one item appended.
      const std::string& out_name = body.output(static_cast<int>(at + k)).name();
      auto it = sequences_.find(out_name);
      if (it == sequences_.end() || it->second.kind != Sequence::kAppended || it->second.list != static_cast<int>(k))
        return unimplemented("node '" + name + "' (Loop): its body does not append exactly one item to the list it carries as value " +
                             std::to_string(k) + "; Kiln runs loops whose lists grow by one SequenceInsert at the end per iteration");
      list_items.push_back(it->second.value);
    }
    std::vector<int> scans(outs.begin() + static_cast<long>(at + init.size()), outs.end());
    std::vector<int64_t> rev = reverse;
    rev.resize(scans.size(), 0);
    scans.insert(scans.end(), list_items.begin(), list_items.end());
    rev.resize(scans.size(), 0);
    KILN_ASSIGN_OR_RETURN(std::vector<int> ends, g_.end_loop(cond_out, results, scans, rev));
    std::vector<int> final_values = slots;
    final_values.insert(final_values.end(), ends.begin() + 1, ends.end() - static_cast<long>(list_items.size()));
    if (stacked) {
      stacked->assign(init.size(), -1);
      for (size_t k = 0, j = ends.size() - list_items.size(); k < init.size(); ++k)
        if (init[k] < 0) (*stacked)[k] = ends[j++];
    }
    return final_values;
  }

  // Lists (ONNX sequences) as torch exports a list a loop appends to: SequenceEmpty before
  // the loop, SequenceInsert at the end of its body, ConcatFromSequence after it (stack or
  // cat). The list becomes one of the loop's scan outputs; other uses of sequences are refused.
  struct Sequence {
    enum Kind { kEmpty, kInBody, kAppended, kStacked } kind = kEmpty;
    int list = -1;   ///< kInBody, kAppended: which carried value of the loop being imported
    int value = -1;  ///< kAppended: the item appended; kStacked: the items stacked on a new axis 0
  };
  std::unordered_map<std::string, Sequence> sequences_;

  Status import_sequence_op(const onnx::NodeProto& n, const std::string& name) {
    const std::string& op = n.op_type();
    auto refuse = [&](const std::string& why) {
      return unimplemented("node '" + name + "' (" + op + "): " + why +
                           "; Kiln runs lists only as a loop's body appends to them (torch's list.append in a loop), "
                           "stacked or concatenated after the loop");
    };
    if (n.output_size() < 1) return invalid_argument("node '" + name + "' (" + op + ") has no output");
    if (op == "SequenceEmpty") {
      if (n.input_size() > 0) return refuse("takes inputs");
      sequences_[n.output(0)] = Sequence{};
      return ok_status();
    }
    auto in = n.input_size() > 0 ? sequences_.find(n.input(0)) : sequences_.end();
    if (op == "SequenceInsert") {
      if (n.input_size() != 2) return refuse("inserts at a position");
      if (in == sequences_.end() || in->second.kind != Sequence::kInBody) return refuse("appends to a list a loop does not carry");
      KILN_ASSIGN_OR_RETURN(int item, lookup(n.input(1), name));
      sequences_[n.output(0)] = Sequence{Sequence::kAppended, in->second.list, item};
      return ok_status();
    }
    // ConcatFromSequence(list): axis, new_axis (1: stack, 0: concatenate).
    if (in == sequences_.end() || in->second.kind != Sequence::kStacked) return refuse("reads a list no loop made");
    KILN_ASSIGN_OR_RETURN(core::AttrStore a, attrs_from_node(n));
    const core::Attrs attrs = a.view();
    const int64_t new_axis = attrs.get_int("new_axis", 0), axis = attrs.get_int("axis", 0);
    const int stacked = in->second.value;
    const int64_t r = static_cast<int64_t>(g_.shape(stacked).size());  // the items' rank + 1
    const int64_t ax = axis < 0 ? axis + (new_axis ? r : r - 1) : axis;
    if (ax < 0 || ax >= (new_axis ? r : r - 1)) return invalid_argument("node '" + name + "' (ConcatFromSequence): axis out of range");
    KILN_ASSIGN_OR_RETURN(int y, move_axis0(stacked, ax, name + "/axis"));  // the list's axis to `ax`
    if (!new_axis) {  // concatenate: merge the list's axis with the items' axis `ax`
      std::vector<core::ExprId> shape = g_.shape(y);
      std::vector<core::ExprId> merged(shape.begin(), shape.begin() + ax);
      merged.push_back(g_.pool().mul(shape[static_cast<size_t>(ax)], shape[static_cast<size_t>(ax) + 1]));
      merged.insert(merged.end(), shape.begin() + ax + 2, shape.end());
      KILN_ASSIGN_OR_RETURN(int to, g_.add_sym_ints(merged, name + "/shape"));
      KILN_ASSIGN_OR_RETURN(y, g_.add("Reshape", name, {y, to}));
    }
    names_[n.output(0)] = y;
    return ok_status();
  }

  Status import_loop(const onnx::NodeProto& n, const std::string& name) {
    const onnx::GraphProto* body = body_of(n);
    if (!body) return invalid_argument("node '" + name + "' (Loop) has no body");
    const int carried = n.input_size() - 2;
    if (body->output_size() < 1 + carried || n.output_size() != body->output_size() - 1 || body->input_size() != 2 + carried)
      return invalid_argument("node '" + name + "' (Loop): its body's inputs and outputs do not match the node's");
    int64_t trips = -1;
    core::ExprId trip_expr = core::kNoExpr;
    if (!n.input(0).empty()) {
      KILN_ASSIGN_OR_RETURN(int m, lookup(n.input(0), name));
      const std::vector<core::ExprId>& sv = g_.sym_values(m);
      if (!const_scalar(m, &trips) && sv.size() == 1) trip_expr = sv[0];
      else if (trips < 0)
        return unimplemented("node '" + name + "' (Loop): its trip count '" + n.input(0) + "' is data, not a size of the "
                             "inputs; Kiln runs loops whose trip count the input shapes bound");
    }
    bool cond_const = true;
    int cond = -1;
    if (!n.input(1).empty()) {
      KILN_ASSIGN_OR_RETURN(cond, lookup(n.input(1), name));
      int64_t go = 0;
      cond_const = const_scalar(cond, &go) && go;
    }
    std::vector<int> state;
    bool lists = false;
    for (int k = 0; k < carried; ++k) {
      auto seq = sequences_.find(n.input(2 + k));
      if (seq != sequences_.end()) {
        if (seq->second.kind != Sequence::kEmpty)
          return unimplemented("node '" + name + "' (Loop): it carries a list that is not empty when it starts; Kiln runs loops "
                               "whose lists start empty (SequenceEmpty)");
        state.push_back(-1);
        lists = true;
        continue;
      }
      KILN_ASSIGN_OR_RETURN(int v, lookup(n.input(2 + k), name));
      state.push_back(v);
    }
    if (trips < 0 && trip_expr == core::kNoExpr)
      return unimplemented("node '" + name + "' (Loop) has no trip count: it runs until a computed condition; Kiln runs "
                           "loops whose trip count the input shapes bound");
    const bool unroll = trip_expr == core::kNoExpr && cond_const && trips >= 1 && !lists &&
                        trips * std::max(1, body->node_size()) <= kMaxUnrolledNodes && !body_condition_computed(*body);
    if (!unroll) {  // a runtime loop over the trip count (static, or an expression of the dims)
      if (trip_expr == core::kNoExpr) trip_expr = g_.pool().constant(trips);
      if (cond < 0) {
        KILN_ASSIGN_OR_RETURN(cond, g_.add_constant(name + "/cond", DType::kBool, {}, std::vector<uint8_t>{1}));
      }
      KILN_ASSIGN_OR_RETURN(int yes, g_.add_constant(name + "/cond_in", DType::kBool, {}, std::vector<uint8_t>{1}));
      std::vector<int> stacked;
      KILN_ASSIGN_OR_RETURN(std::vector<int> outs,
                            import_runtime_loop(*body, name, "Loop", trip_expr, cond, state,
                                                [&](int iter, const std::vector<int>& slots) -> Result<std::vector<int>> {
                                                  std::vector<int> ins = {iter, yes};
                                                  ins.insert(ins.end(), slots.begin(), slots.end());
                                                  for (size_t k = 0; k < slots.size(); ++k)  // a list the body appends to
                                                    if (slots[k] < 0)
                                                      sequences_[body->input(2 + static_cast<int>(k)).name()] =
                                                          Sequence{Sequence::kInBody, static_cast<int>(k), -1};
                                                  return ins;
                                                },
                                                static_cast<size_t>(n.output_size() - carried), {}, &stacked));
      for (int k = 0; k < n.output_size(); ++k) {
        if (n.output(k).empty()) continue;
        if (k < carried && stacked[static_cast<size_t>(k)] >= 0)
          sequences_[n.output(k)] = Sequence{Sequence::kStacked, -1, stacked[static_cast<size_t>(k)]};
        else
          names_[n.output(k)] = outs[static_cast<size_t>(k)];
      }
      return ok_status();
    }
    KILN_TRY(check_unroll(name, "Loop", trips, *body));
    KILN_TRY(add_body_constants(*body));
    KILN_ASSIGN_OR_RETURN(int yes, g_.add_constant(name + "/cond", DType::kBool, {}, std::vector<uint8_t>{1}));
    std::vector<std::vector<int>> scans(static_cast<size_t>(body->output_size() - 1 - carried));
    for (int64_t i = 0; i < trips; ++i) {
      KILN_ASSIGN_OR_RETURN(int iter, g_.add_constant(name + "/iter@" + std::to_string(i), DType::kI64, {}, std::vector<int64_t>{i}));
      std::vector<int> ins = {iter, yes};
      ins.insert(ins.end(), state.begin(), state.end());
      KILN_ASSIGN_OR_RETURN(std::vector<int> outs, import_iteration(*body, ins, name, i));
      int64_t go = 0;
      if (!const_scalar(outs[0], &go) || !go)
        return internal_error("node '" + name + "' (Loop): its body's condition is computed, yet it was unrolled");
      state.assign(outs.begin() + 1, outs.begin() + 1 + carried);
      for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(outs[1 + static_cast<size_t>(carried) + k]);
    }
    for (int k = 0; k < carried; ++k)
      if (!n.output(k).empty()) names_[n.output(k)] = state[static_cast<size_t>(k)];
    for (size_t k = 0; k < scans.size(); ++k) {
      KILN_ASSIGN_OR_RETURN(int st, stack(scans[k], 0, name + "/scan" + std::to_string(k)));
      if (!n.output(carried + static_cast<int>(k)).empty()) names_[n.output(carried + static_cast<int>(k))] = st;
    }
    return ok_status();
  }

  /// `v` with its axis 0 moved to `axis` (a Transpose; `v` itself when `axis` is 0).
  Result<int> move_axis0(int v, int64_t axis, const std::string& node_name) {
    if (axis == 0) return v;
    const int64_t r = static_cast<int64_t>(g_.shape(v).size());
    std::vector<int64_t> perm;
    for (int64_t a = 1; a <= axis; ++a) perm.push_back(a);
    perm.push_back(0);
    for (int64_t a = axis + 1; a < r; ++a) perm.push_back(a);
    core::AttrStore pa;
    pa.set_ints("perm", perm);
    return g_.add("Transpose", node_name, {v}, pa);
  }

  /// A Scan over a sequence of `len` steps as a runtime loop: each iteration gathers its
  /// step of every scan input (backwards where its direction says); the loop writes scan
  /// outputs backwards where theirs says, and a Transpose moves the steps to their axis.
  Status import_runtime_scan(const onnx::NodeProto& n, const onnx::GraphProto& body, const std::string& name, core::ExprId len,
                             const std::vector<int>& state, const std::vector<int>& scan_in, const std::vector<int64_t>& in_axes,
                             const std::vector<int64_t>& in_dirs, const std::vector<int64_t>& out_axes,
                             const std::vector<int64_t>& out_dirs) {
    KILN_ASSIGN_OR_RETURN(int go, g_.add_constant(name + "/cond", DType::kBool, {}, std::vector<uint8_t>{1}));
    int last = -1;  // len - 1, for inputs read backwards
    auto body_inputs = [&](int iter, const std::vector<int>& slots) -> Result<std::vector<int>> {
      std::vector<int> ins = slots;
      for (size_t j = 0; j < scan_in.size(); ++j) {
        int at = iter;
        if (in_dirs[j]) {
          if (last < 0) {
            KILN_ASSIGN_OR_RETURN(last, g_.add_sym_scalar(g_.pool().add(len, g_.pool().constant(-1)), name + "/last"));
          }
          KILN_ASSIGN_OR_RETURN(at, g_.add("Sub", name + "/back" + std::to_string(j), {last, iter}));
        }
        core::AttrStore ax;
        ax.set_int("axis", in_axes[j]);
        KILN_ASSIGN_OR_RETURN(int slice, g_.add("Gather", name + "/step" + std::to_string(j), {scan_in[j], at}, ax));
        ins.push_back(slice);
      }
      return ins;
    };
    const size_t k_out = out_axes.size();
    KILN_ASSIGN_OR_RETURN(std::vector<int> outs,
                          import_runtime_loop(body, name, "Scan", len, go, state, body_inputs, k_out, out_dirs));
    const size_t states = state.size();
    for (size_t k = 0; k < k_out; ++k) {
      int y = outs[states + k];
      const int64_t r = static_cast<int64_t>(g_.shape(y).size());
      const int64_t axis = out_axes[k] < 0 ? out_axes[k] + r : out_axes[k];
      if (axis < 0 || axis >= r) return invalid_argument("node '" + name + "' (Scan): scan output axis out of range");
      KILN_ASSIGN_OR_RETURN(y, move_axis0(y, axis, name + "/axis" + std::to_string(k)));  // the steps' axis to `axis`
      if (!n.output(static_cast<int>(states + k)).empty()) names_[n.output(static_cast<int>(states + k))] = y;
    }
    for (size_t k = 0; k < states; ++k)
      if (!n.output(static_cast<int>(k)).empty()) names_[n.output(static_cast<int>(k))] = outs[k];
    return ok_status();
  }

  Status import_scan(const onnx::NodeProto& n, const std::string& name) {
    if (opset_ < 9) return unimplemented("node '" + name + "' (Scan): opset 8's Scan (with sequence_lens) is not supported");
    const onnx::GraphProto* body = body_of(n);
    if (!body) return invalid_argument("node '" + name + "' (Scan) has no body");
    KILN_ASSIGN_OR_RETURN(core::AttrStore a, attrs_from_node(n));
    const core::Attrs attrs = a.view();
    const int64_t m = attrs.get_int("num_scan_inputs", -1);
    const int states = n.input_size() - static_cast<int>(m);
    if (m < 1 || states < 0 || body->input_size() != n.input_size() || body->output_size() != n.output_size() ||
        body->output_size() < states)
      return invalid_argument("node '" + name + "' (Scan): num_scan_inputs and its body's inputs and outputs do not match");
    auto list = [&](const char* key, size_t count) {
      std::vector<int64_t> v(count, 0);
      if (attrs.has(key) && attrs.ints_size(key) == count) std::copy(attrs.ints(key), attrs.ints(key) + count, v.begin());
      return v;
    };
    const size_t k_out = static_cast<size_t>(body->output_size() - states);
    for (const char* key : {"scan_input_axes", "scan_input_directions"})
      if (attrs.has(key) && attrs.ints_size(key) != static_cast<uint32_t>(m))
        return invalid_argument("node '" + name + "' (Scan): attribute '" + key + "' needs one value per scan input");
    for (const char* key : {"scan_output_axes", "scan_output_directions"})
      if (attrs.has(key) && attrs.ints_size(key) != k_out)
        return invalid_argument("node '" + name + "' (Scan): attribute '" + key + "' needs one value per scan output");
    std::vector<int64_t> in_axes = list("scan_input_axes", static_cast<size_t>(m)), in_dirs = list("scan_input_directions", static_cast<size_t>(m));
    std::vector<int64_t> out_axes = list("scan_output_axes", k_out), out_dirs = list("scan_output_directions", k_out);
    std::vector<int> state, scan_in;
    for (int k = 0; k < n.input_size(); ++k) {
      KILN_ASSIGN_OR_RETURN(int v, lookup(n.input(k), name));
      (k < states ? state : scan_in).push_back(v);
    }
    int64_t len = -1;
    core::ExprId len_expr = core::kNoExpr;
    for (size_t j = 0; j < scan_in.size(); ++j) {
      const int64_t r = static_cast<int64_t>(g_.shape(scan_in[j]).size());
      if (in_axes[j] < -r || in_axes[j] >= r) return invalid_argument("node '" + name + "' (Scan): scan input axis out of range");
      if (in_axes[j] < 0) in_axes[j] += r;
      const core::ExprId d = g_.shape(scan_in[j])[static_cast<size_t>(in_axes[j])];
      if (len_expr == core::kNoExpr) len_expr = d;
      else KILN_TRY(g_.require(kernels::Guard{kernels::Guard::Op::kEq, d, len_expr, name, "Scan", "(the scan inputs' lengths)"}));
    }
    if (g_.pool().is_const(len_expr)) len = g_.pool().const_value(len_expr);
    for (size_t k = 0; k < k_out; ++k)
      if (std::abs(out_axes[k]) > kMaxRank) return invalid_argument("node '" + name + "' (Scan): scan output axis out of range");
    if (len < 1 || len * std::max(1, body->node_size()) > kMaxUnrolledNodes)  // a runtime loop over the sequence
      return import_runtime_scan(n, *body, name, len_expr, state, scan_in, in_axes, in_dirs, out_axes, out_dirs);
    KILN_TRY(check_unroll(name, "Scan", len, *body));
    KILN_TRY(add_body_constants(*body));
    std::vector<std::vector<int>> scans(k_out);
    for (int64_t i = 0; i < len; ++i) {
      std::vector<int> ins = state;
      for (size_t j = 0; j < scan_in.size(); ++j) {
        const int64_t at = in_dirs[j] ? len - 1 - i : i;
        KILN_ASSIGN_OR_RETURN(int idx, g_.add_constant(name + "/index" + std::to_string(j) + "@" + std::to_string(i), DType::kI64, {},
                                                       std::vector<int64_t>{at}));
        core::AttrStore ax;
        ax.set_int("axis", in_axes[j]);
        KILN_ASSIGN_OR_RETURN(int slice, g_.add("Gather", name + "/slice" + std::to_string(j) + "@" + std::to_string(i), {scan_in[j], idx}, ax));
        ins.push_back(slice);
      }
      KILN_ASSIGN_OR_RETURN(std::vector<int> outs, import_iteration(*body, ins, name, i));
      state.assign(outs.begin(), outs.begin() + states);
      for (size_t k = 0; k < k_out; ++k) scans[k].push_back(outs[static_cast<size_t>(states) + k]);
    }
    for (int k = 0; k < states; ++k)
      if (!n.output(k).empty()) names_[n.output(k)] = state[static_cast<size_t>(k)];
    for (size_t k = 0; k < k_out; ++k) {
      std::vector<int>& parts = scans[k];
      if (out_dirs[k]) std::reverse(parts.begin(), parts.end());
      const int64_t r = static_cast<int64_t>(g_.shape(parts[0]).size()) + 1;
      int64_t axis = out_axes[k] < 0 ? out_axes[k] + r : out_axes[k];
      if (axis < 0 || axis >= r) return invalid_argument("node '" + name + "' (Scan): scan output axis out of range");
      KILN_ASSIGN_OR_RETURN(int st, stack(parts, axis, name + "/scan" + std::to_string(k)));
      if (!n.output(states + static_cast<int>(k)).empty()) names_[n.output(states + static_cast<int>(k))] = st;
    }
    return ok_status();
  }

  /// Imports one branch of If node `n` into the open block and returns its results.
  Result<std::vector<int>> import_branch(const onnx::NodeProto& n, const std::string& name, const char* branch_name) {
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.name() != branch_name) continue;
      const onnx::GraphProto& branch = a.g();
      KILN_TRY(check_supported(branch));
      for (const onnx::TensorProto& t : branch.initializer()) {
        KILN_ASSIGN_OR_RETURN(HostTensor h, tensor_from_proto(t, "initializer '" + t.name() + "'"));
        KILN_ASSIGN_OR_RETURN(int id, g_.add_constant(t.name(), h.dtype, h.shape, h.bytes.data(), h.bytes.size()));
        names_[t.name()] = id;
      }
      report_->onnx_nodes += static_cast<size_t>(branch.node_size());
      KILN_TRY(import_nodes(branch));
      if (branch.output_size() != n.output_size())
        return invalid_argument("node '" + name + "' (If): its " + branch_name + " has " + std::to_string(branch.output_size()) +
                                " outputs, the node " + std::to_string(n.output_size()));
      std::vector<int> results;
      for (int k = 0; k < n.output_size(); ++k) {
        KILN_ASSIGN_OR_RETURN(int id, lookup(branch.output(k).name(), name));
        results.push_back(id);
      }
      return results;
    }
    return invalid_argument("node '" + name + "' (If) has no " + branch_name);
  }

  // An If whose condition is a constant (after specialization and shape folding) is inlined:
  // only the taken branch is imported. Otherwise both become blocks of a runtime branch
  // (GraphBuilder::begin_if), the condition evaluated at execute.
  Status import_if(const onnx::NodeProto& n, const std::string& name) {
    KILN_ASSIGN_OR_RETURN(int cond, lookup(n.input(0), name));
    const std::vector<uint8_t>* bytes = g_.constant_bytes(cond);
    if (bytes && !bytes->empty()) {
      bool taken = false;
      for (uint8_t b : *bytes) taken = taken || b;  // any nonzero byte of a one-element tensor
      KILN_ASSIGN_OR_RETURN(std::vector<int> results, import_branch(n, name, taken ? "then_branch" : "else_branch"));
      for (int k = 0; k < n.output_size(); ++k) names_[n.output(k)] = results[static_cast<size_t>(k)];
      ++report_->removed_nodes;
      return ok_status();
    }
    if (n.output_size() == 0) return invalid_argument("node '" + name + "' (If) has no outputs");
    // Both blocks as a runtime branch. When that fails and the condition reads only shapes
    // (torch's `if x.shape[-1] == 1:`), one branch may still compile: it is taken under a
    // guard that the condition selects it, checked at bind (or when the enclosing block runs).
    const GraphBuilder::Checkpoint cp = g_.checkpoint();
    const auto names = names_;
    const auto producers = producers_;
    const ExportReport report = *report_;
    auto undo = [&]() {
      g_.rollback(cp);
      names_ = names;
      producers_ = producers;
      *report_ = report;
    };
    Status both = import_runtime_if(n, name, cond);
    if (both.ok()) return both;
    kernels::Guard holds;
    if (!shape_condition(n.input(0), &holds)) return both;
    for (const bool taken : {true, false}) {
      undo();
      kernels::Guard g = holds;
      if (!taken && !negate(&g)) continue;
      g.node_name = name;
      g.op_type = "If";
      g.context = std::string("to take its ") + (taken ? "then" : "else") + " branch, the one Kiln compiles at these shapes (the other: " +
                  both.message() + ")";
      if (!g_.require(g).ok()) continue;
      Result<std::vector<int>> results = import_branch(n, name, taken ? "then_branch" : "else_branch");
      if (!results.ok()) continue;
      for (int k = 0; k < n.output_size(); ++k) names_[n.output(k)] = (*results)[static_cast<size_t>(k)];
      ++report_->removed_nodes;
      return ok_status();
    }
    undo();
    return both;
  }

  Status import_runtime_if(const onnx::NodeProto& n, const std::string& name, int cond) {
    KILN_TRY(g_.begin_if(cond, name));
    KILN_ASSIGN_OR_RETURN(std::vector<int> then_results, import_branch(n, name, "then_branch"));
    KILN_TRY(g_.begin_else());
    KILN_ASSIGN_OR_RETURN(std::vector<int> else_results, import_branch(n, name, "else_branch"));
    KILN_ASSIGN_OR_RETURN(std::vector<int> outs, g_.end_if(then_results, else_results));
    for (int k = 0; k < n.output_size(); ++k)
      if (!n.output(k).empty()) names_[n.output(k)] = outs[static_cast<size_t>(k)];
    ++report_->runtime_branches;
    return ok_status();
  }

  /// One element of an integer value as an expression: its folded shape value or constant.
  bool scalar_expr(const std::string& value, core::ExprId* e) {
    auto it = names_.find(value);
    if (it == names_.end()) return false;
    const std::vector<core::ExprId>& sv = g_.sym_values(it->second);
    if (sv.size() == 1) return *e = sv[0], true;
    const std::vector<uint8_t>* bytes = g_.constant_bytes(it->second);
    if (!bytes) return false;
    const DType t = g_.dtype(it->second);
    if (t == DType::kI64 && bytes->size() == 8) return *e = g_.pool().constant(*reinterpret_cast<const int64_t*>(bytes->data())), true;
    if (t == DType::kI32 && bytes->size() == 4) return *e = g_.pool().constant(*reinterpret_cast<const int32_t*>(bytes->data())), true;
    return false;
  }

  /// An If condition that reads only shapes, as the guard `holds` that is true exactly when the
  /// condition is: a comparison of folded shape values, through Not, Cast, Identity and
  /// (Un)Squeeze. False when the condition reads data, or cannot be written as one guard.
  bool shape_condition(const std::string& value, kernels::Guard* holds) {
    auto it = producers_.find(value);
    if (it == producers_.end()) return false;
    const onnx::NodeProto& p = *it->second;
    const std::string& op = p.op_type();
    if (p.input_size() < 1) return false;
    auto in0 = names_.find(p.input(0));
    if (in0 == names_.end()) return false;
    if (op == "Identity" || op == "Squeeze" || op == "Unsqueeze" || op == "Reshape" || (op == "Cast" && g_.dtype(in0->second) == DType::kBool))
      return shape_condition(p.input(0), holds);
    if (op == "Not") return shape_condition(p.input(0), holds) && negate(holds);
    core::ExprPool& pool = g_.pool();
    core::ExprId a, b;
    if (op == "Cast") {  // an integer cast to bool: x != 0
      if (!scalar_expr(p.input(0), &a)) return false;
      *holds = kernels::Guard{kernels::Guard::Op::kEq, a, pool.constant(0), "", "", ""};
      return negate(holds);
    }
    if (p.input_size() < 2 || !scalar_expr(p.input(0), &a) || !scalar_expr(p.input(1), &b)) return false;
    using Op = kernels::Guard::Op;
    const core::ExprId one = pool.constant(1);
    if (op == "Equal") *holds = {Op::kEq, a, b, "", "", ""};
    else if (op == "GreaterOrEqual") *holds = {Op::kGe, a, b, "", "", ""};
    else if (op == "LessOrEqual") *holds = {Op::kGe, b, a, "", "", ""};
    else if (op == "Greater") *holds = {Op::kGe, a, pool.add(b, one), "", "", ""};
    else if (op == "Less") *holds = {Op::kGe, b, pool.add(a, one), "", "", ""};
    else return false;
    return true;
  }

  /// Replaces `g` by its negation when that is one guard: not (a >= b) is b >= a + 1; not
  /// (a == b) is a >= b + 1 or b >= a + 1 when the ranges say which side a lies on.
  bool negate(kernels::Guard* g) {
    core::ExprPool& p = g_.pool();
    const core::ExprId one = p.constant(1);
    if (g->op == kernels::Guard::Op::kGe) {
      *g = {kernels::Guard::Op::kGe, g->rhs, p.add(g->lhs, one), "", "", ""};
      return true;
    }
    if (g->op != kernels::Guard::Op::kEq) return false;
    const core::Interval d = p.range(p.sub(g->lhs, g->rhs));
    if (d.lo >= 0) *g = {kernels::Guard::Op::kGe, g->lhs, p.add(g->rhs, one), "", "", ""};
    else if (d.hi <= 0) *g = {kernels::Guard::Op::kGe, g->rhs, p.add(g->lhs, one), "", "", ""};
    else return false;
    return true;
  }

  // A guard over one dim that only one value satisfies means the model forces that dim:
  // report it as a specialization with its origin instead of exporting a contract that
  // admits just one size. A guard no value satisfies is an error too.
  Status check_specializations() {
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

  const ExportOptions& opts_;
  ExportReport* report_;
  GraphBuilder g_;
  int64_t opset_ = 13;
  std::map<std::string, const onnx::NodeProto*> producers_;  ///< value name -> the node that makes it
  std::unordered_map<std::string, int> names_;
  std::map<std::string, DimArg> data_bounds_;  ///< --dim names no input uses: bounds of data-dependent sizes
  std::vector<FusionCandidate> fusions_;  // main graph, ascending first node
  std::set<std::string> fused_names_;
  std::string iteration_suffix_;  ///< "@2" while importing a loop body's third iteration
};

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
