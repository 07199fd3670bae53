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

}  // namespace

Result<size_t> fold_batch_norms(onnx::GraphProto* g) {
  std::map<std::string, int> uses;
  count_uses(*g, &uses);
  std::map<std::string, int> producer;
  for (int i = 0; i < g->node_size(); ++i)
    for (const std::string& o : g->node(i).output()) producer[o] = i;
  std::vector<int> drop;
  for (int bi = 0; bi < g->node_size(); ++bi) {
    const onnx::NodeProto& bn = g->node(bi);
    if (bn.op_type() != "BatchNormalization" || bn.input_size() < 5 || bn.output_size() > 1 ||
        attr_int(bn, "training_mode", 0) != 0)
      continue;
    auto p = producer.find(bn.input(0));
    if (p == producer.end() || uses[bn.input(0)] != 1) continue;
    onnx::NodeProto* prod = g->mutable_node(p->second);
    const std::string& op = prod->op_type();
    if (op != "Conv" && op != "ConvTranspose" && op != "Gemm") continue;
    if (op == "Gemm" && (attr_int(*prod, "transA", 0) != 0)) continue;
    onnx::TensorProto* w = prod->input_size() > 1 ? find_init(g, prod->input(1)) : nullptr;
    if (!w || uses[prod->input(1)] != 1) continue;
    onnx::TensorProto* params[4];
    bool ok = true;
    for (int k = 0; k < 4; ++k) ok = ok && (params[k] = find_init(g, bn.input(k + 1))) != nullptr;
    onnx::TensorProto* b = prod->input_size() > 2 && !prod->input(2).empty() ? find_init(g, prod->input(2)) : nullptr;
    if (!ok || (prod->input_size() > 2 && !prod->input(2).empty() && (!b || uses[prod->input(2)] != 1))) continue;
    KILN_ASSIGN_OR_RETURN(HostTensor wt, tensor_from_proto(*w, "initializer '" + w->name() + "'"));
    std::vector<HostTensor> pt(4);
    for (int k = 0; k < 4; ++k) {
      KILN_ASSIGN_OR_RETURN(pt[k], tensor_from_proto(*params[k], "initializer '" + params[k]->name() + "'"));
    }
    if (wt.dtype != DType::kF32 || wt.shape.size() < 2) continue;
    // Output channel c of the producer and how W's elements map to it.
    int64_t channels = 0, group = attr_int(*prod, "group", 1);
    bool trans_b = attr_int(*prod, "transB", 0) != 0;
    if (op == "Conv") channels = wt.shape[0];
    else if (op == "ConvTranspose") channels = wt.shape[1] * group;
    else channels = trans_b ? wt.shape[0] : wt.shape[1];
    bool sizes_ok = true;
    for (const HostTensor& t : pt) sizes_ok = sizes_ok && t.dtype == DType::kF32 && static_cast<int64_t>(t.bytes.size() / 4) == channels;
    if (!sizes_ok) continue;
    const float* scale = reinterpret_cast<const float*>(pt[0].bytes.data());
    const float* shift = reinterpret_cast<const float*>(pt[1].bytes.data());
    const float* mean = reinterpret_cast<const float*>(pt[2].bytes.data());
    const float* var = reinterpret_cast<const float*>(pt[3].bytes.data());
    float eps = attr_float(bn, "epsilon", 1e-5f);
    std::vector<double> s(channels);
    for (int64_t c = 0; c < channels; ++c) s[c] = scale[c] / std::sqrt(static_cast<double>(var[c]) + eps);
    float* wf = reinterpret_cast<float*>(wt.bytes.data());
    int64_t n = static_cast<int64_t>(wt.bytes.size() / 4);
    int64_t inner = 1;
    for (size_t k = 2; k < wt.shape.size(); ++k) inner *= wt.shape[k];
    for (int64_t i = 0; i < n; ++i) {
      int64_t c;
      if (op == "Conv") {
        c = i / (n / channels);
      } else if (op == "ConvTranspose") {  // W: [C_in, C_out/group, k...]
        int64_t cin = i / (wt.shape[1] * inner), j = (i / inner) % wt.shape[1];
        c = (cin / (wt.shape[0] / group)) * wt.shape[1] + j;
      } else {
        c = trans_b ? i / wt.shape[1] : i % wt.shape[1];
      }
      wf[i] = static_cast<float>(wf[i] * s[c]);
    }
    std::vector<float> bias(channels, 0.f);
    if (b) {
      KILN_ASSIGN_OR_RETURN(HostTensor bt, tensor_from_proto(*b, "initializer '" + b->name() + "'"));
      if (bt.dtype != DType::kF32 || static_cast<int64_t>(bt.bytes.size() / 4) != channels) continue;
      float beta = op == "Gemm" ? attr_float(*prod, "beta", 1.f) : 1.f;
      for (int64_t c = 0; c < channels; ++c) bias[c] = beta * reinterpret_cast<const float*>(bt.bytes.data())[c];
    }
    for (int64_t c = 0; c < channels; ++c) bias[c] = static_cast<float>((bias[c] - mean[c]) * s[c] + shift[c]);
    set_floats(w, std::vector<float>(wf, wf + n), wt.shape);
    std::string bias_name = bn.output(0) + "_folded_bias";
    onnx::TensorProto* nb = g->add_initializer();
    nb->set_name(bias_name);
    set_floats(nb, bias, {channels});
    if (prod->input_size() > 2) {
      prod->set_input(2, bias_name);
    } else {
      if (prod->input_size() < 2) continue;
      prod->add_input(bias_name);
    }
    if (op == "Gemm") {  // the bias now carries beta
      bool found = false;
      for (auto& a : *prod->mutable_attribute())
        if (a.name() == "beta") a.set_f(1.f), found = true;
      (void)found;
    }
    prod->set_output(0, bn.output(0));
    drop.push_back(bi);
  }
  for (auto it = drop.rbegin(); it != drop.rend(); ++it) g->mutable_node()->DeleteSubrange(*it, 1);
  return drop.size();
}

}  // namespace kiln::exporter
