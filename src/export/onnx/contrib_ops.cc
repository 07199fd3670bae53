#include "export/onnx/contrib_ops.h"

#include <map>
#include <string>
#include <vector>

#include "export/onnx/onnx_proto.h"

namespace kiln::exporter {

namespace {

const onnx::TensorProto* find_init(const onnx::GraphProto& g, const std::string& name) {
  for (const onnx::TensorProto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

int64_t numel(const HostTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

int32_t int_at(const HostTensor& t, int64_t k) {
  if (t.dtype == DType::kI8) return reinterpret_cast<const int8_t*>(t.bytes.data())[k];
  return t.bytes[static_cast<size_t>(k)];
}

/// Dequantizes q [dirs, rows, cols] (scale/zero point per direction or per (direction, col))
/// and transposes it into f32 [dirs, cols, rows] as initializer `name`; false when the
/// operands are not initializers of those shapes.
bool dequantized_transposed(onnx::GraphProto* g, const std::string& q, const std::string& s, const std::string& z,
                            const std::string& name) {
  const onnx::TensorProto *qt = find_init(*g, q), *st = find_init(*g, s), *zt = z.empty() ? nullptr : find_init(*g, z);
  if (!qt || !st || (!z.empty() && !zt)) return false;
  Result<HostTensor> qh = tensor_from_proto(*qt, q), sh = tensor_from_proto(*st, s);
  if (!qh.ok() || !sh.ok() || qh->shape.size() != 3 || sh->dtype != DType::kF32) return false;
  if (qh->dtype != DType::kI8 && qh->dtype != DType::kU8) return false;
  HostTensor zh;
  if (zt) {
    Result<HostTensor> r = tensor_from_proto(*zt, z);
    if (!r.ok() || numel(*r) != numel(*sh)) return false;
    zh = std::move(*r);
  }
  const int64_t dirs = qh->shape[0], rows = qh->shape[1], cols = qh->shape[2];
  const int64_t ns = numel(*sh);
  if (ns != dirs && ns != dirs * cols) return false;
  const float* sc = reinterpret_cast<const float*>(sh->bytes.data());
  std::vector<float> out(static_cast<size_t>(dirs * rows * cols));
  for (int64_t d = 0; d < dirs; ++d)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t si = ns == dirs ? d : d * cols + c;
        const int32_t zp = zt ? int_at(zh, si) : 0;
        out[static_cast<size_t>((d * cols + c) * rows + r)] =
            static_cast<float>(int_at(*qh, (d * rows + r) * cols + c) - zp) * sc[si];
      }
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t v : {dirs, cols, rows}) t->add_dims(v);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float)));
  return true;
}

/// DynamicQuantizeLSTM(X, W, R, B, seq_lens, init_h, init_c, P, W_scale, W_zp, R_scale, R_zp)
/// -> LSTM(X, W', R', B, seq_lens, init_h, init_c, P).
bool rewrite_lstm(onnx::GraphProto* g, onnx::NodeProto* n) {
  auto in = [&](int k) { return k < n->input_size() ? n->input(k) : std::string(); };
  const std::string w = n->name() + "_W_dequantized", r = n->name() + "_R_dequantized";
  if (!dequantized_transposed(g, in(1), in(8), in(9), w) || !dequantized_transposed(g, in(2), in(10), in(11), r)) return false;
  std::vector<std::string> ins = {in(0), w, r, in(3), in(4), in(5), in(6), in(7)};
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  n->clear_input();
  for (const std::string& s : ins) n->add_input(s);
  n->set_op_type("LSTM");
  n->set_domain("");
  return true;
}

/// The nodes of a QLinear* op as DequantizeLinear -> float op -> QuantizeLinear: its quantized
/// operands (value, scale, zero point: input slots q, q+1, q+2) dequantized, `op` over them
/// with `attrs`, the result quantized with (scale, zero point) at slots ys, ys+1. Empty when
/// the node is not one of the QLinear* ops below.
std::vector<onnx::NodeProto> qlinear_as_float(const onnx::NodeProto& n) {
  const std::string& t = n.op_type();
  std::vector<int> operands;  // first slot of each (value, scale, zero point)
  int ys = 0;
  std::string op;
  if (t == "QLinearAdd" || t == "QLinearMul") {
    operands = {0, 3};
    ys = 6;
    op = t == "QLinearAdd" ? "Add" : "Mul";
  } else if (t == "QLinearSigmoid" || t == "QLinearLeakyRelu" || t == "QLinearGlobalAveragePool") {
    for (const auto& a : n.attribute())
      if (a.name() == "channels_last" && a.i() != 0) return {};
    operands = {0};
    ys = 3;
    op = t == "QLinearSigmoid" ? "Sigmoid" : t == "QLinearLeakyRelu" ? "LeakyRelu" : "GlobalAveragePool";
  } else if (t == "QLinearConcat") {  // (Y_scale, Y_zero_point, X0, X0_scale, X0_zp, X1, ...)
    for (int k = 2; k + 2 < n.input_size() + 2 && k < n.input_size(); k += 3) operands.push_back(k);
    ys = 0;
    op = "Concat";
  } else {
    return {};
  }
  auto in = [&](int k) { return k < n.input_size() ? n.input(k) : std::string(); };
  const std::string base = (n.name().empty() ? n.output(0) : n.name()) + "/";
  std::vector<onnx::NodeProto> out;
  onnx::NodeProto f;
  f.set_op_type(op);
  f.set_name(base + op);
  for (int q : operands) {
    onnx::NodeProto dq;
    dq.set_op_type("DequantizeLinear");
    dq.set_name(base + "DequantizeLinear_" + std::to_string(q));
    for (int k = 0; k < 3; ++k) dq.add_input(in(q + k));
    while (dq.input_size() > 0 && dq.input(dq.input_size() - 1).empty()) dq.mutable_input()->RemoveLast();
    dq.add_output(base + "dequantized_" + std::to_string(q));
    f.add_input(dq.output(0));
    out.push_back(std::move(dq));
  }
  for (const auto& a : n.attribute())
    if (a.name() != "channels_last") *f.add_attribute() = a;
  f.add_output(base + op + "_output");
  onnx::NodeProto q;
  q.set_op_type("QuantizeLinear");
  q.set_name(base + "QuantizeLinear");
  q.add_input(f.output(0));
  q.add_input(in(ys));
  if (!in(ys + 1).empty()) q.add_input(in(ys + 1));
  q.add_output(n.output(0));
  out.push_back(std::move(f));
  out.push_back(std::move(q));
  return out;
}

}  // namespace

Result<size_t> rewrite_contrib_ops(onnx::GraphProto* g) {
  size_t n = 0;
  std::vector<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto* node = g->mutable_node(i);
    if (node->domain() == "com.microsoft") {
      if (node->op_type() == "DynamicQuantizeLSTM" && rewrite_lstm(g, node)) ++n;
      std::vector<onnx::NodeProto> parts = qlinear_as_float(*node);
      if (!parts.empty()) {
        ++n;
        for (onnx::NodeProto& p : parts) nodes.push_back(std::move(p));
        continue;
      }
    }
    nodes.push_back(*node);
  }
  if (n == 0) return n;
  g->clear_node();
  for (onnx::NodeProto& p : nodes) *g->add_node() = std::move(p);
  return n;
}

}  // namespace kiln::exporter
