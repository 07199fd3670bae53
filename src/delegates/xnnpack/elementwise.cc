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
#include "kernels/simd/vbinary.h"
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

// Add, Sub, Mul, Div, Max and Min with numpy broadcasting, on Kiln's kernel (simd/vbinary.h),
// not XNNPACK's: XNNPACK 2022 clamps with x86 max/min, so its Add of a NaN gave -Inf and its
// Add+Relu gave 0 where the portable kernels give NaN. setup() merges the output's axes into
// as few as the operands' strides allow (an SE block's [N, H*W, C] against [N, 1, C]; a
// residual Add is one axis), and run() splits the innermost two over the pool in blocks of
// about kBlock outputs.
struct Binary : Op {
  Status create(const OpSource& src) override {
    bind_constants(src);
    switch (plan.binary) {
      case BinaryOp::kAdd: kind_ = simd::BinaryKind::kAdd; break;
      case BinaryOp::kSub: kind_ = simd::BinaryKind::kSub; break;
      case BinaryOp::kMul: kind_ = simd::BinaryKind::kMul; break;
      case BinaryOp::kDiv: kind_ = simd::BinaryKind::kDiv; break;
      case BinaryOp::kMax: kind_ = simd::BinaryKind::kMax; break;
      case BinaryOp::kMin: kind_ = simd::BinaryKind::kMin; break;
    }
    return ok_status();
  }
  Status setup() override {
    const size_t rank = static_cast<size_t>(out->rank);
    size_t sh[2][kMaxRank];  // on the stack: bind allocates nothing
    for (int k = 0; k < 2; ++k) {
      if (!ins[k]) {
        std::copy(const_shape[k].begin(), const_shape[k].end(), sh[k]);
        ptr_[k] = const_ptr[k];
      } else {
        broadcast_dims(ins[k]->dims, ins[k]->rank, rank, in_twin[k] ? false : nhwc, sh[k]);
        ptr_[k] = ins[k]->as<float>();
      }
    }
    // Strides of each operand along the output's axes (0 where it broadcasts), axes of one
    // dropped, then neighbours merged where both operands continue across them.
    size_t stride[2][kMaxRank], acc[2] = {1, 1};
    for (size_t k = rank; k-- > 0;)
      for (int i = 0; i < 2; ++i) stride[i][k] = sh[i][k] == 1 ? 0 : acc[i], acc[i] *= sh[i][k];
    axes_ = 0;
    for (size_t k = 0; k < rank; ++k) {
      const size_t d = std::max(sh[0][k], sh[1][k]);
      if (d == 1) continue;
      if (axes_ > 0) {
        const size_t j = axes_ - 1;
        if (stride[0][j] == stride[0][k] * d && stride[1][j] == stride[1][k] * d) {
          dim_[j] *= d;
          st_[0][j] = stride[0][k], st_[1][j] = stride[1][k];
          continue;
        }
      }
      dim_[axes_] = d, st_[0][axes_] = stride[0][k], st_[1][axes_] = stride[1][k];
      ++axes_;
    }
    if (axes_ == 0) dim_[0] = 1, st_[0][0] = st_[1][0] = 0, axes_ = 1;  // one element
    // The innermost two axes are a block of rows (one row when there is one axis).
    const size_t cols = dim_[axes_ - 1], rows = axes_ > 1 ? dim_[axes_ - 2] : 1;
    col_block_ = cols <= 2 * kBlock ? cols : kBlock;
    col_blocks_ = (cols + col_block_ - 1) / col_block_;
    row_block_ = std::min(rows, std::max<size_t>(1, kBlock / col_block_));
    row_blocks_ = (rows + row_block_ - 1) / row_block_;
    outer_ = 1;
    for (size_t k = 0; k + 2 < axes_; ++k) outer_ *= dim_[k];
    return ok_status();
  }
  Status run() override {
    const size_t tasks = outer_ * row_blocks_ * col_blocks_;
    if (pool && tasks > 1) pthreadpool_parallelize_1d(pool, &task, this, tasks, 0);
    else
      for (size_t t = 0; t < tasks; ++t) task(this, t);
    return ok_status();
  }

 private:
  static constexpr size_t kBlock = 4096;
  static void task(void* ctx, size_t t) {
    const Binary& op = *static_cast<const Binary*>(ctx);
    const size_t n = op.axes_, cols = op.dim_[n - 1], rows = n > 1 ? op.dim_[n - 2] : 1;
    const size_t c0 = t % op.col_blocks_ * op.col_block_, r0 = t / op.col_blocks_ % op.row_blocks_ * op.row_block_;
    const size_t outer = t / op.col_blocks_ / op.row_blocks_;
    const float* p[2] = {op.ptr_[0], op.ptr_[1]};
    size_t ld[2] = {0, 0}, s[2];
    for (int i = 0; i < 2; ++i) {
      s[i] = op.st_[i][n - 1];
      if (n > 1) ld[i] = op.st_[i][n - 2];
      for (size_t k = n > 2 ? n - 2 : 0, o = outer; k-- > 0; o /= op.dim_[k]) p[i] += o % op.dim_[k] * op.st_[i][k];
      p[i] += r0 * ld[i] + c0 * s[i];
    }
    float* y = op.out->as<float>() + (outer * rows + r0) * cols + c0;
    simd::binary_rows(op.kind_, p[0], ld[0], s[0], p[1], ld[1], s[1], y, cols, std::min(op.row_block_, rows - r0),
                      std::min(op.col_block_, cols - c0), op.plan.out_min, op.plan.out_max);
  }

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

  simd::BinaryKind kind_ = simd::BinaryKind::kAdd;
  const float* ptr_[2] = {nullptr, nullptr};
  size_t axes_ = 0, dim_[kMaxRank] = {}, st_[2][kMaxRank] = {};
  size_t outer_ = 1, row_block_ = 1, row_blocks_ = 1, col_block_ = 1, col_blocks_ = 1;
};

// One channel, contiguous: XNNPACK runs the whole tensor as one block. These operators have no
// clamp: NaN and Inf come out as the portable kernels give them.
struct XnnUnary : XnnOp {
  bool keeps_nan() const override { return true; }
  Status create(const OpSource&) override {
    const OpPlan& p = plan;
    xnn_operator_t* x = &xop;
    switch (p.unary) {
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

// erf, tanh, GELU and the clamps (Relu, Relu6, Clip) on Kiln's vectorized kernels
// (pointwise.h), which keep NaN (XNNPACK's clamp made a NaN Relu 0).
struct FastPointwise : Op {
  Status run() override {
    const float* x = ins[0]->as<float>();
    float* y = out->as<float>();
    const size_t n = numel(*out);
    if (plan.unary == UnaryOp::kClamp) fast_clamp(x, y, n, plan.out_min, plan.out_max, pool);
    else if (plan.unary == UnaryOp::kErf) fast_erf(x, y, n, pool);
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
  bool keeps_nan() const override { return true; }  // a select, no clamp
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

std::unique_ptr<Op> make_binary(const OpPlan&, const OpSource&) { return std::make_unique<Binary>(); }

std::unique_ptr<Op> make_unary(const OpPlan& p, const OpSource& src) {
  if (src.gate) return std::make_unique<GateOp>(*src.gate);
  if (p.unary == UnaryOp::kErf || p.unary == UnaryOp::kTanh || p.unary == UnaryOp::kGelu || p.unary == UnaryOp::kClamp)
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
