#include "export/onnx/batch_norm_fold.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "export/onnx/onnx_proto.h"

namespace kiln::exporter {

namespace {

onnx::TensorProto* find_init(onnx::GraphProto* g, const std::string& name) {
  for (onnx::TensorProto& t : *g->mutable_initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

void set_floats(onnx::TensorProto* t, const std::vector<float>& v, const std::vector<int64_t>& dims) {
  t->clear_float_data();
  t->clear_raw_data();
  t->clear_dims();
  for (int64_t d : dims) t->add_dims(d);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
}

int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}

float attr_float(const onnx::NodeProto& n, const char* name, float def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.f();
  return def;
}

// A BatchNormalization that folds into the Conv, ConvTranspose or Gemm before it: the
// producer is its only user's, and the weights, bias and the four parameters are initializers
// used nowhere else.
struct FoldSite {
  onnx::NodeProto* prod = nullptr;
  onnx::TensorProto* w = nullptr;
  onnx::TensorProto* params[4] = {};  // scale, shift, mean, var
  onnx::TensorProto* b = nullptr;
};

bool find_fold_site(onnx::GraphProto* g, const onnx::NodeProto& bn, std::map<std::string, int>& uses,
                    const std::map<std::string, int>& producer, FoldSite* site) {
  if (bn.op_type() != "BatchNormalization" || bn.input_size() < 5 || bn.output_size() > 1 ||
      attr_int(bn, "training_mode", 0) != 0)
    return false;
  auto p = producer.find(bn.input(0));
  if (p == producer.end() || uses[bn.input(0)] != 1) return false;
  onnx::NodeProto* prod = g->mutable_node(p->second);
  const std::string& op = prod->op_type();
  if (op != "Conv" && op != "ConvTranspose" && op != "Gemm") return false;
  if (op == "Gemm" && (attr_int(*prod, "transA", 0) != 0)) return false;
  site->prod = prod;
  site->w = prod->input_size() > 1 ? find_init(g, prod->input(1)) : nullptr;
  if (!site->w || uses[prod->input(1)] != 1) return false;
  for (int k = 0; k < 4; ++k)
    if ((site->params[k] = find_init(g, bn.input(k + 1))) == nullptr) return false;
  const bool has_bias = prod->input_size() > 2 && !prod->input(2).empty();
  site->b = has_bias ? find_init(g, prod->input(2)) : nullptr;
  return !has_bias || (site->b && uses[prod->input(2)] == 1);
}

// The output channel that element i of the producer's weights `wt` (n elements) feeds.
int64_t weight_channel(const std::string& op, const HostTensor& wt, int64_t group, bool trans_b, int64_t i, int64_t n,
                       int64_t channels) {
  if (op == "Conv") return i / (n / channels);
  if (op == "ConvTranspose") {  // W: [C_in, C_out/group, k...]
    int64_t inner = 1;
    for (size_t k = 2; k < wt.shape.size(); ++k) inner *= wt.shape[k];
    const int64_t cin = i / (wt.shape[1] * inner), j = (i / inner) % wt.shape[1];
    return (cin / (wt.shape[0] / group)) * wt.shape[1] + j;
  }
  return trans_b ? i / wt.shape[1] : i % wt.shape[1];
}

// Folds `bn` into the site's producer: W' = W * s, b' = (b - mean) * s + shift with
// s = scale / sqrt(var + eps). False (and nothing changed) when a tensor's type or size is not
// the producer's channel count.
Result<bool> fold_one(onnx::GraphProto* g, const onnx::NodeProto& bn, const FoldSite& site) {
  onnx::NodeProto* prod = site.prod;
  const std::string& op = prod->op_type();
  KILN_ASSIGN_OR_RETURN(HostTensor wt, tensor_from_proto(*site.w, "initializer '" + site.w->name() + "'"));
  std::vector<HostTensor> pt(4);
  for (int k = 0; k < 4; ++k) {
    KILN_ASSIGN_OR_RETURN(pt[k], tensor_from_proto(*site.params[k], "initializer '" + site.params[k]->name() + "'"));
  }
  if (wt.dtype != DType::kF32 || wt.shape.size() < 2) return false;
  const int64_t group = attr_int(*prod, "group", 1);
  const bool trans_b = attr_int(*prod, "transB", 0) != 0;
  int64_t channels = 0;
  if (op == "Conv") channels = wt.shape[0];
  else if (op == "ConvTranspose") channels = wt.shape[1] * group;
  else channels = trans_b ? wt.shape[0] : wt.shape[1];
  for (const HostTensor& t : pt)
    if (t.dtype != DType::kF32 || static_cast<int64_t>(t.bytes.size() / 4) != channels) return false;
  std::vector<float> bias(channels, 0.f);
  if (site.b) {
    KILN_ASSIGN_OR_RETURN(HostTensor bt, tensor_from_proto(*site.b, "initializer '" + site.b->name() + "'"));
    if (bt.dtype != DType::kF32 || static_cast<int64_t>(bt.bytes.size() / 4) != channels) return false;
    const float beta = op == "Gemm" ? attr_float(*prod, "beta", 1.f) : 1.f;
    for (int64_t c = 0; c < channels; ++c) bias[c] = beta * reinterpret_cast<const float*>(bt.bytes.data())[c];
  }
  const float* scale = reinterpret_cast<const float*>(pt[0].bytes.data());
  const float* shift = reinterpret_cast<const float*>(pt[1].bytes.data());
  const float* mean = reinterpret_cast<const float*>(pt[2].bytes.data());
  const float* var = reinterpret_cast<const float*>(pt[3].bytes.data());
  const float eps = attr_float(bn, "epsilon", 1e-5f);
  std::vector<double> s(channels);
  for (int64_t c = 0; c < channels; ++c) s[c] = scale[c] / std::sqrt(static_cast<double>(var[c]) + eps);
  float* wf = reinterpret_cast<float*>(wt.bytes.data());
  const int64_t n = static_cast<int64_t>(wt.bytes.size() / 4);
  for (int64_t i = 0; i < n; ++i) wf[i] = static_cast<float>(wf[i] * s[weight_channel(op, wt, group, trans_b, i, n, channels)]);
  for (int64_t c = 0; c < channels; ++c) bias[c] = static_cast<float>((bias[c] - mean[c]) * s[c] + shift[c]);
  set_floats(site.w, std::vector<float>(wf, wf + n), wt.shape);
  const std::string bias_name = bn.output(0) + "_folded_bias";
  onnx::TensorProto* nb = g->add_initializer();
  nb->set_name(bias_name);
  set_floats(nb, bias, {channels});
  if (prod->input_size() > 2) prod->set_input(2, bias_name);
  else prod->add_input(bias_name);
  if (op == "Gemm")  // the bias now carries beta
    for (auto& a : *prod->mutable_attribute())
      if (a.name() == "beta") a.set_f(1.f);
  prod->set_output(0, bn.output(0));
  return true;
}

}  // namespace

Result<size_t> fold_batch_norms(onnx::GraphProto* g) {
  std::map<std::string, int> uses;
  count_uses(*g, &uses);
  std::map<std::string, int> producer;
  for (int i = 0; i < g->node_size(); ++i)
    for (const std::string& o : g->node(i).output()) producer[o] = i;
  std::vector<int> drop;
  for (int bi = 0; bi < g->node_size(); ++bi) {
    FoldSite site;
    if (!find_fold_site(g, g->node(bi), uses, producer, &site)) continue;
    KILN_ASSIGN_OR_RETURN(bool folded, fold_one(g, g->node(bi), site));
    if (folded) drop.push_back(bi);
  }
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) g->mutable_node()->DeleteSubrange(*it, 1);
  return drop.size();
}

}  // namespace kiln::exporter
