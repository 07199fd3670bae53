// The XNNPACK delegate's support check: the rules every delegated op shares, then the op's
// own planner from the table (ops.inc); and the fusions export asks about.
#include "delegates/xnnpack/support.h"

#include <cmath>
#include <cstring>

#include "delegates/xnnpack/op.h"
#include "core/status.h"
#include "kernels/portable/window.h"

namespace kiln::delegates::xnnpack {

using core::ExprId;
using core::ExprNode;
using core::ExprOp;
using kernels::kSlotH;
using kernels::kSlotW;

Status decline(const std::string& why) { return unimplemented(why); }

int64_t const_of(const ExprNode* exprs, ExprId e) { return exprs[e].op == ExprOp::kConst ? exprs[e].value : -1; }

bool small(int64_t v) { return v >= 0 && v <= (int64_t{1} << 24); }

Status static_dim(const ExprNode* exprs, ExprId e, const char* what, size_t* out) {
  int64_t v = const_of(exprs, e);
  if (v < 1 || !small(v)) return decline(std::string(what) + " has a dynamic size (XNNPACK fixes it at create)");
  *out = static_cast<size_t>(v);
  return ok_status();
}

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

const OpEntry* find_entry(const std::string& onnx) {
  static const OpEntry kTable[] = {
#define KILN_XNN_OP(name, plan, make) {name, &plan, &make},
#include "delegates/xnnpack/ops.inc"
#undef KILN_XNN_OP
  };
  for (const OpEntry& e : kTable)
    if (onnx == e.onnx) return &e;
  return nullptr;
}

namespace {
bool all_f32(const std::vector<Operand>& ins) {
  for (const Operand& o : ins)
    if (o.present && o.dtype != DType::kF32) return false;
  return true;
}
}  // namespace

Result<OpPlan> plan_op(const std::string& op, core::Attrs attrs, const std::vector<Operand>& ins,
                       const std::vector<std::vector<core::ExprId>>& out_shapes, const core::ExprNode* exprs) {
  const OpEntry* entry = find_entry(op);
  if (!entry) return decline("op not supported by XNNPACK");
  if (ins.empty() || !ins[0].present) return decline("no input");
  // Resize's roi/scales/sizes, FusedAttention's masks and Slice's bounds may be integers or bool.
  if (op == "Resize" || op == "FusedAttention" || op == "Slice") {
    for (size_t k = 0; k < (op == "FusedAttention" ? std::min<size_t>(3, ins.size()) : 1u); ++k)
      if (ins[k].dtype != DType::kF32) return decline("only f32 is delegated");
  } else if (op != "QLinearConv" && op != "QuantizeLinear" && op != "DequantizeLinear" && !all_f32(ins)) {
    // The quantized ops' planners check their dtypes.
    return decline("only f32 is delegated");
  }
  // A binary op may take one constant operand first; every other op reads an activation.
  const bool binary = entry->plan == &plan_binary;
  if (ins[0].const_data && !(binary && ins.size() == 2 && !ins[1].const_data))
    return decline("a constant input (folded at export)");
  for (const auto& s : out_shapes)
    if (s.size() > 6) return decline("rank above 6");
  OpPlan p;
  KILN_TRY(entry->plan(PlanInput{op, attrs, ins, out_shapes, exprs}, &p));
  return p;
}

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

}  // namespace kiln::delegates::xnnpack
