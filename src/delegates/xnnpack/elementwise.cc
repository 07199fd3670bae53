// Delegated elementwise ops (ops.inc): binary ops with numpy broadcasting and XNNPACK's unary
// operators; Kiln's vectorized erf, tanh and GELU and its gates (x * sigmoid(x) in one pass);
// pointwise ops XNNPACK lacks, run by their portable kernels on the region's buffers (layout
// does not matter to them, so they do not split a region); and BatchNormalization as a
// per-channel affine map; PRelu.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "delegates/xnnpack/op.h"
#include "delegates/xnnpack/pointwise.h"
#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::delegates::xnnpack {
namespace {

// `dims` (rank r) broadcast to `rank` (leading 1s), channels moved last when `nhwc`: into
// out[0, rank) (room for kMaxRank), without allocating (bind calls it).
void broadcast_dims(const int64_t* dims, int r, size_t rank, bool nhwc, size_t* out) {
  size_t s[kMaxRank];
  const size_t lead = rank - static_cast<size_t>(r);
  for (size_t k = 0; k < lead; ++k) s[k] = 1;
  for (int k = 0; k < r; ++k) s[lead + static_cast<size_t>(k)] = static_cast<size_t>(dims[k]);
  if (!nhwc || rank < 3) {
    std::copy(s, s + rank, out);
    return;
  }
  out[0] = s[0];
  for (size_t k = 2; k < rank; ++k) out[k - 1] = s[k];
  out[rank - 1] = s[1];
}

Shape broadcast_shape(const int64_t* dims, int r, size_t rank, bool nhwc) {
  Shape s(rank);
  broadcast_dims(dims, r, rank, nhwc, s.data());
  return s;
}

// Row-major permutation of a small constant (channels-first -> channels-last).
std::vector<float> permute_const(const float* src, const Shape& padded) {
  const size_t rank = padded.size();
  size_t total = 1;
  for (size_t d : padded) total *= d;
  std::vector<float> out(total);
  std::vector<size_t> src_stride(rank, 1);
  for (size_t k = rank - 1; k-- > 0;) src_stride[k] = src_stride[k + 1] * padded[k + 1];
  std::vector<size_t> perm = {0};
  for (size_t k = 2; k < rank; ++k) perm.push_back(k);
  perm.push_back(1);
  std::vector<size_t> idx(rank, 0);
  for (size_t o = 0; o < total; ++o) {
    size_t s = 0;
    for (size_t k = 0; k < rank; ++k) s += idx[k] * src_stride[perm[k]];
    out[o] = src[s];
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < padded[perm[k]]) break;
      idx[k] = 0;
    }
  }
  return out;
}

struct XnnBinary : XnnOp {
  Status create(const OpSource& src) override {
    bind_constants(src);
    const float lo = plan.out_min, hi = plan.out_max;
    switch (plan.binary) {
      case BinaryOp::kAdd: return check_create(xnn_create_add_nd_f32(lo, hi, 0, &xop), what);
      case BinaryOp::kSub: return check_create(xnn_create_subtract_nd_f32(lo, hi, 0, &xop), what);
      case BinaryOp::kMul: return check_create(xnn_create_multiply_nd_f32(lo, hi, 0, &xop), what);
      case BinaryOp::kDiv: return check_create(xnn_create_divide_nd_f32(lo, hi, 0, &xop), what);
      case BinaryOp::kMax: return check_create(xnn_create_maximum_nd_f32(0, &xop), what);
      case BinaryOp::kMin: return check_create(xnn_create_minimum_nd_f32(0, &xop), what);
    }
    return unimplemented(what + ": no XNNPACK operator");
  }
  Status setup() override {
    const size_t rank = static_cast<size_t>(out->rank);
    size_t sh[2][kMaxRank], sh_rank[2];  // on the stack: bind allocates nothing
    const float* ptr[2];
    for (int k = 0; k < 2; ++k) {
      if (!ins[k]) {
        sh_rank[k] = const_shape[k].size();
        std::copy(const_shape[k].begin(), const_shape[k].end(), sh[k]);
        ptr[k] = const_ptr[k];
      } else {
        sh_rank[k] = rank;
        broadcast_dims(ins[k]->dims, ins[k]->rank, rank, in_twin[k] ? false : nhwc, sh[k]);
        ptr[k] = ins[k]->as<float>();
      }
    }
    scale_ = scale_pattern(sh, sh_rank, rank, ptr);
    if (scale_.active) return ok_status();  // run() computes it (no XNNPACK setup needed)
    auto setup = [&](auto fn) {
      return check_setup(fn(xop, sh_rank[0], sh[0], sh_rank[1], sh[1], ptr[0], ptr[1], out->as<float>(), pool), *this);
    };
    switch (plan.binary) {
      case BinaryOp::kAdd: return setup(xnn_setup_add_nd_f32);
      case BinaryOp::kSub: return setup(xnn_setup_subtract_nd_f32);
      case BinaryOp::kMul: return setup(xnn_setup_multiply_nd_f32);
      case BinaryOp::kDiv: return setup(xnn_setup_divide_nd_f32);
      case BinaryOp::kMax: return setup(xnn_setup_maximum_nd_f32);
      case BinaryOp::kMin: return setup(xnn_setup_minimum_nd_f32);
    }
    return internal_error(what + ": unknown binary op");
  }
  Status run() override {
    if (!scale_.active) return XnnOp::run();
    const size_t tasks = scale_.n * ((scale_.pixels + kScalePixels - 1) / kScalePixels);
    pthreadpool_parallelize_1d(pool, &scale_task, this, tasks, 0);
    return ok_status();
  }

  // One operand full, the other of the same outer and inner extents and 1 between them (an
  // SE block's [N, 1, 1, C] channel weights, channels-last; or [N, C, 1, 1] channels-first
  // broadcast over a plane with C = 1 inner): y[n][p][c] = x[n][p][c] op s[n][c]. XNNPACK 2022
  // runs that broadcast a row of C at a time (0.58 G elements/s at C = 16, against 5 at C = 240);
  // Kiln runs it as one loop over the pixels. Mul, Add, Sub, Div (Max/Min stay on XNNPACK).
  struct ScalePattern {
    bool active = false;
    int full = 0;  // which operand is the full one
    size_t n = 0, pixels = 0, c = 0;
    const float* x = nullptr;
    const float* s = nullptr;
  };
  static constexpr size_t kScalePixels = 64;
  ScalePattern scale_pattern(const size_t (*sh)[kMaxRank], const size_t* sh_rank, size_t rank, const float* const* ptr) {
    ScalePattern sp;
    if (plan.binary == BinaryOp::kMax || plan.binary == BinaryOp::kMin || rank < 3) return sp;
    if (sh_rank[0] != rank || sh_rank[1] != rank) return sp;
    for (int full = 0; full < 2; ++full) {
      const size_t* f = sh[full];
      const size_t* b = sh[1 - full];
      bool ok = b[0] == f[0] && b[rank - 1] == f[rank - 1] && f[rank - 1] > 0;
      size_t pixels = 1;
      for (size_t k = 1; k + 1 < rank; ++k) ok = ok && b[k] == 1, pixels *= f[k];
      if (!ok || pixels < 2) continue;  // (the output is then the full operand's shape)
      sp = {true, full, f[0], pixels, f[rank - 1], ptr[full], ptr[1 - full]};
      return sp;
    }
    return sp;
  }
  template <typename F>
  static void scale_rows(const ScalePattern& sp, size_t n, size_t p0, size_t p1, float lo, float hi, float* y, F f) {
    const float* s = sp.s + n * sp.c;
    for (size_t p = p0; p < p1; ++p) {
      const float* x = sp.x + (n * sp.pixels + p) * sp.c;
      float* o = y + (n * sp.pixels + p) * sp.c;
      for (size_t k = 0; k < sp.c; ++k) o[k] = kernels::clamp_keep_nan(f(x[k], s[k]), lo, hi);
    }
  }
  static void scale_task(void* ctx, size_t t) {
    const XnnBinary& op = *static_cast<const XnnBinary*>(ctx);
    const ScalePattern& sp = op.scale_;
    const size_t blocks = (sp.pixels + kScalePixels - 1) / kScalePixels, n = t / blocks;
    const size_t p0 = t % blocks * kScalePixels, p1 = std::min(sp.pixels, p0 + kScalePixels);
    const float lo = op.plan.out_min, hi = op.plan.out_max;
    float* y = op.out->as<float>();
    const bool fx = sp.full == 0;  // the full operand is the left one
    switch (op.plan.binary) {
      case BinaryOp::kMul: return scale_rows(sp, n, p0, p1, lo, hi, y, [](float a, float b) { return a * b; });
      case BinaryOp::kAdd: return scale_rows(sp, n, p0, p1, lo, hi, y, [](float a, float b) { return a + b; });
      case BinaryOp::kSub:
        if (fx) return scale_rows(sp, n, p0, p1, lo, hi, y, [](float a, float b) { return a - b; });
        return scale_rows(sp, n, p0, p1, lo, hi, y, [](float a, float b) { return b - a; });
      case BinaryOp::kDiv:
        if (fx) return scale_rows(sp, n, p0, p1, lo, hi, y, [](float a, float b) { return a / b; });
        return scale_rows(sp, n, p0, p1, lo, hi, y, [](float a, float b) { return b / a; });
      default: return;
    }
  }
  ScalePattern scale_;

  // Constant operands broadcast to the output's rank, permuted once when the op runs
  // channels-last.
  void bind_constants(const OpSource& src) {
    const size_t out_rank = src.m->values()->Get(src.dop->outputs()->Get(0))->shape()->size();
    for (int k = 0; k < 2; ++k) {
      if (ins[k]) continue;
      std::vector<int64_t> dims;
      for (int32_t e : *src.m->values()->Get(src.in->inputs()->Get(k))->shape()) dims.push_back((*src.exprs)[e].value);
      const size_t rank = std::max(out_rank, dims.size());
      const float* data = static_cast<const float*>(src.operands[k].const_data);
      const int r = static_cast<int>(dims.size());
      const_shape[k] = broadcast_shape(dims.data(), r, rank, nhwc);
      const_ptr[k] = data;
      if (nhwc && rank >= 3) {
        const_buf[k] = permute_const(data, broadcast_shape(dims.data(), r, rank, false));
        const_ptr[k] = const_buf[k].data();
      }
    }
  }
  std::vector<float> const_buf[2];
  Shape const_shape[2];
  const float* const_ptr[2] = {nullptr, nullptr};
};

// One channel, contiguous: XNNPACK runs the whole tensor as one block.
struct XnnUnary : XnnOp {
  Status create(const OpSource&) override {
    const OpPlan& p = plan;
    xnn_operator_t* x = &xop;
    switch (p.unary) {
      case UnaryOp::kClamp: return check_create(xnn_create_clamp_nc_f32(1, 1, 1, p.out_min, p.out_max, 0, x), what);
      case UnaryOp::kSigmoid: return check_create(xnn_create_sigmoid_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kHardSwish: return check_create(xnn_create_hardswish_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kLeakyRelu: return check_create(xnn_create_leaky_relu_nc_f32(1, 1, 1, p.alpha, 0, x), what);
      case UnaryOp::kElu: return check_create(xnn_create_elu_nc_f32(1, 1, 1, p.alpha, 0, x), what);
      case UnaryOp::kAbs: return check_create(xnn_create_abs_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kNeg: return check_create(xnn_create_negate_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kFloor: return check_create(xnn_create_floor_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kCeil: return check_create(xnn_create_ceiling_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kSqrt: return check_create(xnn_create_square_root_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kRound: return check_create(xnn_create_bankers_rounding_nc_f32(1, 1, 1, 0, x), what);
      case UnaryOp::kSquare: return check_create(xnn_create_square_nc_f32(1, 1, 1, 0, x), what);
      default: return unimplemented(what + ": no XNNPACK operator");
    }
  }
  Status setup() override {
    const size_t n = numel(*ins[0]);
    const float* x = ins[0]->as<float>();
    float* y = out->as<float>();
    switch (plan.unary) {
      case UnaryOp::kClamp: return check_setup(xnn_setup_clamp_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kSigmoid: return check_setup(xnn_setup_sigmoid_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kHardSwish: return check_setup(xnn_setup_hardswish_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kLeakyRelu: return check_setup(xnn_setup_leaky_relu_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kElu: return check_setup(xnn_setup_elu_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kAbs: return check_setup(xnn_setup_abs_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kNeg: return check_setup(xnn_setup_negate_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kFloor: return check_setup(xnn_setup_floor_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kCeil: return check_setup(xnn_setup_ceiling_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kSqrt: return check_setup(xnn_setup_square_root_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kRound: return check_setup(xnn_setup_bankers_rounding_nc_f32(xop, n, x, y, pool), *this);
      case UnaryOp::kSquare: return check_setup(xnn_setup_square_nc_f32(xop, n, x, y, pool), *this);
      default: return internal_error(what + ": no XNNPACK operator");
    }
  }
};

// erf, tanh and GELU on Kiln's vectorized kernels (pointwise.h).
struct FastPointwise : Op {
  Status run() override {
    const float* x = ins[0]->as<float>();
    float* y = out->as<float>();
    const size_t n = numel(*out);
    if (plan.unary == UnaryOp::kErf) fast_erf(x, y, n, pool);
    else if (plan.unary == UnaryOp::kTanh) fast_tanh(x, y, n, pool);
    else fast_gelu(x, y, n, plan.gelu_tanh, pool);
    return ok_status();
  }
};

// y = x * act(x): a Sigmoid or HardSigmoid with the Mul that reads it folded in.
struct GateOp : Op {
  explicit GateOp(const Gate& g) : g(g) {}
  Status run() override {
    gate(ins[0]->as<float>(), out->as<float>(), numel(*out), g.hard, g.alpha, g.beta, pool);
    return ok_status();
  }
  Gate g;
};

// A pointwise op XNNPACK lacks, on its portable kernel (prepared once, at create).
struct PortablePointwise : Op {
  Status create(const OpSource& src) override {
    def = kernels::find_op(src.in->op()->c_str());
    if (!def) return unimplemented(what + ": no portable kernel");
    operands.capture(src);
    if (def->prepare)
      kernels::prepare_op(*def, operands.attr_view(), operands.views.data(),
                          static_cast<uint32_t>(operands.views.size()), &op_data);
    return ok_status();
  }
  Status run() override {
    TensorView* y = out;
    kernels::RunCtx ctx;
    ctx.inputs = operands.views.data();
    ctx.num_inputs = static_cast<uint32_t>(operands.views.size());
    ctx.outputs = &y;
    ctx.num_outputs = 1;
    ctx.attrs = operands.attr_view();
    ctx.op_data = def->prepare ? &op_data : nullptr;
    const kernels::KernelStatus ks = def->run(ctx);
    if (ks != kernels::KernelStatus::kOk)
      return Status(Code::kInvalidArgument, what + ": " + kernels::kernel_status_message(ks), Reason::kDataRefused);
    return ok_status();
  }
  const kernels::OpDef* def = nullptr;
  KernelOperands operands;
  kernels::OpData op_data;
};

// BatchNormalization: y = clamp(x * scale[c] + shift[c]) with c the last axis (channels-last:
// tasks of 64 pixels) or axis 1 (channels-first: a task per (n, c) plane).
struct ChannelAffine : Op {
  Status create(const OpSource& src) override {
    const float* v[5];
    for (size_t k = 1; k < 5; ++k) v[k] = src.operand_f32(k);
    for (size_t ch = 0; ch < plan.channels; ++ch) {
      const float s = v[1][ch] / std::sqrt(v[4][ch] + plan.alpha);
      scale.push_back(s);
      shift.push_back(v[2][ch] - v[3][ch] * s);
    }
    return ok_status();
  }
  Status run() override {
    Job j{this, 0, 0};
    const TensorView& x = *ins[0];
    const size_t c = plan.channels;
    if (!in_twin[0] && x.rank > 2) {
      j.plane = 1;
      for (int k = 2; k < x.rank; ++k) j.plane *= static_cast<size_t>(x.dims[k]);
    }
    j.pixels = numel(x) / c;
    const size_t tasks = j.plane ? numel(x) / std::max<size_t>(1, j.plane) : (j.pixels + kPixels - 1) / kPixels;
    pthreadpool_parallelize_1d(pool, &task, &j, tasks, 0);
    return ok_status();
  }
  static constexpr size_t kPixels = 64;
  struct Job {
    const ChannelAffine* op;
    size_t plane, pixels;  // plane: elements per (n, c) when channels-first, else 0
  };
  static void task(void* ctx, size_t t) {
    const Job& j = *static_cast<const Job*>(ctx);
    const ChannelAffine& op = *j.op;
    const size_t c = op.plan.channels;
    const float lo = op.plan.out_min, hi = op.plan.out_max;
    const float* x = op.ins[0]->as<float>();
    float* y = op.out->as<float>();
    if (j.plane) {  // plane t is channel t % c
      const float s = op.scale[t % c], b = op.shift[t % c];
      for (size_t i = t * j.plane; i < (t + 1) * j.plane; ++i) y[i] = kernels::clamp_keep_nan(x[i] * s + b, lo, hi);
      return;
    }
    for (size_t p = t * kPixels; p < std::min(j.pixels, (t + 1) * kPixels); ++p)
      for (size_t k = 0; k < c; ++k) y[p * c + k] = kernels::clamp_keep_nan(x[p * c + k] * op.scale[k] + op.shift[k], lo, hi);
  }
  std::vector<float> scale, shift;
};

// PRelu: y = x < 0 ? slope[c] * x : x over rows of `channels` (one channel: the whole tensor
// as one row of one).
struct XnnPRelu : XnnOp {
  Status create(const OpSource& src) override {
    const float* slope = src.operand_f32(1);
    if (!slope) return unimplemented(what + ": the slope is not a constant");
    const size_t c = plan.channels;
    return check_create(xnn_create_prelu_nc_f32(c, c, c, slope, 0, &xop), what);
  }
  Status setup() override {
    const size_t rows = numel(*out) / plan.channels;
    return check_setup(xnn_setup_prelu_nc_f32(xop, rows, ins[0]->as<float>(), out->as<float>(), pool), *this);
  }
};

}  // namespace

Status plan_binary(const PlanInput& in, OpPlan* p) {
  if (in.ins.size() != 2 || !in.ins[1].present) return decline("takes exactly two operands");
  static const char* kNames[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  for (int k = 0; k < 6; ++k)
    if (in.op == kNames[k]) p->binary = static_cast<BinaryOp>(k);
  p->kind = OpKind::kBinary;
  p->layout = Layout::kEither;
  return ok_status();
}

Status plan_unary(const PlanInput& in, OpPlan* p) {
  p->kind = OpKind::kUnary;
  p->layout = Layout::kEither;
  const std::string& op = in.op;
  if (op == "Erf" || op == "Tanh" || op == "Gelu") {
    p->unary = op == "Erf" ? UnaryOp::kErf : op == "Tanh" ? UnaryOp::kTanh : UnaryOp::kGelu;
    p->gelu_tanh = op == "Gelu" && in.attrs.str_equals("approximate", "tanh");
    p->own_kernel = true;
    p->flops_per_output = op == "Gelu" ? 20 : 16;
    return ok_status();
  }
  if (op == "Pow") {  // x^2 (LayerNorm's variance) and x^0.5 with a constant scalar exponent
    if (in.ins.size() != 2 || !in.ins[1].const_data || in.ins[1].dtype != DType::kF32)
      return decline("the exponent is not constant");
    for (core::ExprId d : in.ins[1].shape)
      if (const_of(in.exprs, d) != 1) return decline("the exponent is not a scalar");
    float e;
    std::memcpy(&e, in.ins[1].const_data, sizeof(e));
    if (e == 2.f) p->unary = UnaryOp::kSquare;
    else if (e == 0.5f) p->unary = UnaryOp::kSqrt;
    else return decline("exponents other than 2 and 0.5");
    return ok_status();
  }
  if (op == "Relu" || op == "Clip") {
    KILN_ASSIGN_OR_RETURN(auto range, fusable_activation(op, in.attrs, in.ins));
    p->unary = UnaryOp::kClamp;
    p->out_min = range.first;
    p->out_max = range.second;
    return ok_status();
  }
  struct Entry {
    const char* name;
    UnaryOp u;
  };
  static const Entry kXnnpack[] = {{"Sigmoid", UnaryOp::kSigmoid}, {"HardSwish", UnaryOp::kHardSwish},
                                   {"LeakyRelu", UnaryOp::kLeakyRelu}, {"Elu", UnaryOp::kElu},
                                   {"Abs", UnaryOp::kAbs}, {"Neg", UnaryOp::kNeg}, {"Floor", UnaryOp::kFloor},
                                   {"Ceil", UnaryOp::kCeil}, {"Sqrt", UnaryOp::kSqrt}, {"Round", UnaryOp::kRound}};
  for (const Entry& e : kXnnpack)
    if (op == e.name) {
      p->unary = e.u;
      p->alpha = in.attrs.get_float("alpha", e.u == UnaryOp::kLeakyRelu ? 0.01f : 1.f);
      return ok_status();
    }
  // The table's other unary rows: pointwise ops XNNPACK lacks, on their portable kernels.
  p->unary = UnaryOp::kPortable;
  p->own_kernel = true;
  return ok_status();
}

// QuantizeLinear (f32 -> i8/u8) and DequantizeLinear (i8/u8 -> f32) with one scale and zero
// point: pointwise, so they follow the region's layout and keep a quantized region whole.
Status plan_quantize(const PlanInput& in, OpPlan* p) {
  const DType x = in.ins[0].dtype;
  if (in.op == "QuantizeLinear" ? x != DType::kF32 : (x != DType::kI8 && x != DType::kU8))
    return decline("only f32 to int8/uint8 and back");
  for (size_t k = 1; k < in.ins.size() && k < 3; ++k) {
    if (!in.ins[k].present) continue;
    if (!in.ins[k].const_data) return decline("the scale or zero point is not constant");
    for (core::ExprId e : in.ins[k].shape)
      if (const_of(in.exprs, e) != 1) return decline("per-channel scales (the axis depends on the layout)");
  }
  p->kind = OpKind::kUnary;
  p->layout = Layout::kEither;
  p->unary = UnaryOp::kPortable;
  p->own_kernel = true;
  return ok_status();
}

Status plan_batch_norm(const PlanInput& in, OpPlan* p) {
  for (size_t k = 1; k < 5; ++k)
    if (k >= in.ins.size() || !in.ins[k].const_data) return decline("statistics are not constant");
  if (in.ins[0].shape.size() < 2) return decline("input of rank below 2");
  KILN_TRY(static_dim(in.exprs, in.ins[0].shape[1], "channels", &p->channels));
  p->kind = OpKind::kBatchNorm;
  p->layout = Layout::kEither;
  p->own_kernel = true;
  p->alpha = in.attrs.get_float("epsilon", 1e-5f);
  p->flops_per_output = 2;
  return ok_status();
}

// The slope broadcasts onto X one way (the shape function checked it): one value, or sizes
// along one axis, which must be the channels (axis 1 of a rank >= 3 X: channels-last) or the
// last axis (plain).
Status plan_prelu(const PlanInput& in, OpPlan* p) {
  if (in.ins.size() != 2 || !in.ins[1].const_data || in.ins[1].dtype != DType::kF32)
    return decline("the slope is not a constant");
  const size_t rank = in.ins[0].shape.size(), lead = rank - in.ins[1].shape.size();
  size_t axis = rank;
  for (size_t k = 0; k < in.ins[1].shape.size(); ++k) {
    if (const_of(in.exprs, in.ins[1].shape[k]) == 1) continue;
    if (axis != rank) return decline("a slope that varies along more than one axis");
    axis = lead + k;
  }
  p->kind = OpKind::kPRelu;
  p->channels = 1;
  p->layout = Layout::kEither;
  if (axis == rank) {
    // One slope is a LeakyRelu: XNNPACK runs that over the tensor as one block, where its
    // PRelu takes rows of one channel (conv1d_separator's eight PRelus over 2 x 256 x 16000:
    // 11.7 ms at 1 thread and 11.2 at 2).
    p->kind = OpKind::kUnary;
    p->unary = UnaryOp::kLeakyRelu;
    p->alpha = *static_cast<const float*>(in.ins[1].const_data);
    return ok_status();
  }
  if (rank >= 3 && axis == 1) p->layout = Layout::kNhwc;
  else if (axis == rank - 1) p->layout = Layout::kPlain;
  else return decline("a slope along axis " + std::to_string(axis) + ", neither the channels nor the last axis");
  return static_dim(in.exprs, in.ins[1].shape[axis - lead], "slope size", &p->channels);
}

std::unique_ptr<Op> make_binary(const OpPlan&, const OpSource&) { return std::make_unique<XnnBinary>(); }

std::unique_ptr<Op> make_unary(const OpPlan& p, const OpSource& src) {
  if (src.gate) return std::make_unique<GateOp>(*src.gate);
  if (p.unary == UnaryOp::kErf || p.unary == UnaryOp::kTanh || p.unary == UnaryOp::kGelu)
    return std::make_unique<FastPointwise>();
  if (p.unary == UnaryOp::kPortable) return std::make_unique<PortablePointwise>();
  return std::make_unique<XnnUnary>();
}

std::unique_ptr<Op> make_batch_norm(const OpPlan&, const OpSource&) { return std::make_unique<ChannelAffine>(); }

std::unique_ptr<Op> make_prelu(const OpPlan& p, const OpSource& src) {
  if (p.kind == OpKind::kUnary) return make_unary(p, src);  // one slope: a LeakyRelu
  return std::make_unique<XnnPRelu>();
}

}  // namespace kiln::delegates::xnnpack
