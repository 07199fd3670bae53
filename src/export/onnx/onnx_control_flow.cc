// The ONNX importer's control flow: If, Loop, Scan, and the lists (ONNX sequences) a loop
// appends to. An If whose condition is known at export is inlined. A Loop or Scan whose trip
// count is known at export (and small enough) is unrolled: each iteration imports the body
// once more (its nodes named "<node>@<i>"), binding the body's inputs to this iteration's
// values; scan outputs are stacked along their axis. Otherwise both become runtime branches
// and loops (GraphBuilder::begin_if, begin_loop). A trip count that depends on the data, or a
// Loop that stops on a computed condition while it has scan outputs, is refused with what
// would have to be static.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "export/onnx/importer.h"
#include "export/onnx/onnx_proto.h"
#include "core/status.h"

namespace kiln::exporter {

namespace {

constexpr int64_t kMaxUnrolledNodes = 200000;

const onnx::GraphProto* body_of(const onnx::NodeProto& n) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == "body" && a.has_g()) return &a.g();
  return nullptr;
}

/// True unless the Loop body's condition output is a constant true or its condition input
/// passed through (torch's `for` loops); unrolling needs the full trip count.
bool body_condition_computed(const onnx::GraphProto& body) {
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

}  // namespace

/// A one-element integer or bool value known at export, or false.
bool Importer::const_scalar(int id, int64_t* v) {
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

/// Imports `body` once with its inputs bound to `inputs`; returns its outputs' values.
/// Iteration `i` of an unrolled loop names its nodes with "@i"; -1: a runtime loop's body.
Result<std::vector<int>> Importer::import_iteration(const onnx::GraphProto& body, const std::vector<int>& inputs,
                                                    const std::string& name, int64_t i) {
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

Status Importer::add_body_constants(const onnx::GraphProto& body) {
  KILN_TRY(check_supported(body));
  for (const onnx::TensorProto& t : body.initializer()) {
    KILN_ASSIGN_OR_RETURN(HostTensor h, tensor_from_proto(t, "initializer '" + t.name() + "'"));
    KILN_ASSIGN_OR_RETURN(int id, g_.add_constant(t.name(), h.dtype, h.shape, h.bytes.data(), h.bytes.size()));
    names_[t.name()] = id;
  }
  return ok_status();
}

/// values[0..n) stacked along a new axis `axis` (Unsqueeze each, then Concat).
Result<int> Importer::stack(const std::vector<int>& values, int64_t axis, const std::string& name) {
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

Status Importer::check_unroll(const std::string& name, const char* op, int64_t trips, const onnx::GraphProto& body) {
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
Result<std::vector<int>> Importer::import_runtime_loop(const onnx::GraphProto& body, const std::string& name, const char* op,
                                                       core::ExprId trip, int cond, const std::vector<int>& init,
                                                       const BodyInputs& body_inputs, size_t scan_outputs,
                                                       const std::vector<int64_t>& reverse, std::vector<int>* stacked) {
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

Status Importer::import_sequence_op(const onnx::NodeProto& n, const std::string& name) {
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

Status Importer::import_loop(const onnx::NodeProto& n, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(LoopHead h, loop_head(n, name));
  const bool unroll = h.trip_expr == core::kNoExpr && h.cond_const && h.trips >= 1 && !h.lists &&
                      h.trips * std::max(1, h.body->node_size()) <= kMaxUnrolledNodes && !body_condition_computed(*h.body);
  // Else a runtime loop over the trip count (static, or an expression of the dims).
  return unroll ? unroll_loop(n, name, std::move(h)) : import_loop_at_runtime(n, name, std::move(h));
}

Result<Importer::LoopHead> Importer::loop_head(const onnx::NodeProto& n, const std::string& name) {
  LoopHead h;
  h.body = body_of(n);
  if (!h.body) return invalid_argument("node '" + name + "' (Loop) has no body");
  const onnx::GraphProto& body = *h.body;
  h.carried = n.input_size() - 2;
  if (body.output_size() < 1 + h.carried || n.output_size() != body.output_size() - 1 || body.input_size() != 2 + h.carried)
    return invalid_argument("node '" + name + "' (Loop): its body's inputs and outputs do not match the node's");
  if (!n.input(0).empty()) {
    KILN_ASSIGN_OR_RETURN(int m, lookup(n.input(0), name));
    const std::vector<core::ExprId>& sv = g_.sym_values(m);
    if (!const_scalar(m, &h.trips) && sv.size() == 1) h.trip_expr = sv[0];
    else if (h.trips < 0)
      return unimplemented("node '" + name + "' (Loop): its trip count '" + n.input(0) + "' is data, not a size of the "
                           "inputs; Kiln runs loops whose trip count the input shapes bound");
  }
  if (!n.input(1).empty()) {
    KILN_ASSIGN_OR_RETURN(h.cond, lookup(n.input(1), name));
    int64_t go = 0;
    h.cond_const = const_scalar(h.cond, &go) && go;
  }
  for (int k = 0; k < h.carried; ++k) {
    auto seq = sequences_.find(n.input(2 + k));
    if (seq != sequences_.end()) {
      if (seq->second.kind != Sequence::kEmpty)
        return unimplemented("node '" + name + "' (Loop): it carries a list that is not empty when it starts; Kiln runs loops "
                             "whose lists start empty (SequenceEmpty)");
      h.state.push_back(-1);
      h.lists = true;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int v, lookup(n.input(2 + k), name));
    h.state.push_back(v);
  }
  if (h.trips < 0 && h.trip_expr == core::kNoExpr)
    return unimplemented("node '" + name + "' (Loop) has no trip count: it runs until a computed condition; Kiln runs "
                         "loops whose trip count the input shapes bound");
  return h;
}

Status Importer::import_loop_at_runtime(const onnx::NodeProto& n, const std::string& name, LoopHead h) {
  const onnx::GraphProto* body = h.body;
  if (h.trip_expr == core::kNoExpr) h.trip_expr = g_.pool().constant(h.trips);
  if (h.cond < 0) {
    KILN_ASSIGN_OR_RETURN(h.cond, g_.add_constant(name + "/cond", DType::kBool, {}, std::vector<uint8_t>{1}));
  }
  KILN_ASSIGN_OR_RETURN(int yes, g_.add_constant(name + "/cond_in", DType::kBool, {}, std::vector<uint8_t>{1}));
  const BodyInputs body_inputs = [&](int iter, const std::vector<int>& slots) -> Result<std::vector<int>> {
    std::vector<int> ins = {iter, yes};
    ins.insert(ins.end(), slots.begin(), slots.end());
    for (size_t k = 0; k < slots.size(); ++k)  // a list the body appends to
      if (slots[k] < 0)
        sequences_[body->input(2 + static_cast<int>(k)).name()] = Sequence{Sequence::kInBody, static_cast<int>(k), -1};
    return ins;
  };
  std::vector<int> stacked;
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs, import_runtime_loop(*body, name, "Loop", h.trip_expr, h.cond, h.state, body_inputs,
                                                                   static_cast<size_t>(n.output_size() - h.carried), {}, &stacked));
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty()) continue;
    if (k < h.carried && stacked[static_cast<size_t>(k)] >= 0)
      sequences_[n.output(k)] = Sequence{Sequence::kStacked, -1, stacked[static_cast<size_t>(k)]};
    else
      names_[n.output(k)] = outs[static_cast<size_t>(k)];
  }
  return ok_status();
}

Status Importer::unroll_loop(const onnx::NodeProto& n, const std::string& name, LoopHead h) {
  const onnx::GraphProto& body = *h.body;
  const int carried = h.carried;
  KILN_TRY(check_unroll(name, "Loop", h.trips, body));
  KILN_TRY(add_body_constants(body));
  KILN_ASSIGN_OR_RETURN(int yes, g_.add_constant(name + "/cond", DType::kBool, {}, std::vector<uint8_t>{1}));
  std::vector<std::vector<int>> scans(static_cast<size_t>(body.output_size() - 1 - carried));
  for (int64_t i = 0; i < h.trips; ++i) {
    KILN_ASSIGN_OR_RETURN(int iter, g_.add_constant(name + "/iter@" + std::to_string(i), DType::kI64, {}, std::vector<int64_t>{i}));
    std::vector<int> ins = {iter, yes};
    ins.insert(ins.end(), h.state.begin(), h.state.end());
    KILN_ASSIGN_OR_RETURN(std::vector<int> outs, import_iteration(body, ins, name, i));
    int64_t go = 0;
    if (!const_scalar(outs[0], &go) || !go)
      return internal_error("node '" + name + "' (Loop): its body's condition is computed, yet it was unrolled");
    h.state.assign(outs.begin() + 1, outs.begin() + 1 + carried);
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(outs[1 + static_cast<size_t>(carried) + k]);
  }
  for (int k = 0; k < carried; ++k)
    if (!n.output(k).empty()) names_[n.output(k)] = h.state[static_cast<size_t>(k)];
  for (size_t k = 0; k < scans.size(); ++k) {
    KILN_ASSIGN_OR_RETURN(int st, stack(scans[k], 0, name + "/scan" + std::to_string(k)));
    if (!n.output(carried + static_cast<int>(k)).empty()) names_[n.output(carried + static_cast<int>(k))] = st;
  }
  return ok_status();
}

/// `v` with its axis 0 moved to `axis` (a Transpose; `v` itself when `axis` is 0).
Result<int> Importer::move_axis0(int v, int64_t axis, const std::string& node_name) {
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
Status Importer::import_runtime_scan(const onnx::NodeProto& n, const std::string& name, const ScanHead& h) {
  KILN_ASSIGN_OR_RETURN(int go, g_.add_constant(name + "/cond", DType::kBool, {}, std::vector<uint8_t>{1}));
  int last = -1;  // len - 1, for inputs read backwards
  const BodyInputs body_inputs = [&](int iter, const std::vector<int>& slots) -> Result<std::vector<int>> {
    std::vector<int> ins = slots;
    for (size_t j = 0; j < h.scan_in.size(); ++j) {
      int at = iter;
      if (h.in_dirs[j]) {
        if (last < 0) {
          KILN_ASSIGN_OR_RETURN(last, g_.add_sym_scalar(g_.pool().add(h.len_expr, g_.pool().constant(-1)), name + "/last"));
        }
        KILN_ASSIGN_OR_RETURN(at, g_.add("Sub", name + "/back" + std::to_string(j), {last, iter}));
      }
      core::AttrStore ax;
      ax.set_int("axis", h.in_axes[j]);
      KILN_ASSIGN_OR_RETURN(int slice, g_.add("Gather", name + "/step" + std::to_string(j), {h.scan_in[j], at}, ax));
      ins.push_back(slice);
    }
    return ins;
  };
  const size_t k_out = h.out_axes.size();
  KILN_ASSIGN_OR_RETURN(std::vector<int> outs,
                        import_runtime_loop(*h.body, name, "Scan", h.len_expr, go, h.state, body_inputs, k_out, h.out_dirs));
  const size_t states = h.state.size();
  for (size_t k = 0; k < k_out; ++k) {
    int y = outs[states + k];
    const int64_t r = static_cast<int64_t>(g_.shape(y).size());
    const int64_t axis = h.out_axes[k] < 0 ? h.out_axes[k] + r : h.out_axes[k];
    if (axis < 0 || axis >= r) return invalid_argument("node '" + name + "' (Scan): scan output axis out of range");
    KILN_ASSIGN_OR_RETURN(y, move_axis0(y, axis, name + "/axis" + std::to_string(k)));  // the steps' axis to `axis`
    if (!n.output(static_cast<int>(states + k)).empty()) names_[n.output(static_cast<int>(states + k))] = y;
  }
  for (size_t k = 0; k < states; ++k)
    if (!n.output(static_cast<int>(k)).empty()) names_[n.output(static_cast<int>(k))] = outs[k];
  return ok_status();
}

Status Importer::import_scan(const onnx::NodeProto& n, const std::string& name) {
  if (opset_ < 9) return unimplemented("node '" + name + "' (Scan): opset 8's Scan (with sequence_lens) is not supported");
  KILN_ASSIGN_OR_RETURN(ScanHead h, scan_head(n, name));
  KILN_TRY(scan_operands(n, name, &h));
  if (h.len < 1 || h.len * std::max(1, h.body->node_size()) > kMaxUnrolledNodes)  // a runtime loop over the sequence
    return import_runtime_scan(n, name, h);
  KILN_TRY(check_unroll(name, "Scan", h.len, *h.body));
  KILN_TRY(add_body_constants(*h.body));
  return unroll_scan(n, name, std::move(h));
}

// The body and the attributes: how many state and scan values, each scan value's axis and direction.
Result<Importer::ScanHead> Importer::scan_head(const onnx::NodeProto& n, const std::string& name) {
  ScanHead h;
  h.body = body_of(n);
  if (!h.body) return invalid_argument("node '" + name + "' (Scan) has no body");
  const onnx::GraphProto& body = *h.body;
  KILN_ASSIGN_OR_RETURN(core::AttrStore a, attrs_from_node(n));
  const core::Attrs attrs = a.view();
  const int64_t m = attrs.get_int("num_scan_inputs", -1);
  h.states = n.input_size() - static_cast<int>(m);
  if (m < 1 || h.states < 0 || body.input_size() != n.input_size() || body.output_size() != n.output_size() ||
      body.output_size() < h.states)
    return invalid_argument("node '" + name + "' (Scan): num_scan_inputs and its body's inputs and outputs do not match");
  auto list = [&](const char* key, size_t count) {
    std::vector<int64_t> v(count, 0);
    if (attrs.has(key) && attrs.ints_size(key) == count) std::copy(attrs.ints(key), attrs.ints(key) + count, v.begin());
    return v;
  };
  h.k_out = static_cast<size_t>(body.output_size() - h.states);
  for (const char* key : {"scan_input_axes", "scan_input_directions"})
    if (attrs.has(key) && attrs.ints_size(key) != static_cast<uint32_t>(m))
      return invalid_argument("node '" + name + "' (Scan): attribute '" + key + "' needs one value per scan input");
  for (const char* key : {"scan_output_axes", "scan_output_directions"})
    if (attrs.has(key) && attrs.ints_size(key) != h.k_out)
      return invalid_argument("node '" + name + "' (Scan): attribute '" + key + "' needs one value per scan output");
  h.in_axes = list("scan_input_axes", static_cast<size_t>(m));
  h.in_dirs = list("scan_input_directions", static_cast<size_t>(m));
  h.out_axes = list("scan_output_axes", h.k_out);
  h.out_dirs = list("scan_output_directions", h.k_out);
  return h;
}

// The state and scan values, and the sequence's length: the scan inputs' lengths, equal.
Status Importer::scan_operands(const onnx::NodeProto& n, const std::string& name, ScanHead* h) {
  for (int k = 0; k < n.input_size(); ++k) {
    KILN_ASSIGN_OR_RETURN(int v, lookup(n.input(k), name));
    (k < h->states ? h->state : h->scan_in).push_back(v);
  }
  for (size_t j = 0; j < h->scan_in.size(); ++j) {
    const int64_t r = static_cast<int64_t>(g_.shape(h->scan_in[j]).size());
    if (h->in_axes[j] < -r || h->in_axes[j] >= r) return invalid_argument("node '" + name + "' (Scan): scan input axis out of range");
    if (h->in_axes[j] < 0) h->in_axes[j] += r;
    const core::ExprId d = g_.shape(h->scan_in[j])[static_cast<size_t>(h->in_axes[j])];
    if (h->len_expr == core::kNoExpr) h->len_expr = d;
    else KILN_TRY(g_.require(kernels::Guard{kernels::Guard::Op::kEq, d, h->len_expr, name, "Scan", "(the scan inputs' lengths)"}));
  }
  if (g_.pool().is_const(h->len_expr)) h->len = g_.pool().const_value(h->len_expr);
  for (size_t k = 0; k < h->k_out; ++k)
    if (std::abs(h->out_axes[k]) > kMaxRank) return invalid_argument("node '" + name + "' (Scan): scan output axis out of range");
  return ok_status();
}

Status Importer::unroll_scan(const onnx::NodeProto& n, const std::string& name, ScanHead h) {
  const int states = h.states;
  std::vector<std::vector<int>> scans(h.k_out);
  for (int64_t i = 0; i < h.len; ++i) {
    std::vector<int> ins = h.state;
    for (size_t j = 0; j < h.scan_in.size(); ++j) {
      const int64_t at = h.in_dirs[j] ? h.len - 1 - i : i;
      KILN_ASSIGN_OR_RETURN(int idx, g_.add_constant(name + "/index" + std::to_string(j) + "@" + std::to_string(i), DType::kI64, {},
                                                     std::vector<int64_t>{at}));
      core::AttrStore ax;
      ax.set_int("axis", h.in_axes[j]);
      KILN_ASSIGN_OR_RETURN(int slice, g_.add("Gather", name + "/slice" + std::to_string(j) + "@" + std::to_string(i), {h.scan_in[j], idx}, ax));
      ins.push_back(slice);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int> outs, import_iteration(*h.body, ins, name, i));
    h.state.assign(outs.begin(), outs.begin() + states);
    for (size_t k = 0; k < h.k_out; ++k) scans[k].push_back(outs[static_cast<size_t>(states) + k]);
  }
  for (int k = 0; k < states; ++k)
    if (!n.output(k).empty()) names_[n.output(k)] = h.state[static_cast<size_t>(k)];
  for (size_t k = 0; k < h.k_out; ++k) {
    std::vector<int>& parts = scans[k];
    if (h.out_dirs[k]) std::reverse(parts.begin(), parts.end());
    const int64_t r = static_cast<int64_t>(g_.shape(parts[0]).size()) + 1;
    int64_t axis = h.out_axes[k] < 0 ? h.out_axes[k] + r : h.out_axes[k];
    if (axis < 0 || axis >= r) return invalid_argument("node '" + name + "' (Scan): scan output axis out of range");
    KILN_ASSIGN_OR_RETURN(int st, stack(parts, axis, name + "/scan" + std::to_string(k)));
    if (!n.output(states + static_cast<int>(k)).empty()) names_[n.output(states + static_cast<int>(k))] = st;
  }
  return ok_status();
}

/// Imports one branch of If node `n` into the open block and returns its results.
Result<std::vector<int>> Importer::import_branch(const onnx::NodeProto& n, const std::string& name, const char* branch_name) {
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
Status Importer::import_if(const onnx::NodeProto& n, const std::string& name) {
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
  // A condition on a data-dependent size (torchvision's "no boxes found?") is known only
  // while executing: one branch under a guard would fail every run that takes the other.
  if (g_.reads_data_dim(holds.lhs) || g_.reads_data_dim(holds.rhs)) return both;
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

Status Importer::import_runtime_if(const onnx::NodeProto& n, const std::string& name, int cond) {
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
bool Importer::scalar_expr(const std::string& value, core::ExprId* e) {
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
bool Importer::shape_condition(const std::string& value, kernels::Guard* holds) {
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
bool Importer::negate(kernels::Guard* g) {
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

}  // namespace kiln::exporter
