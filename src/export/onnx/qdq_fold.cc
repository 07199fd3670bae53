#include "export/onnx/qdq_fold.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "export/onnx/onnx_proto.h"
#include "kernels/simd/qgemm.h"

namespace kiln::exporter {

namespace {

int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

/// The graph as the folding reads it: producers, readers and initializers by value name.
class QdqView {
 public:
  explicit QdqView(onnx::GraphProto* g) : g_(g) {
    count_uses(*g, &uses_);
    for (int i = 0; i < g->node_size(); ++i) {
      for (const std::string& o : g->node(i).output()) producer_[o] = i;
      for (const std::string& in : g->node(i).input()) readers_[in].push_back(i);
    }
    for (const onnx::TensorProto& t : g->initializer()) inits_[t.name()] = &t;
  }

  const onnx::NodeProto* producer(const std::string& v, const char* op) const {
    auto it = producer_.find(v);
    return it != producer_.end() && g_->node(it->second).op_type() == op ? &g_->node(it->second) : nullptr;
  }
  /// v's only reader, when v is read once in all (graph outputs count) and that reader is `op`.
  int only_reader(const std::string& v, const char* op) const {
    auto u = uses_.find(v);
    auto r = readers_.find(v);
    if (u == uses_.end() || u->second != 1 || r == readers_.end() || r->second.size() != 1) return -1;
    return g_->node(r->second[0]).op_type() == op ? r->second[0] : -1;
  }
  /// An initializer's contents (nullopt-like false when v is none or unreadable).
  bool init(const std::string& v, HostTensor* t) const {
    auto it = inits_.find(v);
    if (it == inits_.end()) return false;
    Result<HostTensor> h = tensor_from_proto(*it->second, v);
    if (!h.ok()) return false;
    *t = std::move(*h);
    return true;
  }
  bool is_init(const std::string& v) const { return inits_.count(v) > 0; }

 private:
  onnx::GraphProto* g_;
  std::map<std::string, int> uses_, producer_;
  std::map<std::string, std::vector<int>> readers_;
  std::map<std::string, const onnx::TensorProto*> inits_;
};

int64_t numel(const HostTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

/// A DequantizeLinear or QuantizeLinear whose scale and zero point are initializers: the
/// quantized side's name, the scales, and the zero point's name and dtype.
struct QParams {
  std::string q, scale, zp;
  std::vector<float> scales;
  DType zp_dtype = DType::kU8;
  int64_t axis = 1;
};

bool qparams(const QdqView& v, const onnx::NodeProto& n, QParams* p) {
  if (n.input_size() < 3 || n.input(2).empty()) return false;  // without a zero point, x's dtype is unknown here
  HostTensor s, z;
  if (!v.init(n.input(1), &s) || s.dtype != DType::kF32 || !v.init(n.input(2), &z)) return false;
  if ((z.dtype != DType::kI8 && z.dtype != DType::kU8) || numel(z) != numel(s)) return false;
  if (attr_int(n, "block_size", 0) != 0) return false;
  p->q = n.input(0);
  p->scale = n.input(1);
  p->zp = n.input(2);
  p->zp_dtype = z.dtype;
  p->axis = attr_int(n, "axis", 1);
  const float* f = reinterpret_cast<const float*>(s.bytes.data());
  p->scales.assign(f, f + numel(s));
  for (float x : p->scales)
    if (!(x > 0.f) || !std::isfinite(x)) return false;
  return true;
}

/// The output activation between the op and its QuantizeLinear, as a clamp in float
/// (-inf/inf: none), and the value that QuantizeLinear reads.
struct Activation {
  int node = -1;
  float lo = -INFINITY, hi = INFINITY;
};

bool activation(const QdqView& v, const onnx::GraphProto& g, const std::string& out, Activation* a, std::string* q_in) {
  *q_in = out;
  int r = v.only_reader(out, "Relu");
  if (r >= 0) {
    *a = {r, 0.f, INFINITY};
    *q_in = g.node(r).output(0);
    return true;
  }
  r = v.only_reader(out, "Clip");
  if (r < 0) return true;
  const onnx::NodeProto& c = g.node(r);
  Activation clip{r};
  for (const auto& at : c.attribute()) {  // opset < 11
    if (at.name() == "min") clip.lo = at.f();
    if (at.name() == "max") clip.hi = at.f();
  }
  for (int k = 1; k < c.input_size() && k < 3; ++k) {
    if (c.input(k).empty()) continue;
    HostTensor t;
    if (!v.init(c.input(k), &t) || t.dtype != DType::kF32 || numel(t) != 1) return false;
    (k == 1 ? clip.lo : clip.hi) = reinterpret_cast<const float*>(t.bytes.data())[0];
  }
  *a = clip;
  *q_in = c.output(0);
  return true;
}

/// f quantized as QuantizeLinear does it (round half to even, saturate).
int64_t quantize_value(float f, float scale, int64_t zp, DType t) {
  const int64_t lo = t == DType::kI8 ? -128 : 0, hi = t == DType::kI8 ? 127 : 255;
  if (std::isinf(f)) return f < 0 ? lo : hi;
  const double v = std::nearbyint(f / scale) + static_cast<double>(zp);
  return v < lo ? lo : v > hi ? hi : static_cast<int64_t>(v);
}

onnx::AttributeProto int_attr(const char* name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

/// The bias as int32 in the accumulator's scale x_scale * w_scale[m]: a DequantizeLinear of
/// an int32 initializer is taken as written; a float initializer is quantized. "" when the
/// bias is neither; `name` for a new initializer.
std::string int_bias(const QdqView& v, onnx::GraphProto* g, const std::string& b, const QParams& x, const QParams& w,
                     int64_t channels) {
  if (const onnx::NodeProto* dq = v.producer(b, "DequantizeLinear")) {
    HostTensor q;
    if (dq->input_size() >= 1 && v.init(dq->input(0), &q) && q.dtype == DType::kI32 && numel(q) == channels) return dq->input(0);
    return "";
  }
  HostTensor f;
  if (!v.init(b, &f) || f.dtype != DType::kF32 || numel(f) != channels) return "";
  std::vector<int32_t> q(static_cast<size_t>(channels));
  for (int64_t m = 0; m < channels; ++m) {
    const double s = static_cast<double>(x.scales[0]) * w.scales[w.scales.size() == 1 ? 0 : m];
    const double r = std::nearbyint(reinterpret_cast<const float*>(f.bytes.data())[m] / s);
    if (!(std::fabs(r) < 2147483647.0)) return "";
    q[static_cast<size_t>(m)] = static_cast<int32_t>(r);
  }
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(b + "_quantized");
  t->set_data_type(onnx::TensorProto::INT32);
  t->add_dims(channels);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(q.data()), q.size() * sizeof(int32_t)));
  return t->name();
}

/// Folds the chain around node i (Conv or MatMul) into one QLinearConv or QLinearMatMul;
/// appends the nodes it replaced to *drop. False (nothing changed) when it does not fit.
bool fold_one(const QdqView& v, onnx::GraphProto* g, int i, std::set<int>* drop) {
  onnx::NodeProto& n = *g->mutable_node(i);
  const bool conv = n.op_type() == "Conv";
  if (n.input_size() < 2 || n.output_size() != 1) return false;
  const onnx::NodeProto* dx = v.producer(n.input(0), "DequantizeLinear");
  const onnx::NodeProto* dw = v.producer(n.input(1), "DequantizeLinear");
  QParams x, w, y;
  if (!dx || !dw || !qparams(v, *dx, &x) || !qparams(v, *dw, &w) || x.scales.size() != 1) return false;
  HostTensor wq;
  if (!v.init(w.q, &wq) || wq.dtype != w.zp_dtype || wq.shape.size() < 2) return false;
  const int64_t rank = static_cast<int64_t>(wq.shape.size());
  const int64_t channels = conv ? wq.shape[0] : wq.shape[rank - 1];
  if (!conv && rank != 2) return false;  // QLinearMatMul's per-column scales: a 2-D weight
  if (w.scales.size() != 1) {
    const int64_t axis = w.axis < 0 ? w.axis + rank : w.axis;
    if (static_cast<int64_t>(w.scales.size()) != channels || axis != (conv ? 0 : rank - 1)) return false;
  }
  Activation act;
  std::string q_in;
  if (!activation(v, *g, n.output(0), &act, &q_in)) return false;
  const int qi = v.only_reader(q_in, "QuantizeLinear");
  if (qi < 0 || !qparams(v, g->node(qi), &y) || y.scales.size() != 1) return false;
  std::string bias;
  if (conv && n.input_size() > 2 && !n.input(2).empty() && (bias = int_bias(v, g, n.input(2), x, w, channels)).empty())
    return false;
  if (!conv && n.input_size() > 2) return false;
  HostTensor yz;
  v.init(y.zp, &yz);
  const int64_t zp = yz.dtype == DType::kI8 ? reinterpret_cast<const int8_t*>(yz.bytes.data())[0] : yz.bytes[0];
  std::vector<std::string> ins = {x.q, x.scale, x.zp, w.q, w.scale, w.zp, y.scale, y.zp};
  if (!bias.empty()) ins.push_back(bias);
  const std::string out = g->node(qi).output(0);
  n.set_op_type(conv ? "QLinearConv" : "QLinearMatMul");
  n.clear_input();
  for (const std::string& s : ins) n.add_input(s);
  n.set_output(0, out);
  if (act.node >= 0) {
    *n.add_attribute() = int_attr("clamp_min", quantize_value(act.lo, y.scales[0], zp, y.zp_dtype));
    *n.add_attribute() = int_attr("clamp_max", quantize_value(act.hi, y.scales[0], zp, y.zp_dtype));
    drop->insert(act.node);
  }
  drop->insert(qi);
  return true;
}

/// The slot of a quantized activation's zero point: for a producer of v (QuantizeLinear,
/// QLinearConv, QLinearMatMul), the input that sets v's zero point; for a reader, the input
/// that reads it when v is its input `k`. -1 when the node is neither.
int producer_zp_slot(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "QuantizeLinear") return 2;
  if (op == "QLinearConv" || op == "QLinearMatMul") return 7;
  return -1;
}
int reader_zp_slot(const onnx::NodeProto& n, int k) {
  const std::string& op = n.op_type();
  if (op == "DequantizeLinear" && k == 0) return 2;
  if ((op == "QLinearConv" || op == "QLinearMatMul") && k == 0) return 2;
  if (op == "QLinearMatMul" && k == 3) return 5;
  return -1;
}

/// An initializer `name`_s8 holding u8 initializer `name` minus 128 as int8 (made once).
std::string s8_twin(onnx::GraphProto* g, const QdqView& v, const std::string& name) {
  const std::string twin = name + "_s8";
  if (v.is_init(twin)) return twin;
  for (const onnx::TensorProto& t : g->initializer())
    if (t.name() == twin) return twin;
  HostTensor h;
  v.init(name, &h);
  std::string bytes(h.bytes.size(), '\0');
  for (size_t i = 0; i < h.bytes.size(); ++i) bytes[i] = static_cast<char>(static_cast<int8_t>(static_cast<int>(h.bytes[i]) - 128));
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(twin);
  t->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : h.shape) t->add_dims(d);
  t->set_raw_data(bytes);
  return twin;
}

/// A new initializer `name` of dtype `type` and 1-D length `len` holding `bytes`.
void add_initializer(onnx::GraphProto* g, const std::string& name, int type, int64_t len, const void* bytes, size_t size) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  t->add_dims(len);
  t->set_raw_data(std::string(static_cast<const char*>(bytes), size));
}

/// Element k of a u8/i8/i32 initializer's values (element 0 when it holds one).
int32_t int_elem(const HostTensor& t, int64_t k) {
  const int64_t at = numel(t) == 1 ? 0 : k;
  if (t.dtype == DType::kI8) return reinterpret_cast<const int8_t*>(t.bytes.data())[at];
  if (t.dtype == DType::kU8) return t.bytes[static_cast<size_t>(at)];
  return reinterpret_cast<const int32_t*>(t.bytes.data())[at];
}

/// The one input of node `n` other than `v` (its operands are {v, other}); "" when n does not
/// read v exactly once among two inputs.
std::string other_input(const onnx::NodeProto& n, const std::string& v) {
  if (n.input_size() != 2) return "";
  if (n.input(0) == v && n.input(1) != v) return n.input(1);
  if (n.input(1) == v && n.input(0) != v) return n.input(0);
  return "";
}

/// The float side of a dynamically quantized MatMul/Conv: Cast -> Mul(., x_scale * w_scale)
/// [-> Add(., bias)], with the scales and bias per output channel (n of them).
struct DynChain {
  const onnx::NodeProto* dql = nullptr;
  std::vector<float> scale, bias;  ///< bias empty: none
  std::string out;                 ///< the value the fused op writes
  std::vector<int> replaced;       ///< Cast, Mul, Add
};

/// A per-channel operand's values: one value, or n laid out so that broadcasting puts them
/// on the output's channel axis (`channel_of(shape)` says whether a shape of n values does).
template <typename ChannelShape>
bool per_channel(const HostTensor& t, int64_t n, int max_rank, ChannelShape&& channel_of, std::vector<float>* out) {
  if (t.dtype != DType::kF32 || static_cast<int>(t.shape.size()) > max_rank) return false;
  const float* f = reinterpret_cast<const float*>(t.bytes.data());
  if (numel(t) == 1) {
    out->assign(static_cast<size_t>(n), f[0]);
    return true;
  }
  if (numel(t) != n || !channel_of(t.shape)) return false;
  out->assign(f, f + n);
  return true;
}

/// A bias: an initializer, or a Reshape of an initializer by an initializer shape.
bool bias_tensor(const QdqView& v, const std::string& name, HostTensor* t) {
  if (v.init(name, t)) return true;
  const onnx::NodeProto* r = v.producer(name, "Reshape");
  HostTensor shape;
  if (!r || r->input_size() < 2 || !v.init(r->input(0), t) || !v.init(r->input(1), &shape) || shape.dtype != DType::kI64)
    return false;
  const int64_t* d = reinterpret_cast<const int64_t*>(shape.bytes.data());
  std::vector<int64_t> dims(d, d + numel(shape));
  int64_t count = 1;
  for (int64_t x : dims) count *= x;
  if (count != numel(*t)) return false;  // 0 and -1 entries: not this simple case
  t->shape = dims;
  return true;
}

template <typename ChannelShape>
bool match_dynamic_chain(const QdqView& v, const onnx::GraphProto& g, const onnx::NodeProto& op, int64_t n, int max_rank,
                         ChannelShape&& channel_of, DynChain* c) {
  if (op.input_size() < 3 || op.output_size() != 1 || op.input(2).empty()) return false;
  c->dql = v.producer(op.input(0), "DynamicQuantizeLinear");
  if (!c->dql || c->dql->output_size() < 3 || c->dql->output(0) != op.input(0) || c->dql->output(2) != op.input(2))
    return false;
  const int ci = v.only_reader(op.output(0), "Cast");
  if (ci < 0 || attr_int(g.node(ci), "to", 0) != onnx::TensorProto::FLOAT) return false;
  const int mi = v.only_reader(g.node(ci).output(0), "Mul");
  if (mi < 0) return false;
  const std::string sp = other_input(g.node(mi), g.node(ci).output(0));
  const onnx::NodeProto* sm = sp.empty() ? nullptr : v.producer(sp, "Mul");
  HostTensor ws;
  const std::string ws_name = sm ? other_input(*sm, c->dql->output(1)) : "";
  if (ws_name.empty() || !v.init(ws_name, &ws) || !per_channel(ws, n, max_rank, channel_of, &c->scale)) return false;
  c->out = g.node(mi).output(0);
  c->replaced = {ci, mi};
  const int ai = v.only_reader(c->out, "Add");
  HostTensor bias;
  const std::string bn = ai >= 0 ? other_input(g.node(ai), c->out) : "";
  if (!bn.empty() && bias_tensor(v, bn, &bias) && numel(bias) == n && per_channel(bias, n, max_rank, channel_of, &c->bias)) {
    c->out = g.node(ai).output(0);
    c->replaced.push_back(ai);
  }
  return true;
}

/// Weights w ([n][k] when `rows_are_channels`, else [k][n]) packed for the quantized GEMM, and
/// the new node's inputs after x, x_scale, x_zero_point: panels, column sums, zero points and
/// scales per channel, bias.
std::vector<std::string> packed_weights(onnx::GraphProto* g, const std::string& base, const HostTensor& w, bool rows_are_channels,
                                        int64_t k, int64_t n, const HostTensor* wz, const DynChain& c) {
  const bool w_signed = w.dtype == DType::kI8;
  std::vector<uint8_t> kn(static_cast<size_t>(k * n));  // [k][n]
  std::vector<int32_t> colsum(static_cast<size_t>(n), 0), zero(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const uint8_t byte = w.bytes[static_cast<size_t>(rows_are_channels ? j * k + kk : kk * n + j)];
      kn[static_cast<size_t>(kk * n + j)] = byte;
      colsum[static_cast<size_t>(j)] += w_signed ? static_cast<int8_t>(byte) : byte;
    }
    zero[static_cast<size_t>(j)] = wz ? int_elem(*wz, j) : 0;
  }
  std::vector<uint8_t> panels(static_cast<size_t>((n + 15) / 16) * simd::qgemm_panel_bytes(simd::qgemm_k_padded(static_cast<size_t>(k))));
  simd::qgemm_pack_b(kn.data(), static_cast<size_t>(k), static_cast<size_t>(n), panels.data());
  add_initializer(g, base + "_panels", onnx::TensorProto::UINT8, static_cast<int64_t>(panels.size()), panels.data(), panels.size());
  add_initializer(g, base + "_colsum", onnx::TensorProto::INT32, n, colsum.data(), colsum.size() * 4);
  add_initializer(g, base + "_zero", onnx::TensorProto::INT32, n, zero.data(), zero.size() * 4);
  add_initializer(g, base + "_scale", onnx::TensorProto::FLOAT, n, c.scale.data(), c.scale.size() * 4);
  std::vector<std::string> ins = {base + "_panels", base + "_colsum", base + "_zero", base + "_scale"};
  if (!c.bias.empty()) {
    add_initializer(g, base + "_bias", onnx::TensorProto::FLOAT, n, c.bias.data(), c.bias.size() * 4);
    ins.push_back(base + "_bias");
  }
  return ins;
}

/// Node i becomes `op` reading x, x_scale, x_zero_point and `weights`, writing the chain's end.
void rewrite_dynamic(onnx::GraphProto* g, int i, const char* op, const DynChain& c, const std::vector<std::string>& weights,
                     std::set<int>* drop) {
  onnx::NodeProto* f = g->mutable_node(i);
  const std::string x = f->input(0), xz = f->input(2);
  f->set_op_type(op);
  f->clear_input();
  for (const std::string& in : {x, c.dql->output(1), xz}) f->add_input(in);
  for (const std::string& in : weights) f->add_input(in);
  f->set_output(0, c.out);
  for (int r : c.replaced) drop->insert(r);
}

/// MatMulInteger node i (a [K, N] weight) -> PackedMatMulIntegerToFloat; false when it does not fit.
bool fold_dynamic_matmul(const QdqView& v, onnx::GraphProto* g, int i, std::set<int>* drop) {
  const onnx::NodeProto& mm = g->node(i);
  HostTensor b, bz;
  if (mm.input_size() < 2 || !v.init(mm.input(1), &b) || b.shape.size() != 2 || (b.dtype != DType::kI8 && b.dtype != DType::kU8))
    return false;
  const int64_t k = b.shape[0], n = b.shape[1];
  if (k < 1 || k > 8192 || n < 1) return false;
  const bool has_bz = mm.input_size() > 3 && !mm.input(3).empty();
  if (has_bz && (!v.init(mm.input(3), &bz) || bz.dtype != b.dtype || (numel(bz) != 1 && numel(bz) != n))) return false;
  DynChain c;
  // Per column: [N] only (a [1, N] scale could raise a 1-D product's rank).
  if (!match_dynamic_chain(v, *g, mm, n, 1, [](const std::vector<int64_t>&) { return true; }, &c)) return false;
  const std::vector<std::string> w = packed_weights(g, mm.input(1) + "_packed" + std::to_string(i), b, false, k, n,
                                                    has_bz ? &bz : nullptr, c);
  rewrite_dynamic(g, i, "PackedMatMulIntegerToFloat", c, w, drop);
  onnx::NodeProto* f = g->mutable_node(i);
  f->clear_attribute();
  *f->add_attribute() = int_attr("k", k);
  *f->add_attribute() = int_attr("n", n);
  *f->add_attribute() = int_attr("b_signed", b.dtype == DType::kI8 ? 1 : 0);
  return true;
}

/// A dense ConvInteger node i (group 1, explicit pads) -> PackedConvIntegerToFloat.
bool fold_dynamic_conv(const QdqView& v, onnx::GraphProto* g, int i, std::set<int>* drop) {
  const onnx::NodeProto& cv = g->node(i);
  HostTensor w, wz;
  if (cv.input_size() < 2 || !v.init(cv.input(1), &w) || w.shape.size() < 3 || w.shape.size() > 5 ||
      (w.dtype != DType::kI8 && w.dtype != DType::kU8) || attr_int(cv, "group", 1) != 1)
    return false;
  for (const auto& a : cv.attribute())
    if (a.name() == "auto_pad" && a.s() != "NOTSET") return false;
  const int rank = static_cast<int>(w.shape.size());
  const int64_t n = w.shape[0];
  int64_t k = 1;
  for (int a = 1; a < rank; ++a) k *= w.shape[static_cast<size_t>(a)];
  if (n < 1 || k < 1 || k > 8192) return false;
  const bool has_wz = cv.input_size() > 3 && !cv.input(3).empty();
  if (has_wz && (!v.init(cv.input(3), &wz) || wz.dtype != w.dtype || (numel(wz) != 1 && numel(wz) != n))) return false;
  DynChain c;
  // Per channel: n values on axis 1 of the [N, M, ...] output (trailing axes 1).
  auto channel_axis = [rank](const std::vector<int64_t>& s) {
    const int at = 1 - (rank - static_cast<int>(s.size()));
    for (int a = 0; a < static_cast<int>(s.size()); ++a)
      if (a != at && s[static_cast<size_t>(a)] != 1) return false;
    return at >= 0;
  };
  if (!match_dynamic_chain(v, *g, cv, n, rank, channel_axis, &c)) return false;
  const std::vector<std::string> ins = packed_weights(g, cv.input(1) + "_packed" + std::to_string(i), w, true, k, n,
                                                      has_wz ? &wz : nullptr, c);
  rewrite_dynamic(g, i, "PackedConvIntegerToFloat", c, ins, drop);
  onnx::NodeProto* f = g->mutable_node(i);
  for (int a = f->attribute_size() - 1; a >= 0; --a)
    if (f->attribute(a).name() == "kernel_shape" || f->attribute(a).name() == "auto_pad") f->mutable_attribute()->DeleteSubrange(a, 1);
  onnx::AttributeProto ks;
  ks.set_name("kernel_shape");
  ks.set_type(onnx::AttributeProto::INTS);
  for (int a = 2; a < rank; ++a) ks.add_ints(w.shape[static_cast<size_t>(a)]);
  *f->add_attribute() = ks;
  *f->add_attribute() = int_attr("out_channels", n);
  *f->add_attribute() = int_attr("group_in", w.shape[1]);
  *f->add_attribute() = int_attr("b_signed", w.dtype == DType::kI8 ? 1 : 0);
  return true;
}

}  // namespace

Result<size_t> fold_dynamic_matmuls(onnx::GraphProto* g, size_t* removed) {
  size_t folded = 0;
  std::set<int> drop;
  {
    QdqView v(g);
    const int nodes = g->node_size();
    for (int i = 0; i < nodes; ++i)
      if ((g->node(i).op_type() == "MatMulInteger" && fold_dynamic_matmul(v, g, i, &drop)) ||
          (g->node(i).op_type() == "ConvInteger" && fold_dynamic_conv(v, g, i, &drop)))
        ++folded;
  }
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) g->mutable_node()->DeleteSubrange(*it, 1);
  *removed = drop.size();
  // The scale products (x_scale * w_scale) and bias reshapes nothing reads any more.
  for (bool again = true; again;) {
    again = false;
    std::map<std::string, int> uses;
    count_uses(*g, &uses);
    for (int i = g->node_size() - 1; i >= 0; --i) {
      const std::string& op = g->node(i).op_type();
      if ((op == "Mul" || op == "Reshape") && g->node(i).output_size() == 1 && uses[g->node(i).output(0)] == 0) {
        g->mutable_node()->DeleteSubrange(i, 1);
        ++*removed;
        again = true;
      }
    }
  }
  return folded;
}

Result<size_t> retype_u8_activations(onnx::GraphProto* g) {
  std::vector<std::string> graph_outputs;
  for (const auto& o : g->output()) graph_outputs.push_back(o.name());
  QdqView v(g);
  std::map<std::string, std::vector<std::pair<int, int>>> readers;  // value -> (node, input slot)
  for (int i = 0; i < g->node_size(); ++i)
    for (int k = 0; k < g->node(i).input_size(); ++k) readers[g->node(i).input(k)].emplace_back(i, k);
  auto dtype_of_init = [&](const std::string& name, DType* t) {
    HostTensor h;
    if (!v.init(name, &h)) return false;
    *t = h.dtype;
    return true;
  };
  struct Site {
    int producer;
    std::string value;
  };
  std::vector<Site> sites;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    const int zs = producer_zp_slot(n);
    DType zt;
    if (zs < 0 || n.input_size() <= zs || !dtype_of_init(n.input(zs), &zt) || zt != DType::kU8) continue;
    const std::string& out = n.output(0);
    bool ok = std::find(graph_outputs.begin(), graph_outputs.end(), out) == graph_outputs.end() && readers.count(out) > 0;
    for (const auto& [r, k] : ok ? readers[out] : std::vector<std::pair<int, int>>{}) {
      const onnx::NodeProto& rn = g->node(r);
      const int rz = reader_zp_slot(rn, k);
      DType rzt, wt;
      ok = ok && rz >= 0 && rn.input_size() > rz && dtype_of_init(rn.input(rz), &rzt) && rzt == DType::kU8;
      // Worth it only where the other operand is int8 (XNNPACK's qc8 takes int8 both sides).
      if (ok && rn.op_type() != "DequantizeLinear") ok = dtype_of_init(rn.input(k == 0 ? 3 : 0), &wt) && wt == DType::kI8;
    }
    if (ok) sites.push_back({i, out});
  }
  for (const Site& s : sites) {
    onnx::NodeProto* n = g->mutable_node(s.producer);
    const int zs = producer_zp_slot(*n);
    n->set_input(zs, s8_twin(g, v, n->input(zs)));
    for (auto& a : *n->mutable_attribute())
      if (a.name() == "clamp_min" || a.name() == "clamp_max") a.set_i(a.i() - 128);
    for (const auto& [r, k] : readers[s.value]) {
      onnx::NodeProto* rn = g->mutable_node(r);
      const int rz = reader_zp_slot(*rn, k);
      rn->set_input(rz, s8_twin(g, v, rn->input(rz)));
    }
  }
  return sites.size();
}

Result<size_t> fold_qdq(onnx::GraphProto* g, size_t* folded_ops) {
  *folded_ops = 0;
  std::set<int> drop;
  {
    QdqView v(g);
    for (int i = 0; i < g->node_size(); ++i) {
      const std::string& op = g->node(i).op_type();
      if ((op == "Conv" || op == "MatMul") && fold_one(v, g, i, &drop)) ++*folded_ops;
    }
  }
  if (*folded_ops == 0) return 0;
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) g->mutable_node()->DeleteSubrange(*it, 1);
  // DequantizeLinears that only the folded ops read are gone with them.
  size_t removed = drop.size();
  for (bool again = true; again;) {
    again = false;
    std::map<std::string, int> uses;
    count_uses(*g, &uses);
    for (int i = g->node_size() - 1; i >= 0; --i)
      if (g->node(i).op_type() == "DequantizeLinear" && uses[g->node(i).output(0)] == 0) {
        g->mutable_node()->DeleteSubrange(i, 1);
        ++removed;
        again = true;
      }
  }
  return removed;
}

}  // namespace kiln::exporter
