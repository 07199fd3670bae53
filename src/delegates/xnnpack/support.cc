#include "delegates/xnnpack/support.h"

#include <cmath>
#include <cstring>

#include "kernels/portable/window.h"

namespace kiln::delegates::xnnpack {

namespace {

using core::ExprId;
using core::ExprNode;
using core::ExprOp;
using kernels::kSlotH;
using kernels::kSlotW;

Status decline(const std::string& why) { return unimplemented(why); }

// f32 pointwise ops with one input whose portable kernels run inside a region.
const char* const kPortablePointwise[] = {"Exp", "Log", "HardSigmoid", "Reciprocal", "Sin", "Cos", "Tan",
                                          "Atan", "Selu", "Softplus", "Softsign", "Sign", "ThresholdedRelu", "Mish"};

bool is_const(const ExprNode* exprs, ExprId e) { return exprs[e].op == ExprOp::kConst; }
int64_t const_of(const ExprNode* exprs, ExprId e) { return is_const(exprs, e) ? exprs[e].value : -1; }

bool all_f32(const std::vector<Operand>& ins) {
  for (const Operand& o : ins)
    if (o.present && o.dtype != DType::kF32) return false;
  return true;
}

// XNNPACK's limits: sizes fit uint32 and stay far below what would overflow its index math.
bool small(int64_t v) { return v >= 0 && v <= (int64_t{1} << 24); }

Status static_dim(const ExprNode* exprs, ExprId e, const char* what, size_t* out) {
  int64_t v = const_of(exprs, e);
  if (v < 1 || !small(v)) return decline(std::string(what) + " has a dynamic size (XNNPACK fixes it at create)");
  *out = static_cast<size_t>(v);
  return ok_status();
}

// Pads/strides/dilations of a 1-D or 2-D window in NHWC terms (a 1-D window is H = 1).
Status window_plan(core::Attrs attrs, int nsp, OpPlan* p) {
  kernels::Window w;
  w.read(attrs, nsp);
  if (w.auto_pad == kernels::AutoPad::kSameLower) return decline("auto_pad SAME_LOWER is not supported");
  p->same_upper = w.auto_pad == kernels::AutoPad::kSameUpper;
  for (int k = 0; k < kernels::kMaxSpatial; ++k)
    if (!small(w.stride[k]) || !small(w.dilation[k]) || !small(w.pad_begin[k]) || !small(w.pad_end[k]))
      return decline("window attributes out of range");
  p->stride_h = static_cast<uint32_t>(w.stride[kSlotH]);
  p->stride_w = static_cast<uint32_t>(w.stride[kSlotW]);
  p->dilation_h = static_cast<uint32_t>(w.dilation[kSlotH]);
  p->dilation_w = static_cast<uint32_t>(w.dilation[kSlotW]);
  p->pad_top = static_cast<uint32_t>(w.pad_begin[kSlotH]);
  p->pad_left = static_cast<uint32_t>(w.pad_begin[kSlotW]);
  p->pad_bottom = static_cast<uint32_t>(w.pad_end[kSlotH]);
  p->pad_right = static_cast<uint32_t>(w.pad_end[kSlotW]);
  return ok_status();
}

// Conv and ConvTranspose: 1-D or 2-D, constant weights and bias.
Status conv_operands(const std::vector<Operand>& ins) {
  const size_t rank = ins[0].shape.size();
  if (rank != 3 && rank != 4) return decline("only 1-D and 2-D convolution");
  if (!ins[1].const_data) return decline("weights are not constant");
  if (ins.size() > 2 && ins[2].present && !ins[2].const_data) return decline("bias is not constant");
  return ok_status();
}

Status plan_conv(core::Attrs attrs, const std::vector<Operand>& ins, const ExprNode* exprs, OpPlan* p) {
  KILN_TRY(conv_operands(ins));
  const Operand& x = ins[0];
  const Operand& w = ins[1];
  const size_t rank = x.shape.size();
  const int nsp = static_cast<int>(rank) - 2;
  KILN_TRY(window_plan(attrs, nsp, p));
  if (p->same_upper && (p->dilation_h > 1 || p->dilation_w > 1)) return decline("SAME padding with dilation");
  size_t cin = 0, cout = 0, kh = 1, kw = 0;
  KILN_TRY(static_dim(exprs, x.shape[1], "input channels", &cin));
  KILN_TRY(static_dim(exprs, w.shape[0], "output channels", &cout));
  if (nsp == 2) KILN_TRY(static_dim(exprs, w.shape[2], "kernel height", &kh));
  KILN_TRY(static_dim(exprs, w.shape[rank - 1], "kernel width", &kw));
  int64_t group = attrs.get_int("group", 1);
  if (group < 1 || static_cast<size_t>(group) > cin || cin % static_cast<size_t>(group) != 0 ||
      cout % static_cast<size_t>(group) != 0)
    return decline("group does not divide the channels");
  p->kind = OpKind::kConv;
  p->layout = Layout::kNhwc;
  p->groups = static_cast<uint32_t>(group);
  p->group_in = cin / static_cast<size_t>(group);
  p->group_out = cout / static_cast<size_t>(group);
  p->kernel_h = static_cast<uint32_t>(kh);
  p->kernel_w = static_cast<uint32_t>(kw);
  p->flops_per_output = 2.0 * static_cast<double>(p->group_in * kh * kw);
  return ok_status();
}

Status plan_conv_transpose(core::Attrs attrs, const std::vector<Operand>& ins, const ExprNode* exprs, OpPlan* p) {
  KILN_TRY(conv_operands(ins));
  const Operand& x = ins[0];
  const Operand& w = ins[1];
  const size_t rank = x.shape.size();
  if (attrs.has("output_shape")) return decline("attribute 'output_shape' is not supported");
  const int nsp = static_cast<int>(rank) - 2;
  KILN_TRY(window_plan(attrs, nsp, p));
  if (p->same_upper || attrs.str_equals("auto_pad", "VALID")) return decline("auto_pad is not supported");
  size_t cin = 0, mg = 0, kh = 1, kw = 0;
  KILN_TRY(static_dim(exprs, x.shape[1], "input channels", &cin));
  KILN_TRY(static_dim(exprs, w.shape[1], "output channels per group", &mg));
  if (nsp == 2) KILN_TRY(static_dim(exprs, w.shape[2], "kernel height", &kh));
  KILN_TRY(static_dim(exprs, w.shape[rank - 1], "kernel width", &kw));
  const int64_t group = attrs.get_int("group", 1);
  if (group < 1 || cin % static_cast<size_t>(group) != 0) return decline("group does not divide the channels");
  const int64_t* adj = attrs.ints("output_padding");
  if (adj && attrs.ints_size("output_padding") == static_cast<uint32_t>(nsp)) {
    p->adjust_h = nsp == 2 ? static_cast<uint32_t>(adj[0]) : 0;
    p->adjust_w = static_cast<uint32_t>(adj[nsp - 1]);
  }
  p->kind = OpKind::kConvTranspose;
  p->layout = Layout::kNhwc;
  p->groups = static_cast<uint32_t>(group);
  p->group_in = cin / static_cast<size_t>(group);
  p->group_out = mg;
  p->kernel_h = static_cast<uint32_t>(kh);
  p->kernel_w = static_cast<uint32_t>(kw);
  p->flops_per_output = 2.0 * static_cast<double>(p->group_in * kh * kw) / static_cast<double>(p->stride_h * p->stride_w);
  return ok_status();
}

Status plan_pool(const std::string& op, core::Attrs attrs, const std::vector<Operand>& ins, size_t n_out,
                 const ExprNode* exprs, OpPlan* p) {
  const Operand& x = ins[0];
  if (x.shape.size() != 4) return decline("only 2-D pooling");
  if (n_out != 1) return decline("the Indices output is not supported");
  if (attrs.get_int("storage_order", 0) != 0) return decline("storage_order = 1 is not supported");
  KILN_TRY(static_dim(exprs, x.shape[1], "channels", &p->channels));
  KILN_TRY(window_plan(attrs, 2, p));
  const int64_t* k = attrs.ints("kernel_shape");
  if (!k || attrs.ints_size("kernel_shape") != 2 || !small(k[0]) || !small(k[1])) return decline("kernel_shape must have 2 values");
  p->kernel_h = static_cast<uint32_t>(k[0]);
  p->kernel_w = static_cast<uint32_t>(k[1]);
  p->layout = Layout::kNhwc;
  p->flops_per_output = static_cast<double>(k[0] * k[1]);
  const bool xnn_refuses = p->kernel_h * p->kernel_w < 2 || p->stride_h > p->kernel_h || p->stride_w > p->kernel_w ||
                           attrs.get_int("ceil_mode", 0) != 0;
  if (op == "MaxPool") {
    p->kind = OpKind::kMaxPool;
    p->own_kernel = xnn_refuses;
    return ok_status();
  }
  if (attrs.get_int("ceil_mode", 0) != 0) return decline("ceil_mode = 1 is not supported");
  if (p->kernel_h * p->kernel_w < 2) return decline("a 1x1 pooling window");
  if (p->stride_h > p->kernel_h || p->stride_w > p->kernel_w) return decline("stride larger than the window");
  p->kind = OpKind::kAveragePool;
  if (p->dilation_h != 1 || p->dilation_w != 1) return decline("dilated average pooling");
  const bool padded = p->same_upper || p->pad_top || p->pad_left || p->pad_bottom || p->pad_right;
  if (padded && attrs.get_int("count_include_pad", 0) != 0) return decline("count_include_pad = 1 with padding");
  return ok_status();
}

Status plan_fc(const std::string& op, core::Attrs attrs, const std::vector<Operand>& ins, const ExprNode* exprs, OpPlan* p) {
  const Operand& a = ins[0];
  const Operand& b = ins[1];
  if (!b.const_data || b.shape.size() != 2) return decline("the right operand is not a constant matrix");
  bool trans_b = false;
  if (op == "Gemm") {
    if (a.shape.size() != 2) return decline("Gemm input of rank other than 2");
    if (attrs.get_int("transA", 0) != 0) return decline("transA = 1");
    if (attrs.get_float("alpha", 1.f) != 1.f) return decline("alpha != 1");
    trans_b = attrs.get_int("transB", 0) != 0;
    if (ins.size() > 2 && ins[2].present) {
      const Operand& c = ins[2];
      if (!c.const_data) return decline("C is not constant");
      if (attrs.get_float("beta", 1.f) != 1.f) return decline("beta != 1");
      int64_t n = const_of(exprs, b.shape[trans_b ? 0 : 1]);
      int64_t numel = 1;
      for (ExprId e : c.shape) numel *= const_of(exprs, e);
      bool row = c.shape.size() == 1 || (c.shape.size() == 2 && const_of(exprs, c.shape[0]) == 1);
      if (!row || numel != n) return decline("C is not a bias of length N");
    }
  } else if (a.shape.size() < 2) {
    return decline("MatMul of a vector");
  }
  size_t k = 0, n = 0;
  KILN_TRY(static_dim(exprs, b.shape[trans_b ? 1 : 0], "inner size", &k));
  KILN_TRY(static_dim(exprs, b.shape[trans_b ? 0 : 1], "output size", &n));
  p->kind = OpKind::kFullyConnected;
  p->layout = Layout::kPlain;
  p->channels = k;
  p->out_channels = n;
  p->transpose_weights = !trans_b;  // XNNPACK's default is [N, K]
  p->flops_per_output = 2.0 * static_cast<double>(k);
  return ok_status();
}

Status plan_unary(const std::string& op, core::Attrs attrs, const std::vector<Operand>& ins, const ExprNode* exprs,
                  OpPlan* p) {
  p->kind = OpKind::kUnary;
  p->layout = Layout::kEither;
  if (op == "Erf" || op == "Tanh" || op == "Gelu") {
    p->unary = op == "Erf" ? UnaryOp::kErf : op == "Tanh" ? UnaryOp::kTanh : UnaryOp::kGelu;
    p->gelu_tanh = op == "Gelu" && attrs.str_equals("approximate", "tanh");
    p->own_kernel = true;
    p->flops_per_output = op == "Gelu" ? 20 : 16;
    return ok_status();
  }
  if (op == "Pow") {  // x^2 (LayerNorm's variance) and x^0.5 with a constant scalar exponent
    if (ins.size() != 2 || !ins[1].const_data || ins[1].dtype != DType::kF32) return decline("the exponent is not constant");
    for (core::ExprId d : ins[1].shape)
      if (const_of(exprs, d) != 1) return decline("the exponent is not a scalar");
    float e;
    std::memcpy(&e, ins[1].const_data, sizeof(e));
    if (e == 2.f) p->unary = UnaryOp::kSquare;
    else if (e == 0.5f) p->unary = UnaryOp::kSqrt;
    else return decline("exponents other than 2 and 0.5");
    return ok_status();
  }
  if (op == "Relu" || op == "Clip") {
    KILN_ASSIGN_OR_RETURN(auto range, fusable_activation(op, attrs, ins));
    p->unary = UnaryOp::kClamp;
    p->out_min = range.first;
    p->out_max = range.second;
    return ok_status();
  }
  struct Entry { const char* name; UnaryOp u; };
  static const Entry kTable[] = {{"Sigmoid", UnaryOp::kSigmoid}, {"HardSwish", UnaryOp::kHardSwish},
                                 {"LeakyRelu", UnaryOp::kLeakyRelu}, {"Elu", UnaryOp::kElu},
                                 {"Abs", UnaryOp::kAbs}, {"Neg", UnaryOp::kNeg}, {"Floor", UnaryOp::kFloor},
                                 {"Ceil", UnaryOp::kCeil}, {"Sqrt", UnaryOp::kSqrt}, {"Round", UnaryOp::kRound}};
  for (const Entry& e : kTable)
    if (op == e.name) {
      p->unary = e.u;
      p->alpha = attrs.get_float("alpha", e.u == UnaryOp::kLeakyRelu ? 0.01f : 1.f);
      return ok_status();
    }
  for (const char* name : kPortablePointwise)
    if (op == name) {
      p->unary = UnaryOp::kPortable;
      p->own_kernel = true;
      return ok_status();
    }
  return decline("op not supported by the delegate");
}

}  // namespace

Result<Gate> fusable_gate(const std::string& source_op, core::Attrs source_attrs, const std::string& fused_op) {
  if (fused_op != "Mul") return decline("not a gate");
  Gate g;
  if (source_op == "Sigmoid") return g;
  if (source_op != "HardSigmoid") return decline("not a gate");
  g.hard = true;
  g.alpha = source_attrs.get_float("alpha", 0.2f);
  g.beta = source_attrs.get_float("beta", 0.5f);
  if (!(g.alpha > 0.f)) return decline("HardSigmoid with alpha <= 0");
  return g;
}

Result<const float*> fusable_bias(const OpPlan& fc, const std::string& op, const std::vector<Operand>& ins, int y_operand,
                                  size_t out_rank, const ExprNode* exprs) {
  if (fc.kind != OpKind::kFullyConnected || op != "Add" || ins.size() != 2 || (y_operand != 0 && y_operand != 1))
    return decline("not a bias");
  const Operand& b = ins[1 - y_operand];
  if (!b.present || !b.const_data || b.dtype != DType::kF32 || b.shape.empty() || b.shape.size() > out_rank)
    return decline("not a constant vector");
  for (size_t k = 0; k + 1 < b.shape.size(); ++k)
    if (const_of(exprs, b.shape[k]) != 1) return decline("not a vector");
  if (const_of(exprs, b.shape.back()) != static_cast<int64_t>(fc.out_channels)) return decline("not out_channels long");
  return static_cast<const float*>(b.const_data);
}

bool takes_clamp(OpKind k) {
  return k == OpKind::kConv || k == OpKind::kConvTranspose || k == OpKind::kFullyConnected || k == OpKind::kMaxPool || k == OpKind::kAveragePool ||
         k == OpKind::kGlobalAveragePool || k == OpKind::kBinary || k == OpKind::kBatchNorm;
}

Result<std::pair<float, float>> fusable_activation(const std::string& op, core::Attrs attrs,
                                                   const std::vector<Operand>& ins) {
  if (ins.empty() || !ins[0].present || ins[0].dtype != DType::kF32) return decline("not an f32 activation");
  if (op == "Relu") return std::make_pair(0.f, INFINITY);
  if (op != "Clip") return decline("not a clamp");
  float lo = attrs.get_float("min", -INFINITY), hi = attrs.get_float("max", INFINITY);  // opset < 11
  for (size_t k = 1; k < 3 && k < ins.size(); ++k) {
    if (!ins[k].present) continue;
    if (!ins[k].const_data || ins[k].dtype != DType::kF32) return decline("Clip bounds are not constant");
    float v;
    std::memcpy(&v, ins[k].const_data, sizeof(v));
    (k == 1 ? lo : hi) = v;
  }
  if (std::isnan(lo) || std::isnan(hi) || !(lo < hi)) return decline("Clip with min >= max");
  return std::make_pair(lo, hi);
}

Result<OpPlan> plan_op(const std::string& op, core::Attrs attrs, const std::vector<Operand>& ins,
                       const std::vector<std::vector<core::ExprId>>& out_shapes, const core::ExprNode* exprs) {
  OpPlan p;
  static const char* kKnown[] = {"BatchNormalization", "LayerNormalization", "FusedAttention", "Resize", "ConvTranspose", "Erf", "Tanh", "Gelu", "Pow", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Gemm", "MatMul", "Add", "Sub",
                                 "Mul", "Div", "Max", "Min", "Softmax", "Concat", "Relu", "Clip", "Sigmoid",
                                 "HardSwish", "LeakyRelu", "Elu", "Abs", "Neg", "Floor", "Ceil", "Sqrt", "Round"};
  bool known = false;
  for (const char* k : kKnown) known = known || op == k;
  for (const char* k : kPortablePointwise) known = known || op == k;
  if (!known) return decline("op not supported by XNNPACK");
  if (ins.empty() || !ins[0].present) return decline("no input");
  // Resize's roi/scales/sizes and FusedAttention's masks may be integers or bool.
  if (op == "Resize" || op == "FusedAttention") {
    for (size_t k = 0; k < (op == "Resize" ? 1u : std::min<size_t>(3, ins.size())); ++k)
      if (ins[k].dtype != DType::kF32) return decline("only f32 is delegated");
  } else if (!all_f32(ins)) {
    return decline("only f32 is delegated");
  }
  const bool binary = op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
  if (ins[0].const_data && !(binary && ins.size() == 2 && !ins[1].const_data))
    return decline("a constant input (folded at export)");
  for (const auto& s : out_shapes)
    if (s.size() > 6) return decline("rank above 6");
  if (op == "Conv") {
    KILN_TRY(plan_conv(attrs, ins, exprs, &p));
  } else if (op == "ConvTranspose") {
    KILN_TRY(plan_conv_transpose(attrs, ins, exprs, &p));
  } else if (op == "MaxPool" || op == "AveragePool") {
    KILN_TRY(plan_pool(op, attrs, ins, out_shapes.size(), exprs, &p));
  } else if (op == "GlobalAveragePool") {
    if (ins[0].shape.size() != 4) return decline("only 2-D pooling");
    KILN_TRY(static_dim(exprs, ins[0].shape[1], "channels", &p.channels));
    p.kind = OpKind::kGlobalAveragePool;
    p.layout = Layout::kNhwc;
  } else if (op == "MatMul" && !(ins[1].const_data && ins[1].shape.size() == 2)) {
    if (ins[0].shape.size() < 2 || ins[1].shape.size() < 2) return decline("MatMul of a vector");
    p.kind = OpKind::kBatchMatMul;
    p.layout = Layout::kPlain;
    p.own_kernel = true;
    int64_t k = const_of(exprs, ins[0].shape.back());
    p.flops_per_output = 2.0 * static_cast<double>(k > 0 ? k : 64);
  } else if (op == "Gemm" || op == "MatMul") {
    KILN_TRY(plan_fc(op, attrs, ins, exprs, &p));
  } else if (binary) {
    if (ins.size() != 2 || !ins[1].present) return decline("takes exactly two operands");
    static const char* kNames[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
    for (int k = 0; k < 6; ++k)
      if (op == kNames[k]) p.binary = static_cast<BinaryOp>(k);
    p.kind = OpKind::kBinary;
    p.layout = Layout::kEither;
  } else if (op == "Softmax") {
    const size_t rank = ins[0].shape.size();
    int64_t axis = attrs.get_int("axis", -1);
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (rank == 4 && axis == 1) p.layout = Layout::kNhwc;
    else if (rank >= 1 && axis == static_cast<int64_t>(rank) - 1) p.layout = Layout::kPlain;
    else return decline("softmax over an axis other than the last or the channels");
    p.kind = OpKind::kSoftmax;
    if (!static_dim(exprs, ins[0].shape[static_cast<size_t>(axis)], "the softmax axis", &p.channels).ok()) {
      if (p.layout != Layout::kPlain) return decline("softmax over channels of a dynamic size");
      p.own_kernel = true;  // a dynamic last axis (attention over a dynamic sequence): Kiln's kernel
    }
    p.flops_per_output = 4;
  } else if (op == "Resize") {
    if (ins[0].shape.size() != 4) return decline("only 4-D inputs");
    for (size_t k = 1; k < ins.size() && k < 3; ++k)  // sizes (#3) may be computed: the output view has them
      if (ins[k].present && !ins[k].const_data) return decline("roi and scales must be constant");
    p.kind = OpKind::kResize;
    p.layout = Layout::kNhwc;
    p.own_kernel = true;
    p.flops_per_output = 4;
  } else if (op == "BatchNormalization") {
    for (size_t k = 1; k < 5; ++k)
      if (k >= ins.size() || !ins[k].const_data) return decline("statistics are not constant");
    if (ins[0].shape.size() < 2) return decline("input of rank below 2");
    KILN_TRY(static_dim(exprs, ins[0].shape[1], "channels", &p.channels));
    p.kind = OpKind::kBatchNorm;
    p.layout = Layout::kEither;
    p.own_kernel = true;
    p.alpha = attrs.get_float("epsilon", 1e-5f);
    p.flops_per_output = 2;
  } else if (op == "FusedAttention") {
    p.kind = OpKind::kAttention;
    p.layout = Layout::kPlain;
    p.own_kernel = true;
    if (ins.size() < 3 || ins[0].shape.size() < 2 || ins[2].shape.size() < 2) return decline("operands of rank below 2");
    const int64_t lk = const_of(exprs, ins[2].shape[ins[2].shape.size() - 2]);
    const int64_t d = const_of(exprs, ins[0].shape.back());
    p.flops_per_output = 4.0 * static_cast<double>(lk > 0 ? lk : 64) * static_cast<double>(d > 0 ? d : 16);
  } else if (op == "LayerNormalization") {
    const size_t rank = ins[0].shape.size();
    int64_t axis = attrs.get_int("axis", -1);
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (rank < 1 || axis != static_cast<int64_t>(rank) - 1) return decline("normalization over other than the last axis");
    if (out_shapes.size() > 1) return decline("the Mean and InvStdDev outputs");
    KILN_TRY(static_dim(exprs, ins[0].shape[rank - 1], "the normalized axis", &p.channels));
    for (size_t k = 1; k < 3 && k < ins.size(); ++k) {
      if (!ins[k].present) continue;
      if (!ins[k].const_data) return decline("Scale and B are not constant");
      size_t n = 1;
      for (core::ExprId d : ins[k].shape) n *= static_cast<size_t>(std::max<int64_t>(0, const_of(exprs, d)));
      if (n != p.channels) return decline("Scale or B broadcast from fewer elements than the normalized axis");
    }
    p.kind = OpKind::kLayerNorm;
    p.layout = Layout::kPlain;
    p.own_kernel = true;
    p.alpha = attrs.get_float("epsilon", 1e-5f);
    p.flops_per_output = 8;
  } else if (op == "Concat") {
    int64_t axis = attrs.get_int("axis", 0);
    const size_t rank = ins[0].shape.size();
    if (axis < 0) axis += static_cast<int64_t>(rank);
    if (rank != 4 || axis != 1) return decline("concatenation along other than the channels of a 4-D tensor");
    for (const Operand& o : ins) {
      size_t c = 0;
      if (o.const_data) return decline("a constant operand");
      KILN_TRY(static_dim(exprs, o.shape[1], "channels", &c));
    }
    p.kind = OpKind::kConcat;
    p.layout = Layout::kNhwc;
  } else {
    KILN_TRY(plan_unary(op, attrs, ins, exprs, &p));
  }
  return p;
}

}  // namespace kiln::delegates::xnnpack
