// Delegated convolutions and matrix products (ops.inc: Conv, ConvTranspose, Gemm, MatMul):
// XNNPACK's convolution, deconvolution and fully connected operators, Kiln's dense and
// depthwise kernels where they beat the XNNPACK build we link (dense_conv.h), and Kiln's
// batched MatMul for a right operand computed at run time.
#include <cstdlib>
#include <memory>
#include <vector>

#include "delegates/xnnpack/dense_conv.h"
#include "delegates/xnnpack/winograd_conv.h"
#include "delegates/xnnpack/depthwise_conv.h"
#include "delegates/xnnpack/int8_conv.h"
#include "delegates/xnnpack/op.h"
#include "delegates/xnnpack/pointwise.h"
#include "core/status.h"
#include "kernels/simd/qgemm.h"

namespace kiln::delegates::xnnpack {
namespace {

// Conv and ConvTranspose: 1-D or 2-D, constant weights and bias.
Status conv_operands(const std::vector<Operand>& ins) {
  const size_t rank = ins[0].shape.size();
  if (rank != 3 && rank != 4) return decline("only 1-D and 2-D convolution");
  if (!ins[1].const_data) return decline("weights are not constant");
  if (ins.size() > 2 && ins[2].present && !ins[2].const_data) return decline("bias is not constant");
  return ok_status();
}

// A fully connected layer: y = a @ B (+ C) with B a constant matrix.
Status plan_fully_connected(const PlanInput& in, OpPlan* p) {
  const Operand& a = in.ins[0];
  const Operand& b = in.ins[1];
  if (!b.const_data || b.shape.size() != 2) return decline("the right operand is not a constant matrix");
  bool trans_b = false;
  if (in.op == "Gemm") {
    if (a.shape.size() != 2) return decline("Gemm input of rank other than 2");
    if (in.attrs.get_int("transA", 0) != 0) return decline("transA = 1");
    if (in.attrs.get_float("alpha", 1.f) != 1.f) return decline("alpha != 1");
    trans_b = in.attrs.get_int("transB", 0) != 0;
    if (in.ins.size() > 2 && in.ins[2].present) {
      const Operand& c = in.ins[2];
      if (!c.const_data) return decline("C is not constant");
      if (in.attrs.get_float("beta", 1.f) != 1.f) return decline("beta != 1");
      const int64_t n = const_of(in.exprs, b.shape[trans_b ? 0 : 1]);
      int64_t count = 1;
      for (core::ExprId e : c.shape) count *= const_of(in.exprs, e);
      const bool row = c.shape.size() == 1 || (c.shape.size() == 2 && const_of(in.exprs, c.shape[0]) == 1);
      if (!row || count != n) return decline("C is not a bias of length N");
    }
  } else if (a.shape.size() < 2) {
    return decline("MatMul of a vector");
  }
  size_t k = 0, n = 0;
  KILN_TRY(static_dim(in.exprs, b.shape[trans_b ? 1 : 0], "inner size", &k));
  KILN_TRY(static_dim(in.exprs, b.shape[trans_b ? 0 : 1], "output size", &n));
  p->kind = OpKind::kFullyConnected;
  p->layout = Layout::kPlain;
  p->channels = k;
  p->out_channels = n;
  p->transpose_weights = !trans_b;  // XNNPACK's default is [N, K]
  p->flops_per_output = 2.0 * static_cast<double>(k);
  return ok_status();
}

// The bias of a conv or fully connected layer: a folded Add's constant joined to it, else
// the instruction's own (operand 2), else none.
const float* bias_of(const OpSource& src) {
  if (!src.fused_bias.empty()) return src.fused_bias.data();
  return src.operand_f32(2);
}

// A convolution's gate (export's DelegateOp::gate), kept by the op: Kiln's kernels apply it
// to their output tiles; after XNNPACK's operator it is a pass over the output, in place.
struct Gated {
  void keep(const OpSource& src) {
    if (src.gate) gate = *src.gate, gated = true;
  }
  const Gate* get() const { return gated ? &gate : nullptr; }
  Gate gate;
  bool gated = false;
};

struct XnnConv : XnnOp {
  Status create(const OpSource& src) override {
    gated.keep(src);
    // ONNX weights [M, C/g, (kH,) kW] -> XNNPACK [M, kH, kW, C/g].
    const OpPlan& p = plan;
    const float* w = src.operand_f32(1);
    const size_t m_all = p.groups * p.group_out, k_plane = p.kernel_h * p.kernel_w, cg = p.group_in;
    std::vector<float> packed(m_all * k_plane * cg);
    for (size_t o = 0; o < m_all; ++o)
      for (size_t c = 0; c < cg; ++c)
        for (size_t k = 0; k < k_plane; ++k) packed[(o * k_plane + k) * cg + c] = w[(o * cg + c) * k_plane + k];
    const Padding pad(p);
    return check_create(xnn_create_convolution2d_nhwc_f32(
                            pad.top, pad.right, pad.bottom, pad.left, p.kernel_h, p.kernel_w, p.stride_h, p.stride_w,
                            p.dilation_h, p.dilation_w, p.groups, p.group_in, p.group_out, p.groups * p.group_in,
                            p.groups * p.group_out, packed.data(), bias_of(src), p.out_min, p.out_max, pad.flags, &xop),
                        what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    return check_setup(xnn_setup_convolution2d_nhwc_f32(xop, n, h, w, ins[0]->as<float>(), out->as<float>(), pool), *this);
  }
  Status run() override {
    KILN_TRY(XnnOp::run());
    if (const Gate* g = gated.get()) xnnpack::gate(out->as<float>(), out->as<float>(), numel(*out), g->hard, g->alpha, g->beta, pool);
    return ok_status();
  }
  Gated gated;
};

// QLinearConv on XNNPACK's qc8 (int8, a weight scale per output channel or one for all) or
// qu8 (uint8) convolution. Its requantization (x_scale * w_scale / y_scale in f32, round half
// to even) is the portable kernel's (kernels/portable/quant.h): the same bytes.
struct XnnQConv : XnnOp {
  bool keeps_nan() const override { return true; }  // int8 in and out: no NaN to carry
  Status create(const OpSource& src) override {
    const OpPlan& p = plan;
    const auto& o = src.operands;
    const size_t m_all = p.groups * p.group_out, k_plane = p.kernel_h * p.kernel_w, cg = p.group_in;
    const auto* w = static_cast<const uint8_t*>(o[3].const_data);  // bytes of i8 or u8
    std::vector<uint8_t> packed(m_all * k_plane * cg);
    for (size_t oc = 0; oc < m_all; ++oc)
      for (size_t c = 0; c < cg; ++c)
        for (size_t k = 0; k < k_plane; ++k) packed[(oc * k_plane + k) * cg + c] = w[(oc * cg + c) * k_plane + k];
    const float xs = *static_cast<const float*>(o[1].const_data), ys = *static_cast<const float*>(o[6].const_data);
    const auto* ws = static_cast<const float*>(o[4].const_data);
    const auto* bias = o.size() > 8 && o[8].present ? static_cast<const int32_t*>(o[8].const_data) : nullptr;
    std::vector<core::AttrRef> storage;
    const core::Attrs attrs = src.attrs(&storage);
    const Padding pad(p);
    u8 = o[0].dtype == DType::kU8;
    if (u8) {
      const int32_t lo = std::max<int64_t>(0, attrs.get_int("clamp_min", 0)), hi = std::min<int64_t>(255, attrs.get_int("clamp_max", 255));
      return check_create(xnn_create_convolution2d_nhwc_qu8(
                              pad.top, pad.right, pad.bottom, pad.left, p.kernel_h, p.kernel_w, p.stride_h, p.stride_w,
                              p.dilation_h, p.dilation_w, p.groups, p.group_in, p.group_out, p.groups * p.group_in,
                              p.groups * p.group_out, *static_cast<const uint8_t*>(o[2].const_data), xs,
                              *static_cast<const uint8_t*>(o[5].const_data), ws[0], packed.data(), bias,
                              *static_cast<const uint8_t*>(o[7].const_data), ys, static_cast<uint8_t>(lo),
                              static_cast<uint8_t>(hi), pad.flags, &xop),
                          what);
    }
    int64_t ws_count = 1;
    for (core::ExprId e : o[4].shape) ws_count *= const_of(src.exprs->data(), e);
    std::vector<float> scales(m_all);
    for (size_t oc = 0; oc < m_all; ++oc) scales[oc] = ws[ws_count == 1 ? 0 : oc];
    const int32_t lo = std::max<int64_t>(-128, attrs.get_int("clamp_min", -128)), hi = std::min<int64_t>(127, attrs.get_int("clamp_max", 127));
    return check_create(xnn_create_convolution2d_nhwc_qc8(
                            pad.top, pad.right, pad.bottom, pad.left, p.kernel_h, p.kernel_w, p.stride_h, p.stride_w,
                            p.dilation_h, p.dilation_w, p.groups, p.group_in, p.group_out, p.groups * p.group_in,
                            p.groups * p.group_out, *static_cast<const int8_t*>(o[2].const_data), xs, scales.data(),
                            reinterpret_cast<const int8_t*>(packed.data()), bias, *static_cast<const int8_t*>(o[7].const_data),
                            ys, static_cast<int8_t>(lo), static_cast<int8_t>(hi), pad.flags, &xop),
                        what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    if (u8)
      return check_setup(xnn_setup_convolution2d_nhwc_qu8(xop, n, h, w, ins[0]->as<uint8_t>(), out->as<uint8_t>(), pool), *this);
    return check_setup(xnn_setup_convolution2d_nhwc_qc8(xop, n, h, w, ins[0]->as<int8_t>(), out->as<int8_t>(), pool), *this);
  }
  bool u8 = false;
};

// Value k of a constant 8-bit or int32 operand (element 0 when it holds one value).
int32_t int_operand(const Operand& o, const OpSource& src, size_t k) {
  int64_t count = 1;
  for (core::ExprId e : o.shape) count *= const_of(src.exprs->data(), e);
  const size_t at = count == 1 ? 0 : k;
  if (o.dtype == DType::kI8) return static_cast<const int8_t*>(o.const_data)[at];
  if (o.dtype == DType::kU8) return static_cast<const uint8_t*>(o.const_data)[at];
  return static_cast<const int32_t*>(o.const_data)[at];
}

DenseConvGeometry dense_geometry(const Op& op);

// The quantization around a QLinearConv, as Kiln's int8 kernels read it (int8_conv.h); the
// per-channel vectors live in `wz` and `ws`.
Int8ConvSpec int8_spec(const OpSource& src, const OpPlan& p, std::vector<int32_t>* wz, std::vector<float>* ws) {
  const auto& o = src.operands;
  Int8ConvSpec s;
  s.m = p.groups * p.group_out;
  s.c = p.group_in;
  s.kh = p.kernel_h;
  s.kw = p.kernel_w;
  s.w = static_cast<const uint8_t*>(o[3].const_data);
  s.w_signed = o[3].dtype == DType::kI8;
  s.x_signed = o[0].dtype == DType::kI8;
  s.x_scale = *static_cast<const float*>(o[1].const_data);
  s.x_zero = int_operand(o[2], src, 0);
  s.y_scale = *static_cast<const float*>(o[6].const_data);
  s.y_zero = int_operand(o[7], src, 0);
  wz->resize(s.m);
  ws->resize(s.m);
  int64_t ws_count = 1;
  for (core::ExprId e : o[4].shape) ws_count *= const_of(src.exprs->data(), e);
  for (size_t oc = 0; oc < s.m; ++oc) {
    (*wz)[oc] = int_operand(o[5], src, oc);
    (*ws)[oc] = static_cast<const float*>(o[4].const_data)[ws_count == 1 ? 0 : oc];
  }
  s.w_zero = wz->data();
  s.w_scale = ws->data();
  if (o.size() > 8 && o[8].present) s.bias = static_cast<const int32_t*>(o[8].const_data);
  std::vector<core::AttrRef> storage;
  const core::Attrs attrs = src.attrs(&storage);
  const bool y_signed = o[7].dtype == DType::kI8;
  s.lo = static_cast<int32_t>(std::max<int64_t>(y_signed ? -128 : 0, attrs.get_int("clamp_min", -128)));
  s.hi = static_cast<int32_t>(std::min<int64_t>(y_signed ? 127 : 255, attrs.get_int("clamp_max", 255)));
  return s;
}

DenseConvGeometry dense_geometry(const Op& op);

// QLinearConv on Kiln's int8 kernels (int8_conv.h), any mix of int8/uint8: dense (groups = 1)
// or depthwise.
template <typename Weights, void (*kPack)(const Int8ConvSpec&, Weights*),
          void (*kRun)(const Weights&, const DenseConvGeometry&, const uint8_t*, uint8_t*, pthreadpool_t)>
struct Int8ConvOp : Op {
  Status create(const OpSource& src) override {
    std::vector<int32_t> wz;
    std::vector<float> ws;
    kPack(int8_spec(src, plan, &wz, &ws), &weights);
    return ok_status();
  }
  Status setup() override {
    geom = dense_geometry(*this);
    return ok_status();
  }
  Status run() override {
    kRun(weights, geom, static_cast<const uint8_t*>(ins[0]->data), static_cast<uint8_t*>(out->data), pool);
    return ok_status();
  }
  Weights weights;
  DenseConvGeometry geom;
};
using Int8Conv = Int8ConvOp<Int8ConvWeights, pack_int8_conv, int8_conv>;
using Int8Depthwise = Int8ConvOp<Int8DepthwiseWeights, pack_int8_depthwise, int8_depthwise>;

struct XnnDeconv : XnnOp {
  Status create(const OpSource& src) override {
    // ONNX weights [G*Cg, Mg, (kH,) kW] -> XNNPACK [G, Mg, kH, kW, Cg].
    const OpPlan& p = plan;
    const float* w = src.operand_f32(1);
    const size_t g_n = p.groups, cg = p.group_in, mg = p.group_out, k_plane = p.kernel_h * p.kernel_w;
    std::vector<float> packed(g_n * mg * k_plane * cg);
    for (size_t g = 0; g < g_n; ++g)
      for (size_t ic = 0; ic < cg; ++ic)
        for (size_t oc = 0; oc < mg; ++oc)
          for (size_t k = 0; k < k_plane; ++k)
            packed[((g * mg + oc) * k_plane + k) * cg + ic] = w[((g * cg + ic) * mg + oc) * k_plane + k];
    return check_create(xnn_create_deconvolution2d_nhwc_f32(p.pad_top, p.pad_right, p.pad_bottom, p.pad_left, p.kernel_h,
                                                            p.kernel_w, p.stride_h, p.stride_w, p.dilation_h,
                                                            p.dilation_w, p.groups, cg, mg, g_n * cg, g_n * mg,
                                                            packed.data(), src.operand_f32(2), p.out_min, p.out_max, 0,
                                                            &xop),
                        what);
  }
  Status setup() override {
    size_t n, h, w, c;
    nhwc_dims(*ins[0], in_twin[0], &n, &h, &w, &c);
    return check_setup(xnn_setup_deconvolution2d_nhwc_f32(xop, n, h, w, plan.adjust_h, plan.adjust_w, ins[0]->as<float>(),
                                                          out->as<float>(), pool),
                       *this);
  }
};

struct XnnFullyConnected : XnnOp {
  Status create(const OpSource& src) override {
    const OpPlan& p = plan;
    return check_create(xnn_create_fully_connected_nc_f32(p.channels, p.out_channels, p.channels, p.out_channels,
                                                          src.operand_f32(1), bias_of(src), p.out_min, p.out_max,
                                                          p.transpose_weights ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0, &xop),
                        what);
  }
  Status setup() override {
    return check_setup(xnn_setup_fully_connected_nc_f32(xop, numel(*ins[0]) / plan.channels, ins[0]->as<float>(),
                                                        out->as<float>(), pool),
                       *this);
  }
};

// Kiln's dense and depthwise kernels: the geometry at the bound-to shape (SAME_UPPER pads from
// the actual sizes).
DenseConvGeometry dense_geometry(const Op& op) {
  const OpPlan& p = op.plan;
  const TensorView& x = *op.ins[0];
  DenseConvGeometry g;
  g.out_min = p.out_min;
  g.out_max = p.out_max;
  if (p.kind == OpKind::kFullyConnected) {
    g.batch = numel(x) / p.channels;
    g.in_stride = p.channels;
    return g;
  }
  size_t c, m;
  nhwc_dims(x, op.in_twin[0], &g.batch, &g.in_h, &g.in_w, &c);
  nhwc_dims(*op.out, op.out_twin, &g.batch, &g.out_h, &g.out_w, &m);
  g.in_stride = c;
  g.stride_h = p.stride_h;
  g.stride_w = p.stride_w;
  g.dilation_h = p.dilation_h;
  g.dilation_w = p.dilation_w;
  g.pad_top = p.pad_top;
  g.pad_left = p.pad_left;
  if (p.same_upper) {
    g.pad_top = same_upper_pad(g.in_h, g.out_h, p.stride_h, p.kernel_h, p.dilation_h);
    g.pad_left = same_upper_pad(g.in_w, g.out_w, p.stride_w, p.kernel_w, p.dilation_w);
  }
  return g;
}

// Where a convolution writes a Concat's slice (Op::into): the output's pixels `into`'s channels
// apart, from its slice's first channel; else its own output.
Status slice_geometry(const Op& op, DenseConvGeometry* g) {
  if (!op.into) return ok_status();
  size_t n, h, w, total, m;
  nhwc_dims(*op.out, op.out_twin, &n, &h, &w, &m);
  nhwc_dims(*op.into, true, &n, &h, &w, &total);
  if (n != g->batch || h != g->out_h || w != g->out_w || op.into_channel + m > total)
    return internal_error(op.what + ": its output does not fit its slice of the Concat");
  g->out_stride = total;
  return ok_status();
}
// A convolution's geometry at this bind, its gate, and the Concat slice it writes (the setup
// of the ops that write slices).
Status output_geometry(const Op& op, const Gated& gated, DenseConvGeometry* g) {
  *g = dense_geometry(op);
  g->gate = gated.get();
  return slice_geometry(op, g);
}
float* conv_output(const Op& op) { return op.into ? op.into->as<float>() + op.into_channel : op.out->as<float>(); }

struct DepthwiseConv : Op {
  Status create(const OpSource& src) override {
    gated.keep(src);
    pack_depthwise(src.operand_f32(1), bias_of(src), plan.groups, plan.kernel_h, plan.kernel_w, &weights);
    return ok_status();
  }
  bool can_feed() const override { return true; }
  bool in_next() const override { return forward; }
  Status setup() override {
    geom = dense_geometry(*this);
    geom.gate = gated.get();
    // Only where the consumer's output does not share bytes with this op's input: the fused
    // pass writes output rows while other workers still read input rows. Files exported before
    // the planner kept the input alive through the consumer (feeds_pointwise) placed them
    // together, and at 2 threads on a loaded host that gave wrong outputs.
    forward = consumer && depthwise_pointwise_pays(weights, geom) && !consumer_overlaps_input();
    return ok_status();
  }
  Status run() override {
    if (!forward) depthwise_conv(weights, geom, ins[0]->as<float>(), out->as<float>(), pool);
    return ok_status();
  }
  bool consumer_overlaps_input() const {
    const TensorView* o = consumer->into ? consumer->into : consumer->out;
    const char* x = static_cast<const char*>(ins[0]->data);
    const char* y = static_cast<const char*>(o->data);
    return x < y + o->nbytes() && y < x + ins[0]->nbytes();
  }
  DepthwiseWeights weights;
  DenseConvGeometry geom;
  Gated gated;
  const Op* consumer = nullptr;  ///< the 1x1 convolution that took this op (take_feeder)
  bool forward = false;          ///< at this bind, the consumer computes this op's rows
};

struct DenseConv : Op {
  Status create(const OpSource& src) override {
    gated.keep(src);
    const OpPlan& p = plan;
    if (p.kind == OpKind::kConv)
      pack_dense_conv(src.operand_f32(1), bias_of(src), p.group_out, p.group_in, p.kernel_h, p.kernel_w, false, &weights);
    else
      pack_dense_conv(src.operand_f32(1), bias_of(src), p.out_channels, p.channels, 1, 1, p.transpose_weights, &weights);
    return ok_status();
  }
  bool writes_slices() const override { return plan.kind == OpKind::kConv; }
  bool take_feeder(Op* producer) override {
    const OpPlan& p = plan;
    if (!producer->can_feed() || p.kind != OpKind::kConv || p.kernel_h != 1 || p.kernel_w != 1 || p.stride_h != 1 ||
        p.stride_w != 1 || p.pad_top || p.pad_left || p.pad_bottom || p.pad_right || p.groups != 1)
      return false;
    feeder = static_cast<DepthwiseConv*>(producer);
    feeder->consumer = this;
    return true;
  }
  Status setup() override {
    KILN_TRY(output_geometry(*this, gated, &geom));
    if (feeder) {  // a worker's scratch per thread, sized at the first bind (the bound, the most threads)
      slots = pool ? pthreadpool_get_threads_count(pool) : 1;
      const size_t need = slots * depthwise_pointwise_scratch_floats(feeder->weights, feeder->geom);
      if (scratch.size() < need) scratch.resize(need);
      slots = scratch.size() / depthwise_pointwise_scratch_floats(feeder->weights, feeder->geom);
    }
    return ok_status();
  }
  Status run() override {
    if (feeder && feeder->forward)
      depthwise_pointwise(feeder->weights, feeder->geom, weights, geom, feeder->ins[0]->as<float>(),
                          conv_output(*this), scratch.data(), slots, pool);
    else
      dense_conv(weights, geom, ins[0]->as<float>(), conv_output(*this), pool);
    return ok_status();
  }
  DenseConvWeights weights;
  DenseConvGeometry geom;
  Gated gated;
  DepthwiseConv* feeder = nullptr;  ///< the depthwise layer whose output only this op reads
  std::vector<float> scratch;       ///< depthwise_pointwise's workers' rows
  size_t slots = 1;
};

// A grouped convolution whose groups are dense (regnet's and resnext's 3x3 layers, 16 or more
// channels a group) on Kiln's kernel, one packing per group (grouped_dense_conv).
struct GroupedConv : Op {
  Status create(const OpSource& src) override {
    gated.keep(src);
    const OpPlan& p = plan;
    const float* w = src.operand_f32(1);
    const float* bias = bias_of(src);
    weights.resize(p.groups);
    for (size_t gi = 0; gi < p.groups; ++gi)
      pack_dense_conv(w + gi * p.group_out * p.group_in * p.kernel_h * p.kernel_w, bias ? bias + gi * p.group_out : nullptr,
                      p.group_out, p.group_in, p.kernel_h, p.kernel_w, false, &weights[gi]);
    return ok_status();
  }
  bool writes_slices() const override { return true; }
  Status setup() override {
    KILN_TRY(output_geometry(*this, gated, &geom));
    if (geom.out_stride == 0) geom.out_stride = plan.groups * plan.group_out;
    return ok_status();
  }
  Status run() override {
    grouped_dense_conv(weights.data(), weights.size(), geom, ins[0]->as<float>(), conv_output(*this), pool);
    return ok_status();
  }
  std::vector<DenseConvWeights> weights;
  DenseConvGeometry geom;
  Gated gated;
};

// A dense 3x3 stride-1 convolution as Winograd (winograd_conv.h): F(4x4, 3x3) where it pays at
// this bind and was packed, else F(2x2, 3x3), else, with few tiles, the direct kernel. It keeps
// the direct and F(2x2) packings (2.8x the weights' bytes), and F(4x4)'s (4x more) when the
// layer's largest run (the first setup: Method::create binds at the bound, with the most
// threads) has tiles enough for it; that setup also sizes the workers' scratch.
struct WinogradConv : Op {
  Status create(const OpSource& src) override {
    gated.keep(src);
    original = src.operand_f32(1);  // the program's constant: it outlives the Method
    pack_winograd(original, bias_of(src), plan.group_out, plan.group_in, 2, &f2);
    pack_dense_conv(original, bias_of(src), plan.group_out, plan.group_in, 3, 3, false, &direct);
    return ok_status();
  }
  bool writes_slices() const override { return true; }
  Status setup() override {
    KILN_TRY(output_geometry(*this, gated, &geom));
    if (!bound_seen) {
      bound_seen = true;
      if (winograd_tile(geom, plan.group_in, plan.group_out) == 4)
        pack_winograd(original, direct.bias.data(), plan.group_out, plan.group_in, 4, &f4);
    }
    const size_t slots = pool ? pthreadpool_get_threads_count(pool) : 1;
    const size_t per_slot = std::max(winograd_scratch_floats(f2), f4.panels.empty() ? 0 : winograd_scratch_floats(f4));
    if (scratch.size() < slots * per_slot) scratch.resize(slots * per_slot);
    return ok_status();
  }
  Status run() override {
    const WinogradWeights* w = !f4.panels.empty() && winograd_tile(geom, plan.group_in, plan.group_out) == 4 ? &f4
                               : winograd_pays(geom, 2)                                                    ? &f2
                                                                                                           : nullptr;
    if (w)
      winograd_conv(*w, geom, ins[0]->as<float>(), conv_output(*this), scratch.data(),
                    scratch.size() / winograd_scratch_floats(*w), pool);
    else
      dense_conv(direct, geom, ins[0]->as<float>(), conv_output(*this), pool);
    return ok_status();
  }
  const float* original = nullptr;
  WinogradWeights f2, f4;
  DenseConvWeights direct;
  DenseConvGeometry geom;
  Gated gated;
  std::vector<float> scratch;
  bool bound_seen = false;
};

// y[t] = a[t] @ b[t] with b computed at run time (attention's Q K^T and A V), read in place.
struct BatchMatMul : Op {
  Status create(const OpSource& src) override {
    if (!ins[1]) ins[1] = &(*src.views)[src.dop->inputs()->Get(1)];  // a constant B: read from the file
    return ok_status();
  }
  Status setup() override {
    mm = matmul_geometry(ins[0]->dims, ins[0]->rank, ins[1]->dims, ins[1]->rank);
    return ok_status();
  }
  Status run() override {
    batch_matmul(mm, ins[0]->as<float>(), ins[1]->as<float>(), out->as<float>(), pool);
    return ok_status();
  }
  MatMulGeometry mm;
};

}  // namespace

Status plan_conv(const PlanInput& in, OpPlan* p) {
  KILN_TRY(conv_operands(in.ins));
  const Operand& x = in.ins[0];
  const Operand& w = in.ins[1];
  const size_t rank = x.shape.size();
  const int nsp = static_cast<int>(rank) - 2;
  KILN_TRY(window_plan(in.attrs, nsp, p));
  if (p->same_upper && (p->dilation_h > 1 || p->dilation_w > 1)) return decline("SAME padding with dilation");
  size_t cin = 0, cout = 0, kh = 1, kw = 0;
  KILN_TRY(static_dim(in.exprs, x.shape[1], "input channels", &cin));
  KILN_TRY(static_dim(in.exprs, w.shape[0], "output channels", &cout));
  if (nsp == 2) KILN_TRY(static_dim(in.exprs, w.shape[2], "kernel height", &kh));
  KILN_TRY(static_dim(in.exprs, w.shape[rank - 1], "kernel width", &kw));
  const int64_t group = in.attrs.get_int("group", 1);
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

namespace {

// What XNNPACK's quantized convolutions take: int8 x, weights and output with symmetric
// weights (qc8, per channel or per tensor), or uint8 all three with one weight scale (qu8).
Status xnn_qconv_takes(const std::vector<Operand>& ins, const core::ExprNode* exprs) {
  const DType xt = ins[0].dtype, wt = ins[3].dtype, yt = ins[7].dtype;
  const bool s8 = xt == DType::kI8 && wt == DType::kI8 && yt == DType::kI8;
  const bool u8 = xt == DType::kU8 && wt == DType::kU8 && yt == DType::kU8;
  if (!s8 && !u8) return decline("grouped: int8 x, weights and output (qc8), or uint8 all three (qu8); not a mix");
  int64_t wz_count = 1;
  for (core::ExprId e : ins[5].shape) wz_count *= const_of(exprs, e);
  if (s8) {
    const int8_t* wz = static_cast<const int8_t*>(ins[5].const_data);
    for (int64_t k = 0; k < wz_count; ++k)
      if (wz[k] != 0) return decline("grouped int8 weights with a nonzero zero point");
  } else if (wz_count != 1) {
    return decline("grouped uint8 weights quantized per channel");
  }
  return ok_status();
}

bool is_8bit(DType t) { return t == DType::kI8 || t == DType::kU8; }

// Kiln's int8 kernels take the convolution: groups = 1, or depthwise, and a window they fit.
bool int8_dense(const OpPlan& p) { return p.groups == 1 && int8_conv_fits(p.group_in, p.kernel_h, p.kernel_w); }
bool int8_takes_depthwise(const OpPlan& p) {
  return p.groups > 1 && p.group_in == 1 && p.group_out == 1 && int8_depthwise_fits(p.kernel_h, p.kernel_w);
}

}  // namespace

// QLinearConv (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?): the float planner's
// geometry. Dense ones (groups = 1) run on Kiln's int8 kernel, any mix of int8 and uint8;
// grouped and depthwise ones on XNNPACK's (xnn_qconv_takes). Everything but x is constant.
Status plan_qconv(const PlanInput& in, OpPlan* p) {
  const std::vector<Operand>& ins = in.ins;
  if (ins.size() < 8) return decline("missing operands");
  for (size_t k = 1; k < ins.size(); ++k)
    if (ins[k].present && !ins[k].const_data) return decline("scales, zero points, weights and bias must be constant");
  if (!ins[2].present || !ins[5].present || !ins[7].present) return decline("a zero point is omitted");
  if (!is_8bit(ins[0].dtype) || !is_8bit(ins[3].dtype) || !is_8bit(ins[7].dtype))
    return decline("x, weights and output must be int8 or uint8");
  std::vector<Operand> geometry = {ins[0], ins[3]};
  if (ins.size() > 8 && ins[8].present) geometry.push_back(ins[8]);
  KILN_TRY(plan_conv(PlanInput{in.op, in.attrs, geometry, in.out_shapes, in.exprs}, p));
  if (!int8_dense(*p) && !int8_takes_depthwise(*p)) KILN_TRY(xnn_qconv_takes(ins, in.exprs));
  p->kind = OpKind::kQConv;
  return ok_status();
}

Status plan_conv_transpose(const PlanInput& in, OpPlan* p) {
  KILN_TRY(conv_operands(in.ins));
  const Operand& x = in.ins[0];
  const Operand& w = in.ins[1];
  const size_t rank = x.shape.size();
  if (in.attrs.has("output_shape")) return decline("attribute 'output_shape' is not supported");
  const int nsp = static_cast<int>(rank) - 2;
  KILN_TRY(window_plan(in.attrs, nsp, p));
  if (p->same_upper || in.attrs.str_equals("auto_pad", "VALID")) return decline("auto_pad is not supported");
  size_t cin = 0, mg = 0, kh = 1, kw = 0;
  KILN_TRY(static_dim(in.exprs, x.shape[1], "input channels", &cin));
  KILN_TRY(static_dim(in.exprs, w.shape[1], "output channels per group", &mg));
  if (nsp == 2) KILN_TRY(static_dim(in.exprs, w.shape[2], "kernel height", &kh));
  KILN_TRY(static_dim(in.exprs, w.shape[rank - 1], "kernel width", &kw));
  const int64_t group = in.attrs.get_int("group", 1);
  if (group < 1 || cin % static_cast<size_t>(group) != 0) return decline("group does not divide the channels");
  const int64_t* adj = in.attrs.ints("output_padding");
  if (adj && in.attrs.ints_size("output_padding") == static_cast<uint32_t>(nsp)) {
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

Status plan_gemm(const PlanInput& in, OpPlan* p) { return plan_fully_connected(in, p); }

// MatMul: a fully connected layer when the right operand is a constant matrix, else Kiln's
// batched kernel (B read in place).
Status plan_matmul(const PlanInput& in, OpPlan* p) {
  const Operand& b = in.ins[1];
  if (b.const_data && b.shape.size() == 2) return plan_fully_connected(in, p);
  if (in.ins[0].shape.size() < 2 || b.shape.size() < 2) return decline("MatMul of a vector");
  p->kind = OpKind::kBatchMatMul;
  p->layout = Layout::kPlain;
  p->own_kernel = true;
  const int64_t k = const_of(in.exprs, in.ins[0].shape.back());
  p->flops_per_output = 2.0 * static_cast<double>(k > 0 ? k : 64);
  return ok_status();
}

std::unique_ptr<Op> make_conv(const OpPlan& p, const OpSource& src) {
  if (p.kind == OpKind::kBatchMatMul) return std::make_unique<BatchMatMul>();
  if (p.kind == OpKind::kQConv) {
    // Kiln's kernels where they measured faster than XNNPACK's (AVX-512 VNNI: mobilenet_v2
    // int8 at 0.58x of Kiln's float, against 1.1-1.7x on XNNPACK's qc8 or Kiln's AVX2 row;
    // bench/results/int8_bench.md), or where XNNPACK has no operator for the dtypes.
    const bool xnn = xnn_qconv_takes(src.operands, src.exprs->data()).ok();
    const bool faster = std::string(simd::qgemm_isa()) == "avx512vnni";
    if (int8_dense(p) && (faster || !xnn)) return std::make_unique<Int8Conv>();
    if (int8_takes_depthwise(p) && (faster || !xnn)) return std::make_unique<Int8Depthwise>();
    return std::make_unique<XnnQConv>();
  }
  // Dense convolutions and fully connected layers run on Kiln's kernel where the CPU has it;
  // depthwise ones too, except strided windows XNNPACK's unipass microkernels cover (4, 9 and
  // 25 taps; others, such as 7x7, fall back to a grouped GEMM there). Measured per layer
  // (bench/layer_bench.py, batch 1 at 224 and batch 4 at 320, bench/results/issue25_profile.md):
  // at stride 1 Kiln's kernel takes 0.58-0.98x XNNPACK's time on 14 of 18 layers; at stride 2
  // XNNPACK's is ahead on half of them (Kiln's 0.79-1.31x). Kiln's AVX-512 row (16-channel
  // blocks) takes the strided 5x5 windows too: 0.57-0.90x XNNPACK's time on the four of
  // bench/layer_bench.py (3x3 stride 2 stays mixed there, 0.70-1.10x: XNNPACK keeps it unless
  // the layer is gated).
  if (dense_conv_available()) {
    const size_t taps = p.kernel_h * p.kernel_w;
    const bool unpadded = !p.same_upper && p.pad_top == 0 && p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
    const bool conv =
        p.kind == OpKind::kConv && dense_conv_fits(p.kernel_h, p.kernel_w, unpadded && p.dilation_w == 1);
    // 3x3 stride 1 as Winograd F(2x2, 3x3): resnet18's layers at batch 4 and 320 took 0.54-0.74x
    // the direct kernel's time (bench/layer_bench.py --kind dense). KILN_NO_WINOGRAD=1 keeps
    // them direct (DEVELOPERS.md), to measure one against the other.
    if (conv && winograd_fits(p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.groups,
                              p.group_in, p.group_out) && !std::getenv("KILN_NO_WINOGRAD"))
      return std::make_unique<WinogradConv>();
    if ((conv && p.groups == 1) || p.kind == OpKind::kFullyConnected) return std::make_unique<DenseConv>();
    // Groups of 16 channels or more in and out (a whole block of outputs each; fewer would leave
    // lanes idle): regnet_x_400mf's 3x3 layers at 2x128x128 ran at 31 GFLOP/s on XNNPACK's
    // operator, 1.1-1.8x ONNX Runtime's time; here 38-48 GFLOP/s, the model 1.22 -> 0.99x ONNX
    // Runtime's time at 1 thread, 1.19 -> 1.02x at 2 (bench/heavy_profile.py, AMD Zen 3).
    if (conv && p.groups > 1 && p.group_in >= 16 && p.group_out % kDenseBlock == 0) return std::make_unique<GroupedConv>();
    const bool strided = p.stride_h > 1 || p.stride_w > 1;
    // A gated strided 3x3 takes the 16-lane row too: after XNNPACK's operator the gate is a
    // second pass over the output, from memory (efficientnet_b0 at 4x320: its four strided
    // depthwise layers 7.8 -> 7.5 ms on Intel AVX-512). So does one of few channels, where the
    // row's runs of quads hold their weights in registers: 16 and 24 channels at 112x112 took
    // 0.41 and 0.69x XNNPACK's time, 96 and 144 0.95-1.05x, 576 1.05-1.3x (bench/layer_bench.py
    // --layers k3s2, batch 1 at 224 and 4 at 320). On the AVX2 row (8-channel blocks) up to 72
    // channels: 16-72 channels at stride 2 (3x3 and 5x5, batch 2 at 128) took 0.58-0.87x
    // XNNPACK's time at 1 thread, 0.60-0.95x at 2; 96 and 144 at 3x3 1.5-2.0x, 144 and 672 at
    // 5x5 1.0-1.05x.
    const bool wide = depthwise_lanes() == 16;
    const bool few = p.groups <= (wide ? 160 : 72);
    const bool unipass =
        taps == 4 || (strided && ((taps == 9 && !((wide && src.gate) || few)) || (taps == 25 && !(wide || few))));
    if (p.kind == OpKind::kConv && p.groups > 1 && p.group_in == 1 && p.group_out == 1 && !unipass &&
        depthwise_fits(p.kernel_h, p.kernel_w))
      return std::make_unique<DepthwiseConv>();
  }
  if (p.kind == OpKind::kConvTranspose) return std::make_unique<XnnDeconv>();
  if (p.kind == OpKind::kFullyConnected) return std::make_unique<XnnFullyConnected>();
  return std::make_unique<XnnConv>();
}

}  // namespace kiln::delegates::xnnpack
