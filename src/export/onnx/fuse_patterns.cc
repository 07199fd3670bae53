#include "export/onnx/fuse_patterns.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "export/onnx/onnx_proto.h"
#include "core/status.h"

namespace kiln::exporter {

namespace {

class Matcher {
 public:
  explicit Matcher(const onnx::GraphProto& g) : g_(g) {
    count_uses(g, &uses_);
    for (int i = 0; i < g.node_size(); ++i) {
      for (const std::string& o : g.node(i).output()) producer_[o] = i;
      for (const std::string& in : g.node(i).input()) consumers_[in].push_back(i);
    }
    for (const onnx::TensorProto& t : g.initializer()) inits_[t.name()] = &t;
  }

  const onnx::GraphProto& graph() const { return g_; }
  int uses(const std::string& v) const {
    auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }
  /// Index of the node of type `op` producing v, or -1.
  int producer(const std::string& v, const char* op) const {
    auto it = producer_.find(v);
    return it != producer_.end() && g_.node(it->second).op_type() == op ? it->second : -1;
  }
  /// Index of v's only reader when it is a node of type `op` (v read once in all), or -1.
  int only_consumer(const std::string& v, const char* op) const {
    if (uses(v) != 1) return -1;
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 1) return -1;
    return g_.node(it->second[0]).op_type() == op ? it->second[0] : -1;
  }
  /// v through Identity nodes: torch's exporter stores equal weights once and makes the
  /// others Identity(first) (a fresh model's LayerNorms all hold ones and zeros).
  std::string through_identity(std::string v) const {
    for (int hops = 0; hops < 8; ++hops) {
      const int i = producer(v, "Identity");
      if (i < 0 || g_.node(i).input_size() != 1) break;
      v = g_.node(i).input(0);
    }
    return v;
  }
  /// An f32 constant (initializer or Constant node, or Identity of one) with its values and rank.
  bool constant(const std::string& name, std::vector<float>* vals, int* rank) const {
    const std::string v = through_identity(name);
    const onnx::TensorProto* t = nullptr;
    if (auto it = inits_.find(v); it != inits_.end()) t = it->second;
    if (int i = producer(v, "Constant"); i >= 0)
      for (const onnx::AttributeProto& a : g_.node(i).attribute()) {
        if (a.name() == "value") t = &a.t();
        if (a.name() == "value_float") {
          *vals = {a.f()};
          *rank = 0;
          return true;
        }
      }
    if (!t) return false;
    Result<HostTensor> h = tensor_from_proto(*t, v);
    if (!h.ok() || h->dtype != DType::kF32) return false;
    vals->assign(reinterpret_cast<const float*>(h->bytes.data()),
                 reinterpret_cast<const float*>(h->bytes.data()) + h->bytes.size() / 4);
    *rank = static_cast<int>(h->shape.size());
    return true;
  }
  bool is_initializer(const std::string& v) const { return inits_.count(through_identity(v)) > 0; }
  /// Records why the match anchored at the current node stopped, at `node`; returns false.
  bool miss(int node, std::string why) const {
    if (miss_) *miss_ = {"", -1, node, std::move(why)};
    return false;
  }
  void watch(FusionMiss* m) const { miss_ = m; }
  /// A Dropout that is the identity (as the importer reads it): training_mode absent or a
  /// constant false, or a constant ratio 0 (torchvision's Swin: training=True, p=0); its mask
  /// output unnamed or unread.
  bool inference_dropout(const onnx::NodeProto& n) const {
    if (n.output_size() > 1 && !n.output(1).empty() && uses(n.output(1)) > 0) return false;
    auto zero = [&](int k, bool absent) {  // input k is absent (-> `absent`) or a constant of zero bytes
      if (n.input_size() <= k || n.input(k).empty()) return absent;
      const onnx::TensorProto* t = nullptr;
      if (auto it = inits_.find(n.input(k)); it != inits_.end()) t = it->second;
      if (int i = producer(n.input(k), "Constant"); i >= 0)
        for (const onnx::AttributeProto& a : g_.node(i).attribute())
          if (a.name() == "value") t = &a.t();
      Result<HostTensor> h = t ? tensor_from_proto(*t, n.input(k)) : Result<HostTensor>(invalid_argument(""));
      if (!h.ok() || h->bytes.empty()) return false;
      for (uint8_t b : h->bytes)
        if (b) return false;
      return true;
    };
    return zero(2, true) || zero(1, false);  // not training, or a ratio of 0 (the default is 0.5)
  }
  /// A one-element f32 constant within `tol` of `want`; its rank goes into *rank (max).
  bool scalar(const std::string& v, float want, float tol, int* rank) const {
    std::vector<float> vals;
    int r = 0;
    if (!constant(v, &vals, &r) || vals.size() != 1 || !(std::fabs(vals[0] - want) <= tol)) return false;
    *rank = std::max(*rank, r);
    return true;
  }
  /// For a binary node: the input that is not `known` (or -1 when neither is).
  static int other(const onnx::NodeProto& n, const std::string& known) {
    if (n.input_size() != 2) return -1;
    return n.input(0) == known ? 1 : n.input(1) == known ? 0 : -1;
  }

 private:
  const onnx::GraphProto& g_;
  mutable FusionMiss* miss_ = nullptr;
  std::map<std::string, int> uses_, producer_;
  std::map<std::string, std::vector<int>> consumers_;
  std::map<std::string, const onnx::TensorProto*> inits_;
};

bool reduces_last_axis(const onnx::NodeProto& n) {
  if (n.input_size() != 1) return false;  // axes as an input (opset 18): not matched
  bool axes_ok = false;
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "axes") axes_ok = a.ints_size() == 1 && a.ints(0) == -1;
    if (a.name() == "keepdims" && a.i() != 1) return false;
  }
  return axes_ok;
}

// y = d / Sqrt(ReduceMean(d^2) + eps) with d = x - ReduceMean(x), then * Scale [+ B].
bool match_layer_norm(const Matcher& m, int div, FusionCandidate* f) {
  const onnx::GraphProto& g = m.graph();
  const onnx::NodeProto& dn = g.node(div);
  if (dn.input_size() != 2) return false;
  const std::string& d = dn.input(0);
  const int sq = m.producer(dn.input(1), "Sqrt");
  if (sq < 0) return false;  // not a LayerNorm's division: no near-miss
  if (m.uses(dn.input(1)) != 1) return m.miss(sq, "the Sqrt's output has other readers");
  const int add = m.producer(g.node(sq).input(0), "Add");
  if (add < 0 || m.uses(g.node(sq).input(0)) != 1) return m.miss(sq, "the Sqrt does not read an Add (variance + epsilon) read by it alone");
  const onnx::NodeProto& an = g.node(add);
  int r2 = -1, eps_side = -1;
  for (int k = 0; k < 2 && an.input_size() == 2; ++k)
    if (m.producer(an.input(k), "ReduceMean") >= 0) r2 = m.producer(an.input(k), "ReduceMean"), eps_side = 1 - k;
  std::vector<float> eps;
  int rank = 0;
  if (r2 < 0 || m.uses(an.input(1 - eps_side)) != 1 || !m.constant(an.input(eps_side), &eps, &rank) ||
      eps.size() != 1 || !(eps[0] >= 0.f))
    return m.miss(add, "the Add is not ReduceMean(variance) + a one-element constant epsilon >= 0");
  if (!reduces_last_axis(g.node(r2))) return m.miss(r2, "the ReduceMean is not over the last axis alone (axes [-1], keepdims 1)");
  const std::string& sq_in = g.node(r2).input(0);
  int pw = m.producer(sq_in, "Pow");
  if (pw >= 0) {
    int r = 0;
    if (g.node(pw).input(0) != d || !m.scalar(g.node(pw).input(1), 2.f, 0.f, &r))
      return m.miss(pw, "the variance does not square the divided value d (Pow(d, 2))");
  } else {
    pw = m.producer(sq_in, "Mul");
    if (pw < 0 || g.node(pw).input(0) != d || g.node(pw).input(1) != d)
      return m.miss(r2, "the variance's ReduceMean does not read d^2 (Pow(d, 2) or d * d)");
  }
  const bool mul_square = g.node(pw).op_type() == "Mul";
  if (m.uses(sq_in) != 1 || m.uses(d) != (mul_square ? 3 : 2))
    return m.miss(pw, "d = x - mean (or its square) has readers outside the LayerNorm");
  const int sub = m.producer(d, "Sub");
  if (sub < 0) return m.miss(div, "the divided value is not x - ReduceMean(x) (a Sub)");
  const std::string& x = g.node(sub).input(0);
  const int r1 = m.producer(g.node(sub).input(1), "ReduceMean");
  if (r1 < 0 || m.uses(g.node(sub).input(1)) != 1 || g.node(r1).input(0) != x || !reduces_last_axis(g.node(r1)))
    return m.miss(sub, "the Sub does not take ReduceMean(x) over the last axis (read by it alone) from the same x");
  // Scale (required) and B: rank-1 f32 initializers of one length.
  const int mul = m.only_consumer(dn.output(0), "Mul");
  if (mul < 0) return m.miss(div, "the normalized value is not read by one Mul (by Scale) alone");
  const int scale_k = Matcher::other(g.node(mul), dn.output(0));
  std::vector<float> vals;
  if (scale_k < 0 || !m.is_initializer(g.node(mul).input(scale_k)) ||
      !m.constant(g.node(mul).input(scale_k), &vals, &rank) || rank != 1 || vals.empty())
    return m.miss(mul, "Scale is not a rank-1 f32 initializer (or an Identity of one)");
  f->channels = static_cast<int64_t>(vals.size());
  f->inputs = {g.node(mul).input(scale_k)};
  f->nodes = {r1, sub, pw, r2, add, sq, div, mul};
  f->out = g.node(mul).output(0);
  const int badd = m.only_consumer(f->out, "Add");
  if (badd >= 0) {
    const int bk = Matcher::other(g.node(badd), f->out);
    if (bk >= 0 && m.is_initializer(g.node(badd).input(bk)) && m.constant(g.node(badd).input(bk), &vals, &rank) &&
        rank == 1 && static_cast<int64_t>(vals.size()) == f->channels) {
      f->inputs.push_back(g.node(badd).input(bk));
      f->nodes.push_back(badd);
      f->out = g.node(badd).output(0);
    }
  }
  f->op = "LayerNormalization";
  f->inputs.insert(f->inputs.begin(), x);
  f->attrs.set_int("axis", -1);
  f->attrs.set_float("epsilon", eps[0]);
  return true;
}

// From `inner` (the Erf or Tanh output): x * 0.5 * (inner + 1), in either grouping.
bool match_gelu_tail(const Matcher& m, const std::string& x, const std::string& inner, FusionCandidate* f) {
  const onnx::GraphProto& g = m.graph();
  const int add = m.only_consumer(inner, "Add");
  if (add < 0) return m.miss(f->nodes.back(), "its output is not read by one Add (+ 1) alone");
  const int one = Matcher::other(g.node(add), inner);
  if (one < 0 || !m.scalar(g.node(add).input(one), 1.f, 0.f, &f->const_rank)) return m.miss(add, "the Add does not add the constant 1");
  const std::string& a = g.node(add).output(0);
  const int mul = m.only_consumer(a, "Mul");
  if (mul < 0) return m.miss(add, "(... + 1) is not read by one Mul alone");
  const std::string& other = g.node(mul).input(Matcher::other(g.node(mul), a));
  f->nodes.push_back(add);
  f->nodes.push_back(mul);
  if (other == x) {  // (x * (inner + 1)) * 0.5
    const int half = m.only_consumer(g.node(mul).output(0), "Mul");
    if (half < 0) return false;
    const int k = Matcher::other(g.node(half), g.node(mul).output(0));
    if (k < 0 || !m.scalar(g.node(half).input(k), 0.5f, 0.f, &f->const_rank)) return false;
    f->nodes.push_back(half);
    f->out = g.node(half).output(0);
    return true;
  }
  const int h = m.producer(other, "Mul");  // (x * 0.5) * (inner + 1)
  if (h < 0 || m.uses(other) != 1) return false;
  const int k = Matcher::other(g.node(h), x);
  if (k < 0 || !m.scalar(g.node(h).input(k), 0.5f, 0.f, &f->const_rank)) return false;
  f->nodes.push_back(h);
  f->out = g.node(mul).output(0);
  return true;
}

bool match_gelu_erf(const Matcher& m, int erf, FusionCandidate* f) {
  const onnx::GraphProto& g = m.graph();
  const std::string& q = g.node(erf).input(0);
  if (m.uses(q) != 1) return m.miss(erf, "the Erf's input has other readers");
  int qn = m.producer(q, "Div");
  float want = std::sqrt(2.f);
  if (qn < 0) qn = m.producer(q, "Mul"), want = 1.f / std::sqrt(2.f);
  if (qn < 0) return m.miss(erf, "the Erf does not read x / sqrt(2) or x * (1 / sqrt(2))");
  const onnx::NodeProto& qd = g.node(qn);
  // Div: x / sqrt 2 (x first); Mul: either order.
  int xk = -1;
  for (int k = 0; k < 2 && qd.input_size() == 2; ++k)
    if ((qd.op_type() == "Mul" || k == 0) && m.scalar(qd.input(1 - k), want, 1e-6f, &f->const_rank)) xk = k;
  if (xk < 0) return m.miss(qn, "the constant is not sqrt(2) (Div) or 1 / sqrt(2) (Mul) within 1e-6");
  f->inputs = {qd.input(xk)};
  f->nodes = {qn, erf};
  f->op = "Gelu";
  f->attrs.set_str("approximate", "none");
  return match_gelu_tail(m, f->inputs[0], g.node(erf).output(0), f);
}

bool match_gelu_tanh(const Matcher& m, int tanh, FusionCandidate* f) {
  const onnx::GraphProto& g = m.graph();
  const std::string& c1 = g.node(tanh).input(0);
  const int k1 = m.producer(c1, "Mul");
  if (k1 < 0 || m.uses(c1) != 1) return false;
  const float a = 0.7978845608028654f;
  int bk = -1;
  for (int k = 0; k < 2; ++k)
    if (m.scalar(g.node(k1).input(1 - k), a, 1e-6f, &f->const_rank)) bk = k;
  if (bk < 0) return false;
  const std::string& b = g.node(k1).input(bk);
  const int addn = m.producer(b, "Add");
  if (addn < 0 || m.uses(b) != 1) return false;
  // b = x + 0.044715 * x^3: the cubic term is the Add input made by a Mul with that constant.
  for (int xk = 0; xk < 2; ++xk) {
    const std::string& x = g.node(addn).input(xk);
    const std::string& t3 = g.node(addn).input(1 - xk);
    const int c3 = m.producer(t3, "Mul");
    if (c3 < 0 || m.uses(t3) != 1) continue;
    int ck = -1;
    for (int k = 0; k < 2; ++k)
      if (m.scalar(g.node(c3).input(1 - k), 0.044715f, 1e-7f, &f->const_rank)) ck = k;
    if (ck < 0) continue;
    const std::string& cube = g.node(c3).input(ck);
    if (m.uses(cube) != 1) continue;
    std::vector<int> cube_nodes;
    if (int p = m.producer(cube, "Pow"); p >= 0) {
      if (g.node(p).input(0) != x || !m.scalar(g.node(p).input(1), 3.f, 0.f, &f->const_rank)) continue;
      cube_nodes = {p};
    } else if (int mc = m.producer(cube, "Mul"); mc >= 0) {
      const int sk = Matcher::other(g.node(mc), x);
      if (sk < 0) continue;
      const std::string& sq = g.node(mc).input(sk);
      const int ms = m.producer(sq, "Mul");
      if (ms < 0 || m.uses(sq) != 1 || g.node(ms).input(0) != x || g.node(ms).input(1) != x) continue;
      cube_nodes = {ms, mc};
    } else {
      continue;
    }
    f->inputs = {x};
    f->nodes = cube_nodes;
    for (int n : {c3, addn, k1, tanh}) f->nodes.push_back(n);
    f->op = "Gelu";
    f->attrs.set_str("approximate", "tanh");
    return match_gelu_tail(m, x, g.node(tanh).output(0), f);
  }
  return false;
}

int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

// The attention's post ops between the scores and the Softmax, walked back from the Softmax's
// input `*s` (last first): Adds of a mask or bias (kind 1) and Wheres with a constant fill
// (kind 2: cond ? fill : s; kind 3: cond ? s : fill). At most four. On return `*s` is the
// scores' side before them.
struct PostOps {
  std::vector<int64_t> kinds;
  std::vector<float> fills;
  std::vector<std::string> inputs;
};

// The scores themselves: MatMul(Q, K'), or it times / by a one-element constant.
bool is_scores(const Matcher& m, const std::string& v) {
  if (m.producer(v, "MatMul") >= 0) return true;
  for (const char* op : {"Mul", "Div"}) {
    const int n = m.producer(v, op);
    if (n < 0 || m.graph().node(n).input_size() != 2) continue;
    std::vector<float> c;
    int rank = 0;
    for (int k = 0; k < 2; ++k)
      if (m.producer(m.graph().node(n).input(k), "MatMul") >= 0 && m.constant(m.graph().node(n).input(1 - k), &c, &rank) &&
          c.size() == 1)
        return true;
  }
  return false;
}

bool match_post_add(const Matcher& m, int a, PostOps* post, std::vector<int>* nodes, std::string* s) {
  const onnx::NodeProto& an = m.graph().node(a);
  // The chain continues through the operand made by a Where, Add, Mul, Div or MatMul. When
  // both qualify (torch 1.13's baddbmm: MatMul * alpha + mask * beta), the one that is the
  // scores (a MatMul, scaled or not) is the chain; otherwise the scores' side is ambiguous.
  int chain = -1, qualifying = 0;
  for (int k = 0; k < 2 && an.input_size() == 2; ++k) {
    bool q = false;
    for (const char* op : {"Where", "Add", "Mul", "Div", "MatMul"}) q = q || m.producer(an.input(k), op) >= 0;
    if (q && m.uses(an.input(k)) == 1) chain = k, ++qualifying;
  }
  if (qualifying == 2) {
    const bool s0 = is_scores(m, an.input(0)), s1 = is_scores(m, an.input(1));
    if (s0 != s1) chain = s0 ? 0 : 1, qualifying = 1;
  }
  if (qualifying != 1)
    return m.miss(a, qualifying ? "both operands of this Add are computed and neither alone is the scores (MatMul(Q, K^T), "
                                  "scaled or not): which side is the mask is not clear"
                                : "neither operand of this Add is the scores' chain (read by it alone)");
  post->kinds.push_back(1);
  post->fills.push_back(0.f);
  post->inputs.push_back(an.input(1 - chain));
  nodes->push_back(a);
  *s = an.input(chain);
  return true;
}

bool match_post_where(const Matcher& m, int w, PostOps* post, std::vector<int>* nodes, std::string* s) {
  const onnx::NodeProto& wn = m.graph().node(w);
  std::vector<float> fill;
  int rank = 0;
  if (wn.input_size() != 3) return false;
  int chain = -1;
  if (m.constant(wn.input(1), &fill, &rank) && fill.size() == 1) chain = 2;        // cond ? fill : s
  else if (m.constant(wn.input(2), &fill, &rank) && fill.size() == 1) chain = 1;   // cond ? s : fill
  if (chain < 0) return m.miss(w, "the Where before the Softmax has no one-element constant fill (masked_fill)");
  post->kinds.push_back(chain == 2 ? 2 : 3);
  post->fills.push_back(fill[0]);
  post->inputs.push_back(wn.input(0));
  nodes->push_back(w);
  *s = wn.input(chain);
  return true;
}

bool match_post_ops(const Matcher& m, PostOps* post, std::vector<int>* nodes, std::string* s) {
  for (;;) {
    if (m.uses(*s) != 1) return m.miss(nodes->back(), "a value between the scores and the Softmax has other readers");
    if (int a = m.producer(*s, "Add"); a >= 0 && post->kinds.size() < 4) {
      if (!match_post_add(m, a, post, nodes, s)) return false;
    } else if (int w = m.producer(*s, "Where"); w >= 0 && post->kinds.size() < 4) {
      if (!match_post_where(m, w, post, nodes, s)) return false;
    } else {
      break;
    }
  }
  std::reverse(post->kinds.begin(), post->kinds.end());
  std::reverse(post->fills.begin(), post->fills.end());
  std::reverse(post->inputs.begin(), post->inputs.end());
  return true;
}

// The scale before the post ops: a Div or Mul by a one-element constant, at most one. Returns
// false when the scaled value has other uses.
bool match_attention_scale(const Matcher& m, float* scale, std::vector<int>* nodes, std::string* s) {
  for (const char* op : {"Div", "Mul"}) {
    const int n = m.producer(*s, op);
    if (n < 0) continue;
    const onnx::NodeProto& nn = m.graph().node(n);
    std::vector<float> c;
    int rank = 0;
    int chain = -1;
    if (nn.input_size() == 2 && m.constant(nn.input(1), &c, &rank) && c.size() == 1) chain = 0;
    else if (std::string(op) == "Mul" && nn.input_size() == 2 && m.constant(nn.input(0), &c, &rank) && c.size() == 1) chain = 1;
    if (chain < 0 || rank > 0 || !(c[0] != 0.f) || !std::isfinite(c[0])) continue;  // a rank-0 scalar adds no axes
    *scale = std::string(op) == "Div" ? 1.f / c[0] : c[0];
    nodes->push_back(n);
    *s = nn.input(chain);
    return m.uses(*s) == 1;
  }
  return true;
}

// K's side of MatMul(Q, K'): a Transpose that swaps the last two axes only is absorbed (K is
// then given untransposed); anything else is K' as is.
std::string match_key(const Matcher& m, const std::string& k, bool* k_transposed, std::vector<int>* nodes) {
  *k_transposed = true;
  const int t = m.producer(k, "Transpose");
  if (t < 0 || m.uses(k) != 1) return k;
  const onnx::NodeProto& tn = m.graph().node(t);
  std::vector<int64_t> perm;
  for (const onnx::AttributeProto& a : tn.attribute())
    if (a.name() == "perm") perm.assign(a.ints().begin(), a.ints().end());
  bool swap_last = perm.size() >= 2;
  for (size_t i = 0; swap_last && i + 2 < perm.size(); ++i) swap_last = perm[i] == static_cast<int64_t>(i);
  const int64_t r = static_cast<int64_t>(perm.size());
  if (!swap_last || perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return k;
  *k_transposed = false;
  nodes->push_back(t);
  return tn.input(0);
}

// Softmax(post_ops(MatMul(Q, K^T) * scale)) x V, walked back from the Softmax.
bool match_attention(const Matcher& m, int softmax, int64_t opset, FusionCandidate* f) {
  const onnx::GraphProto& g = m.graph();
  const onnx::NodeProto& sm = g.node(softmax);
  const int64_t axis = attr_int(sm, "axis", opset >= 13 ? -1 : 1);
  if (opset < 13 && axis != -1) return false;  // 2-D coercion: only axis -1 is the last axis alone
  std::vector<int> nodes = {softmax};
  std::string probs = sm.output(0);
  if (const int dr = m.only_consumer(probs, "Dropout"); dr >= 0) {  // inference Dropout: the identity
    const onnx::NodeProto& dn = g.node(dr);
    if (!m.inference_dropout(dn)) return false;
    nodes.push_back(dr);
    probs = dn.output(0);
  }
  const int av = m.only_consumer(probs, "MatMul");
  if (av < 0 || g.node(av).input(0) != probs) return false;  // not an attention's Softmax: no near-miss
  nodes.push_back(av);
  PostOps post;
  std::string s = sm.input(0);
  float scale = 1.f;
  if (!match_post_ops(m, &post, &nodes, &s)) return false;
  if (!match_attention_scale(m, &scale, &nodes, &s)) return m.miss(nodes.back(), "the scaled scores have other readers");
  const int qk = m.producer(s, "MatMul");
  if (qk < 0) return m.miss(nodes.back(), "the Softmax's input does not come from MatMul(Q, K^T) through one scale and at most four masks");
  if (m.uses(s) != 1) return m.miss(qk, "the scores MatMul(Q, K^T) have other readers");
  nodes.push_back(qk);
  bool k_transposed = true;
  const std::string k = match_key(m, g.node(qk).input(1), &k_transposed, &nodes);
  // A scale on Q before the MatMul (torch 1.13: q / sqrt(d), then bmm) is the same scalar on
  // the scores.
  std::string q = g.node(qk).input(0);
  float q_scale = 1.f;
  std::vector<int> q_nodes;
  if (m.uses(q) == 1 && match_attention_scale(m, &q_scale, &q_nodes, &q) && !q_nodes.empty()) {
    scale *= q_scale;
    nodes.push_back(q_nodes.front());
  } else {
    q = g.node(qk).input(0);
  }
  f->op = "FusedAttention";
  f->inputs = {q, k, g.node(av).input(1)};
  f->inputs.insert(f->inputs.end(), post.inputs.begin(), post.inputs.end());
  f->attrs.set_float("scale", scale);
  f->attrs.set_int("k_transposed", k_transposed ? 1 : 0);
  f->attrs.set_ints("post", post.kinds);
  f->attrs.set_floats("fill", post.fills);
  f->softmax_axis = axis;
  f->nodes = nodes;
  f->out = g.node(av).output(0);
  return true;
}

}  // namespace

namespace {
// The matchers read inputs and outputs of these ops by position: a graph where one of them has
// fewer than its ONNX arity (a damaged or hostile model; found by fuzz_onnx: an Erf with no
// input) is left unfused, and the importer then refuses the node with its own message.
bool matched_ops_well_formed(const onnx::GraphProto& g) {
  struct Arity {
    const char* op;
    int inputs, outputs;
  };
  static const Arity kArity[] = {{"Mul", 2, 1},  {"Add", 2, 1},     {"Div", 2, 1},       {"Sub", 2, 1},
                                 {"Pow", 2, 1},  {"MatMul", 2, 1},  {"Where", 3, 1},     {"ReduceMean", 1, 1},
                                 {"Sqrt", 1, 1}, {"Erf", 1, 1},     {"Tanh", 1, 1},      {"Softmax", 1, 1},
                                 {"Transpose", 1, 1}, {"Dropout", 1, 1}, {"Constant", 0, 1}};
  for (const onnx::NodeProto& n : g.node())
    for (const Arity& a : kArity)
      if (n.op_type() == a.op && (n.input_size() < a.inputs || n.output_size() < a.outputs)) return false;
  return true;
}
}  // namespace

std::vector<FusionCandidate> find_fusions(const onnx::GraphProto& graph, int64_t opset, std::vector<FusionMiss>* misses) {
  if (!matched_ops_well_formed(graph)) return {};
  Matcher m(graph);
  std::vector<FusionCandidate> out;
  std::set<int> taken;
  for (int i = 0; i < graph.node_size(); ++i) {
    const std::string& op = graph.node(i).op_type();
    FusionCandidate f;
    FusionMiss miss;
    m.watch(&miss);
    bool hit = false;
    if (op == "Div") hit = match_layer_norm(m, i, &f), miss.op = "LayerNormalization";
    else if (op == "Erf") hit = match_gelu_erf(m, i, &f), miss.op = "Gelu";
    else if (op == "Tanh") hit = match_gelu_tanh(m, i, &f), miss.op = "Gelu";
    else if (op == "Softmax") hit = match_attention(m, i, opset, &f), miss.op = "FusedAttention";
    m.watch(nullptr);
    if (!hit && misses && miss.stop >= 0) {  // the pattern's anchor was there; the match stopped at miss.stop
      miss.anchor = i;
      misses->push_back(std::move(miss));
    }
    if (!hit) continue;
    std::sort(f.nodes.begin(), f.nodes.end());
    bool disjoint = std::adjacent_find(f.nodes.begin(), f.nodes.end()) == f.nodes.end();
    for (int n : f.nodes) disjoint = disjoint && !taken.count(n);
    // Graph outputs are read by the graph, never only inside a chain (uses counted them).
    if (!disjoint) continue;
    taken.insert(f.nodes.begin(), f.nodes.end());
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const FusionCandidate& a, const FusionCandidate& b) { return a.nodes[0] < b.nodes[0]; });
  return out;
}

}  // namespace kiln::exporter
