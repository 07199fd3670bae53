#include "delegates/xnnpack/delegate.h"

#include <pthreadpool.h>
#include <xnnpack.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <mutex>
#include <string>

#include "delegates/xnnpack/dense_conv.h"
#include "delegates/xnnpack/depthwise_conv.h"
#include "delegates/xnnpack/pointwise.h"
#include "kernels/portable/attention.h"
#include "delegates/xnnpack/layout.h"
#include "delegates/xnnpack/max_pool_nhwc.h"
#include "kernels/kernel.h"
#include "kernels/portable/resize.h"
#include "delegates/xnnpack/support.h"

namespace kiln::delegates::xnnpack {

namespace {

// --- Kiln's xnn_allocator ---------------------------------------------------------------
// Blocks carry their capacity, so XNNPACK's re-allocation of an indirection buffer for a
// smaller shape (every setup at a changed shape) is served in place: after the first setup at
// the bound, setups allocate nothing.
std::atomic<uint64_t> g_allocations{0};
std::atomic<uint64_t> g_bytes{0};
constexpr size_t kHeader = 64;  // keeps the payload 64-byte aligned

void* alloc_block(size_t size) {
  // Through operator new (nothrow), like every other allocation of Kiln's, so an app's
  // replacement of it (and the allocation-failure tests) sees XNNPACK's blocks too.
  void* p = ::operator new((size + 2 * kHeader - 1) / kHeader * kHeader, std::align_val_t{kHeader}, std::nothrow);
  if (!p) return nullptr;
  ++g_allocations;
  g_bytes += size;
  std::memcpy(p, &size, sizeof(size));
  return static_cast<uint8_t*>(p) + kHeader;
}
size_t capacity(void* payload) {
  size_t c;
  std::memcpy(&c, static_cast<uint8_t*>(payload) - kHeader, sizeof(c));
  return c;
}
void free_block(void*, void* payload) {
  if (payload) ::operator delete(static_cast<uint8_t*>(payload) - kHeader, std::align_val_t{kHeader});
}
void* allocate(void*, size_t size) { return alloc_block(size); }
void* reallocate(void*, void* payload, size_t size) {
  if (payload && capacity(payload) >= size) return payload;
  void* q = alloc_block(size);
  if (!q) return nullptr;  // realloc's contract: the old block stays valid
  if (payload) std::memcpy(q, payload, capacity(payload));
  free_block(nullptr, payload);
  return q;
}
void* aligned_allocate(void*, size_t alignment, size_t size) {
  return alignment <= kHeader ? alloc_block(size) : nullptr;
}

const xnn_allocator kAllocator = {nullptr, allocate, reallocate, free_block, aligned_allocate, free_block};

}  // namespace

Status initialize() {
  static std::once_flag once;
  static xnn_status status = xnn_status_uninitialized;
  std::call_once(once, [] { status = xnn_initialize(&kAllocator); });
  if (status != xnn_status_success)
    return unimplemented("XNNPACK cannot initialize on this CPU (xnn_status " + std::to_string(status) + ")");
  return ok_status();
}

namespace {

std::string status_text(xnn_status s) {
  switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
  }
  return "status " + std::to_string(static_cast<int>(s));
}

using Shape = std::vector<size_t>;

// Below this much work (output elements times FLOPs per element), an op runs single-threaded.
constexpr double kMinParallelWork = 1 << 16;
// Ops that only move memory (at most one FLOP per output: copies, Concat, layout changes,
// elementwise) are bound by bytes that sit in the producing core's cache; splitting them pays
// only above this many output elements. Measured on the zoo's unet decoder at 1x3x64x64: its
// 65,536-element Concat took 2.4x longer on 2 threads than on 1, and the model at 2 threads
// beside a busy process went from 1.10x to 1.00x of its 1-thread time with this bound.
constexpr double kMinParallelMoves = 1 << 18;

// The pool for an op of this much work, or null (run on the calling thread).
pthreadpool_t pool_for(pthreadpool_t pool, size_t outputs, double flops_per_output) {
  const double n = static_cast<double>(outputs);
  return flops_per_output <= 1 ? (n >= kMinParallelMoves ? pool : nullptr)
                               : (n * flops_per_output >= kMinParallelWork ? pool : nullptr);
}

}  // namespace

struct Delegate::Op {
  enum class Kind : uint8_t { kKernel, kToNhwc, kToNchw } kind = Kind::kKernel;
  OpPlan plan;
  std::string what;  // "instruction #3 'Conv_3' (Conv)"
  xnn_operator_t xop = nullptr;
  std::vector<xnn_operator_t> copies;  // Concat: one strided copy per input
  std::vector<const TensorView*> ins;  // activation operands (constants appear as nullptr)
  std::vector<bool> in_twin;
  TensorView* out = nullptr;
  bool out_twin = false;
  bool nhwc = false;
  // Binary: constant operands, permuted to channels-last when the op is.
  std::vector<float> const_buf[2];
  Shape const_shape[2];
  const float* const_ptr[2] = {nullptr, nullptr};
  std::unique_ptr<DenseConvWeights> dense;  // Kiln's own kernel instead of xop (Conv, FC)
  std::unique_ptr<DepthwiseWeights> depthwise;  // Kiln's depthwise kernel instead of xop
  DenseConvGeometry geom;
  MaxPoolGeometry pool_geom;                 // own max pooling
  /// Which kernel runs the op: an XNNPACK operator (xop, copies) or one of Kiln's.
  enum class Own : uint8_t { kNone, kDense, kDepthwise, kMaxPool, kAffine, kErf, kTanh, kGelu, kGate, kMatMul,
                            kSoftmax, kLayerNorm, kAttention, kPortable } own = Own::kNone;
  const float* ln_gamma = nullptr;  // own LayerNorm: constant Scale and B (null: none), from the program
  const float* ln_beta = nullptr;
  MatMulGeometry mm;  // Own::kMatMul, at the bound-to shape
  Gate gate;  // Own::kGate: y = x * act(x)
  std::vector<float> scale, shift;           // own BatchNormalization: y = x * scale + shift per channel
  std::vector<float> fused_bias;             // fully connected: its bias plus a fused Add's constant
  // Own ops computed by portable maths (pointwise ops; Resize channels-last): the kernel, its
  // attributes, and every operand's view (constants included).
  kernels::RunFn portable = nullptr;
  const kernels::OpDef* portable_def = nullptr;  // pointwise ops: their registry entry (prepare)
  std::vector<core::AttrRef> portable_attrs;
  std::vector<const TensorView*> portable_ins;
  int32_t source = -1, fused = -1;  // the instructions it computes (kernels)
  pthreadpool_t pool = nullptr;     // the Method's pool, or none when the op is too small to split
  uint64_t ns = 0;                  // profiling: time spent running it
  Shape last;        // operand dims at the last setup
  bool skip = false;  // an empty tensor: nothing to run

  ~Op() {
    if (xop) xnn_delete_operator(xop);
    for (xnn_operator_t c : copies) xnn_delete_operator(c);
  }
};

namespace {

// N, H, W, C of an activation seen channels-last: a twin is [N, (H,) W, C]; a channels-first
// value read as is (its spatial axes are 1) is [N, C, (1,) 1].
void nhwc_dims(const TensorView& t, bool twin, size_t* n, size_t* h, size_t* w, size_t* c) {
  const int r = t.rank;
  *n = static_cast<size_t>(t.dims[0]);
  if (twin) {
    *c = static_cast<size_t>(t.dims[r - 1]);
    *w = static_cast<size_t>(t.dims[r - 2]);
    *h = r == 4 ? static_cast<size_t>(t.dims[1]) : 1;
  } else {
    *c = static_cast<size_t>(t.dims[1]);
    *w = static_cast<size_t>(t.dims[r - 1]);
    *h = r == 4 ? static_cast<size_t>(t.dims[2]) : 1;
  }
}

size_t numel(const TensorView& t) {
  size_t n = 1;
  for (int k = 0; k < t.rank; ++k) n *= static_cast<size_t>(t.dims[k]);
  return n;
}

// `s` padded with leading 1s to `rank`, then (when nhwc) axes 0, 2.., 1.
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

bool is_twin(const fb::Method* m, int32_t v) {
  return m->values()->Get(v)->storage() == fb::StorageKind::Delegate;
}

bool spatial_one(const std::vector<core::ExprNode>& exprs, const fb::Value* v) {
  for (size_t k = 2; k < v->shape()->size(); ++k) {
    const core::ExprNode& e = exprs[v->shape()->Get(k)];
    if (e.op != core::ExprOp::kConst || e.value != 1) return false;
  }
  return true;
}

Status check(xnn_status s, const std::string& what, const char* step) {
  if (s == xnn_status_success) return ok_status();
  return unimplemented(what + ": XNNPACK " + step + " failed (" + status_text(s) + ")");
}

// Explicit pads, or none with XNNPACK's TensorFlow SAME padding (ONNX SAME_UPPER).
struct Padding {
  uint32_t top, right, bottom, left, flags;
  explicit Padding(const OpPlan& p)
      : top(p.same_upper ? 0 : p.pad_top),
        right(p.same_upper ? 0 : p.pad_right),
        bottom(p.same_upper ? 0 : p.pad_bottom),
        left(p.same_upper ? 0 : p.pad_left),
        flags(p.same_upper ? XNN_FLAG_TENSORFLOW_SAME_PADDING : 0) {}
};

Status create_kernel(const OpPlan& p, const fb::Instruction* in, const uint8_t* constants, const fb::Method* m,
                     Delegate::Op* op) {
  auto const_f32 = [&](int32_t v) -> const float* {
    if (v < 0) return nullptr;
    const fb::Value* val = m->values()->Get(v);
    if (val->storage() == fb::StorageKind::Alias) val = m->values()->Get(val->alias_of());
    return val->storage() == fb::StorageKind::Constant ? reinterpret_cast<const float*>(constants + val->offset()) : nullptr;
  };
  const float lo = p.out_min, hi = p.out_max;
  const Padding pad(p);
  xnn_operator_t* x = &op->xop;
  switch (p.kind) {
    case OpKind::kConv: {
      // ONNX weights [M, C/g, (kH,) kW] -> XNNPACK [M, kH, kW, C/g].
      const float* w = const_f32(in->inputs()->Get(1));
      const size_t m_all = p.groups * p.group_out, k_plane = p.kernel_h * p.kernel_w, cg = p.group_in;
      std::vector<float> packed(m_all * k_plane * cg);
      for (size_t o = 0; o < m_all; ++o)
        for (size_t c = 0; c < cg; ++c)
          for (size_t k = 0; k < k_plane; ++k) packed[(o * k_plane + k) * cg + c] = w[(o * cg + c) * k_plane + k];
      const float* bias = in->inputs()->size() > 2 ? const_f32(in->inputs()->Get(2)) : nullptr;
      return check(xnn_create_convolution2d_nhwc_f32(pad.top, pad.right, pad.bottom, pad.left, p.kernel_h, p.kernel_w,
                                                     p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.groups,
                                                     p.group_in, p.group_out, p.groups * p.group_in,
                                                     p.groups * p.group_out, packed.data(), bias, lo, hi, pad.flags, x),
                   op->what, "create");
    }
    case OpKind::kConvTranspose: {
      // ONNX weights [G*Cg, Mg, (kH,) kW] -> XNNPACK [G, Mg, kH, kW, Cg].
      const float* w = const_f32(in->inputs()->Get(1));
      const size_t g_n = p.groups, cg = p.group_in, mg = p.group_out, k_plane = p.kernel_h * p.kernel_w;
      std::vector<float> packed(g_n * mg * k_plane * cg);
      for (size_t g = 0; g < g_n; ++g)
        for (size_t ic = 0; ic < cg; ++ic)
          for (size_t oc = 0; oc < mg; ++oc)
            for (size_t k = 0; k < k_plane; ++k)
              packed[((g * mg + oc) * k_plane + k) * cg + ic] = w[((g * cg + ic) * mg + oc) * k_plane + k];
      const float* bias = in->inputs()->size() > 2 && in->inputs()->Get(2) >= 0 ? const_f32(in->inputs()->Get(2)) : nullptr;
      return check(xnn_create_deconvolution2d_nhwc_f32(p.pad_top, p.pad_right, p.pad_bottom, p.pad_left, p.kernel_h,
                                                       p.kernel_w, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
                                                       p.groups, cg, mg, g_n * cg, g_n * mg, packed.data(), bias, lo,
                                                       hi, 0, x),
                   op->what, "create");
    }
    case OpKind::kFullyConnected: {
      const float* bias = !op->fused_bias.empty()    ? op->fused_bias.data()
                          : in->inputs()->size() > 2 ? const_f32(in->inputs()->Get(2))
                                                     : nullptr;
      return check(xnn_create_fully_connected_nc_f32(p.channels, p.out_channels, p.channels, p.out_channels,
                                                     const_f32(in->inputs()->Get(1)), bias, lo, hi,
                                                     p.transpose_weights ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0, x),
                   op->what, "create");
    }
    case OpKind::kMaxPool:
      return check(xnn_create_max_pooling2d_nhwc_f32(pad.top, pad.right, pad.bottom, pad.left, p.kernel_h, p.kernel_w,
                                                     p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.channels,
                                                     p.channels, p.channels, lo, hi, pad.flags, x),
                   op->what, "create");
    case OpKind::kAveragePool:
      return check(xnn_create_average_pooling2d_nhwc_f32(pad.top, pad.right, pad.bottom, pad.left, p.kernel_h,
                                                         p.kernel_w, p.stride_h, p.stride_w, p.channels, p.channels,
                                                         p.channels, lo, hi, pad.flags, x),
                   op->what, "create");
    case OpKind::kGlobalAveragePool:
      return check(xnn_create_global_average_pooling_nwc_f32(p.channels, p.channels, p.channels, lo, hi, 0, x), op->what,
                   "create");
    case OpKind::kBinary:
      switch (p.binary) {
        case BinaryOp::kAdd: return check(xnn_create_add_nd_f32(lo, hi, 0, x), op->what, "create");
        case BinaryOp::kSub: return check(xnn_create_subtract_nd_f32(lo, hi, 0, x), op->what, "create");
        case BinaryOp::kMul: return check(xnn_create_multiply_nd_f32(lo, hi, 0, x), op->what, "create");
        case BinaryOp::kDiv: return check(xnn_create_divide_nd_f32(lo, hi, 0, x), op->what, "create");
        case BinaryOp::kMax: return check(xnn_create_maximum_nd_f32(0, x), op->what, "create");
        case BinaryOp::kMin: return check(xnn_create_minimum_nd_f32(0, x), op->what, "create");
      }
      break;
    case OpKind::kUnary:
      // One channel, contiguous: XNNPACK runs the whole tensor as one block.
      switch (p.unary) {
        case UnaryOp::kClamp: return check(xnn_create_clamp_nc_f32(1, 1, 1, p.out_min, p.out_max, 0, x), op->what, "create");
        case UnaryOp::kSigmoid: return check(xnn_create_sigmoid_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kHardSwish: return check(xnn_create_hardswish_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kLeakyRelu: return check(xnn_create_leaky_relu_nc_f32(1, 1, 1, p.alpha, 0, x), op->what, "create");
        case UnaryOp::kElu: return check(xnn_create_elu_nc_f32(1, 1, 1, p.alpha, 0, x), op->what, "create");
        case UnaryOp::kAbs: return check(xnn_create_abs_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kNeg: return check(xnn_create_negate_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kFloor: return check(xnn_create_floor_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kCeil: return check(xnn_create_ceiling_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kSqrt: return check(xnn_create_square_root_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kRound: return check(xnn_create_bankers_rounding_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kSquare: return check(xnn_create_square_nc_f32(1, 1, 1, 0, x), op->what, "create");
        case UnaryOp::kErf:
        case UnaryOp::kTanh:
        case UnaryOp::kGelu:
        case UnaryOp::kPortable: break;  // own kernels: no operator
      }
      break;
    case OpKind::kSoftmax:
      return check(xnn_create_softmax_nc_f32(p.channels, p.channels, p.channels, 0, x), op->what, "create");
    case OpKind::kConcat:  // one strided copy per input, made by the caller
    case OpKind::kBatchNorm:  // own kernels: no operator
    case OpKind::kLayerNorm:
    case OpKind::kAttention:
    case OpKind::kResize:
    case OpKind::kBatchMatMul:
      break;
  }
  return unimplemented(op->what + ": no XNNPACK operator");
}

}  // namespace

namespace {

// What the support check sees of instruction `in`: operands (constants with their bytes).
std::vector<Operand> operands_of(const fb::Method* m, const format::ProgramFile& file, const fb::Instruction* in) {
  std::vector<Operand> ops;
  for (int32_t v : *in->inputs()) {
    Operand o;
    if (v < 0) {
      o.present = false;
    } else {
      const fb::Value* val = m->values()->Get(v);
      const fb::Value* root = val->storage() == fb::StorageKind::Alias ? m->values()->Get(val->alias_of()) : val;
      o.dtype = static_cast<DType>(val->dtype());
      o.shape.assign(val->shape()->begin(), val->shape()->end());
      if (root->storage() == fb::StorageKind::Constant) o.const_data = file.constants + root->offset();
    }
    ops.push_back(std::move(o));
  }
  return ops;
}

core::Attrs attrs_of(const fb::Instruction* in, std::vector<core::AttrRef>* storage) {
  storage->clear();
  if (in->attrs())
    for (const fb::Attribute* a : *in->attrs()) storage->push_back(format::attr_ref(a));
  return core::Attrs(storage->data(), static_cast<uint32_t>(storage->size()));
}

// Conv with one group and fully connected layers run on Kiln's dense kernel where the CPU
// has it (see dense_conv.h); false leaves the op to XNNPACK.
bool create_dense(const OpPlan& p, const fb::Instruction* in, const uint8_t* constants, const fb::Method* m,
                  Delegate::Op* op) {
  const bool fits = p.kind == OpKind::kConv && dense_conv_fits(p.kernel_h, p.kernel_w);
  const bool conv = fits && p.groups == 1;
  // Depthwise: XNNPACK's unipass microkernels cover 4, 9 and 25 taps; other windows (7x7)
  // fall back to a grouped GEMM there, so Kiln's kernel takes them.
  const size_t taps = p.kernel_h * p.kernel_w;
  const bool depthwise = p.kind == OpKind::kConv && p.groups > 1 && p.group_in == 1 && p.group_out == 1 &&
                         taps != 4 && taps != 9 && taps != 25 && depthwise_fits(p.kernel_h, p.kernel_w);
  if (!dense_conv_available() || !(conv || depthwise || p.kind == OpKind::kFullyConnected)) return false;
  auto const_f32 = [&](int32_t v) -> const float* {
    const fb::Value* val = m->values()->Get(v);
    if (val->storage() == fb::StorageKind::Alias) val = m->values()->Get(val->alias_of());
    return reinterpret_cast<const float*>(constants + val->offset());
  };
  const float* bias = in->inputs()->size() > 2 && in->inputs()->Get(2) >= 0 ? const_f32(in->inputs()->Get(2)) : nullptr;
  if (!op->fused_bias.empty()) bias = op->fused_bias.data();
  if (depthwise) {
    op->own = Delegate::Op::Own::kDepthwise;
    op->depthwise = std::make_unique<DepthwiseWeights>();
    pack_depthwise(const_f32(in->inputs()->Get(1)), bias, p.groups, p.kernel_h, p.kernel_w, op->depthwise.get());
    return true;
  }
  op->own = Delegate::Op::Own::kDense;
  op->dense = std::make_unique<DenseConvWeights>();
  if (conv)
    pack_dense_conv(const_f32(in->inputs()->Get(1)), bias, p.group_out, p.group_in, p.kernel_h, p.kernel_w, false,
                    op->dense.get());
  else
    pack_dense_conv(const_f32(in->inputs()->Get(1)), bias, p.out_channels, p.channels, 1, 1, p.transpose_weights,
                    op->dense.get());
  return true;
}

// Narrows the op's output clamp to the Relu/Clip instruction fused into it.
Status fuse_clamp(const fb::Method* m, const format::ProgramFile& file, int32_t fused, Delegate::Op* op) {
  const fb::Instruction* f = m->instructions()->Get(fused);
  std::vector<core::AttrRef> attrs;
  Result<std::pair<float, float>> clamp = fusable_activation(f->op()->str(), attrs_of(f, &attrs), operands_of(m, file, f));
  const bool no_clamp = op->plan.kind == OpKind::kBinary &&
                        (op->plan.binary == BinaryOp::kMax || op->plan.binary == BinaryOp::kMin);
  if (!clamp.ok() || !takes_clamp(op->plan.kind) || no_clamp)
    return unimplemented(op->what + " cannot fuse instruction #" + std::to_string(fused));
  op->plan.out_min = std::max(op->plan.out_min, clamp->first);
  op->plan.out_max = std::min(op->plan.out_max, clamp->second);
  return ok_status();
}

// The layout rules export used, checked again on the verified program: a channels-last op
// reads twins, or channels-first values whose bytes read the same channels-last; a plain op
// never sees a twin.
Status check_layouts(const fb::Method* m, const std::vector<core::ExprNode>& exprs, const fb::DelegateOp* dop,
                     const Delegate::Op& op) {
  const int32_t out_id = dop->outputs()->Get(0);
  bool any_twin = op.out_twin;
  for (bool t : op.in_twin) any_twin = any_twin || t;
  if (op.plan.layout == Layout::kPlain && any_twin) return unimplemented(op.what + " reads a channels-last operand");
  if (!op.nhwc) {
    if (op.out_twin) return unimplemented(op.what + " writes a channels-last value from a channels-first op");
    return ok_status();
  }
  const size_t out_rank = m->values()->Get(out_id)->shape()->size();
  if (!op.out_twin && !spatial_one(exprs, m->values()->Get(out_id))) return unimplemented(op.what + " writes channels-first");
  const bool all = op.plan.kind == OpKind::kBinary || op.plan.kind == OpKind::kConcat;
  for (size_t k = 0; k < op.ins.size(); ++k) {
    if (!op.ins[k] || op.in_twin[k] || (!all && k > 0)) continue;
    const fb::Value* v = m->values()->Get(dop->inputs()->Get(k));
    const size_t r = v->shape()->size();
    bool fits = r == out_rank ? spatial_one(exprs, v) : r < out_rank;
    for (size_t a = 0; fits && r < out_rank && a < r; ++a) {
      const core::ExprNode& e = exprs[v->shape()->Get(a)];
      if (out_rank - r + a >= 2 && (e.op != core::ExprOp::kConst || e.value != 1)) fits = false;
    }
    if (!fits) return unimplemented(op.what + " reads a channels-first operand in a channels-last op");
  }
  return ok_status();
}

// Binary ops: constant operands broadcast to the output's rank, permuted once when the op
// runs channels-last.
void bind_constants(const fb::Method* m, const std::vector<core::ExprNode>& exprs, const fb::Instruction* in,
                    const std::vector<Operand>& operands, size_t out_rank, Delegate::Op* op) {
  for (int k = 0; k < 2; ++k) {
    if (op->ins[k]) continue;
    std::vector<int64_t> dims;
    for (int32_t e : *m->values()->Get(in->inputs()->Get(k))->shape()) dims.push_back(exprs[e].value);
    const size_t rank = std::max(out_rank, dims.size());
    const float* src = static_cast<const float*>(operands[k].const_data);
    const int r = static_cast<int>(dims.size());
    op->const_shape[k] = broadcast_shape(dims.data(), r, rank, op->nhwc);
    op->const_ptr[k] = src;
    if (op->nhwc && rank >= 3) {
      op->const_buf[k] = permute_const(src, broadcast_shape(dims.data(), r, rank, false));
      op->const_ptr[k] = op->const_buf[k].data();
    }
  }
}

// Concat: one strided copy per input into its channel slice. Channel counts are static
// (the support check said so); views have no dims before bind.
Status create_copies(const fb::Method* m, const std::vector<core::ExprNode>& exprs, const fb::DelegateOp* dop,
                     Delegate::Op* op) {
  auto channels = [&](int32_t v) {
    const fb::Value* val = m->values()->Get(v);
    const size_t axis = is_twin(m, v) ? val->shape()->size() - 1 : 1;
    return static_cast<size_t>(exprs[val->shape()->Get(axis)].value);
  };
  const size_t total = channels(dop->outputs()->Get(0));
  for (size_t k = 0; k < op->ins.size(); ++k) {
    const size_t c = channels(dop->inputs()->Get(k));
    xnn_operator_t copy = nullptr;
    KILN_TRY(check(xnn_create_copy_nc_x32(c, c, total, 0, &copy), op->what, "create"));
    op->copies.push_back(copy);
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Delegate::Op>> Delegate::create_op(const fb::Method* m, const format::ProgramFile& file,
                                                          const std::vector<core::ExprNode>& exprs,
                                                          std::vector<TensorView>* views, const fb::DelegateOp* dop) {
  auto op = std::make_unique<Op>();
  if (dop->kind() != fb::DelegateOpKind::Kernel) {
    op->kind = dop->kind() == fb::DelegateOpKind::ToNhwc ? Op::Kind::kToNhwc : Op::Kind::kToNchw;
    op->ins.push_back(&(*views)[dop->inputs()->Get(0)]);
    op->out = &(*views)[dop->outputs()->Get(0)];
    return op;
  }
  const fb::Instruction* in = m->instructions()->Get(dop->source());
  op->source = dop->source();
  op->fused = dop->fused();
  op->what = "instruction #" + std::to_string(dop->source()) + " '" + (in->node_name() ? in->node_name()->str() : "") +
             "' (" + in->op()->str() + ")";
  if (dop->outputs()->size() != 1) return unimplemented(op->what + " has more than one output");
  std::vector<core::AttrRef> attrs;
  const std::vector<Operand> operands = operands_of(m, file, in);
  std::vector<std::vector<core::ExprId>> out_shapes;
  for (int32_t v : *in->outputs())
    out_shapes.emplace_back(m->values()->Get(v)->shape()->begin(), m->values()->Get(v)->shape()->end());
  Result<OpPlan> plan = plan_op(in->op()->str(), attrs_of(in, &attrs), operands, out_shapes, exprs.data());
  if (!plan.ok()) return unimplemented(op->what + " cannot run on XNNPACK: " + plan.status().message());
  op->plan = *plan;
  if (dop->fused() >= 0) {
    const fb::Instruction* f = m->instructions()->Get(dop->fused());
    std::vector<core::AttrRef> source_attrs;
    Result<Gate> gate = fusable_gate(in->op()->str(), attrs_of(in, &source_attrs), f->op()->str());
    const int32_t x = in->inputs()->Get(0), act = in->outputs()->Get(0);
    const bool reads_both = f->inputs()->size() == 2 && ((f->inputs()->Get(0) == x && f->inputs()->Get(1) == act) ||
                                                         (f->inputs()->Get(0) == act && f->inputs()->Get(1) == x));
    const int32_t y = in->outputs()->Get(0);
    const int yk = f->inputs()->size() == 2 && f->inputs()->Get(1) == y ? 1 : 0;
    Result<const float*> bias =
        fusable_bias(op->plan, f->op()->str(), operands_of(m, file, f), yk, m->values()->Get(y)->shape()->size(), exprs.data());
    if (gate.ok() && reads_both && op->plan.kind == OpKind::kUnary) {
      op->own = Op::Own::kGate;
      op->gate = *gate;
    } else if (bias.ok() && f->inputs()->Get(yk) == y) {  // the Add's constant joins the layer's bias
      const float* own = in->inputs()->size() > 2 && in->inputs()->Get(2) >= 0 ? static_cast<const float*>(operands[2].const_data) : nullptr;
      op->fused_bias.assign(*bias, *bias + op->plan.out_channels);
      for (size_t k = 0; own && k < op->fused_bias.size(); ++k) op->fused_bias[k] += own[k];
    } else {
      KILN_TRY(fuse_clamp(m, file, dop->fused(), op.get()));
    }
  }
  const int32_t out_id = dop->outputs()->Get(0);
  op->out = &(*views)[out_id];
  op->out_twin = is_twin(m, out_id);
  bool any_twin = op->out_twin;
  for (size_t k = 0; k < dop->inputs()->size(); ++k) {
    const int32_t v = dop->inputs()->Get(k);
    op->in_twin.push_back(v >= 0 && is_twin(m, v));
    any_twin = any_twin || op->in_twin.back();
    op->ins.push_back(v >= 0 && !operands[k].const_data ? &(*views)[v] : nullptr);
  }
  op->nhwc = op->plan.layout == Layout::kNhwc || (op->plan.layout == Layout::kEither && any_twin);
  KILN_TRY(check_layouts(m, exprs, dop, *op));
  if (op->plan.kind == OpKind::kBinary)
    bind_constants(m, exprs, in, operands, m->values()->Get(out_id)->shape()->size(), op.get());
  if (op->own == Op::Own::kGate) return op;
  if (op->plan.own_kernel) {
    using Own = Delegate::Op::Own;
    op->own = op->plan.kind == OpKind::kBatchMatMul ? Own::kMatMul
              : op->plan.kind == OpKind::kSoftmax ? Own::kSoftmax
              : op->plan.kind == OpKind::kUnary && op->plan.unary == UnaryOp::kTanh ? Own::kTanh
              : op->plan.kind == OpKind::kBatchNorm ? Own::kAffine
              : op->plan.kind == OpKind::kMaxPool ? Own::kMaxPool
              : op->plan.kind == OpKind::kUnary && op->plan.unary == UnaryOp::kErf ? Own::kErf
              : op->plan.kind == OpKind::kUnary && op->plan.unary == UnaryOp::kGelu ? Own::kGelu
              : op->plan.kind == OpKind::kLayerNorm ? Own::kLayerNorm
              : op->plan.kind == OpKind::kAttention ? Own::kAttention
                                                                                    : Own::kPortable;
    if (op->own == Own::kLayerNorm) {
      op->ln_gamma = static_cast<const float*>(operands[1].const_data);
      op->ln_beta = operands.size() > 2 && operands[2].present ? static_cast<const float*>(operands[2].const_data) : nullptr;
    }
    if (op->own == Own::kMatMul && !op->ins[1]) op->ins[1] = &(*views)[dop->inputs()->Get(1)];  // a constant B
    if (op->plan.kind == OpKind::kBatchNorm) {
      const float* v[5];
      for (int k = 1; k < 5; ++k) v[k] = static_cast<const float*>(operands[k].const_data);
      for (size_t ch = 0; ch < op->plan.channels; ++ch) {
        const float s = v[1][ch] / std::sqrt(v[4][ch] + op->plan.alpha);
        op->scale.push_back(s);
        op->shift.push_back(v[2][ch] - v[3][ch] * s);
      }
    }
    if (op->own == Own::kAttention) {  // the portable op's decoding, rows split over the pool
      attrs_of(in, &op->portable_attrs);
      for (int32_t v : *dop->inputs()) op->portable_ins.push_back(v >= 0 ? &(*views)[v] : nullptr);
    }
    if (op->own == Own::kPortable) {
      op->portable_def = op->plan.kind == OpKind::kResize ? nullptr : kernels::find_op(in->op()->c_str());
      op->portable = op->portable_def ? op->portable_def->run : kernels::resize_run_channels_last;
      attrs_of(in, &op->portable_attrs);
      for (int32_t v : *dop->inputs()) op->portable_ins.push_back(v >= 0 ? &(*views)[v] : nullptr);
    }
    return op;
  }
  if (op->plan.kind == OpKind::kConcat) KILN_TRY(create_copies(m, exprs, dop, op.get()));
  else if (!create_dense(op->plan, in, file.constants, m, op.get())) KILN_TRY(create_kernel(op->plan, in, file.constants, m, op.get()));
  return op;
}

Result<std::unique_ptr<Delegate>> Delegate::create(const fb::Method* m, const format::ProgramFile& file,
                                                   const std::vector<core::ExprNode>& exprs,
                                                   std::vector<TensorView>* views, pthreadpool_t pool) {
  const fb::Delegate* d = m->delegate();
  if (!d) return failed_precondition("the method has no delegate");
  if (d->backend()->str() != "xnnpack") return unimplemented("unknown delegate backend '" + d->backend()->str() + "'");
  KILN_TRY(initialize());
  const uint64_t bytes_before = g_bytes;
  std::unique_ptr<Delegate> del(new Delegate());
  del->pool_ = pool;
  for (const fb::DelegateRegion* r : *d->regions()) {
    std::vector<std::unique_ptr<Op>> ops;
    for (const fb::DelegateOp* dop : *r->ops()) {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Op> op, create_op(m, file, exprs, views, dop));
      ops.push_back(std::move(op));
    }
    del->regions_.push_back(std::move(ops));
  }
  del->packed_bytes_ = g_bytes - bytes_before;
  return del;
}

Delegate::~Delegate() = default;

Result<std::unique_ptr<Backend>> create_backend(const BackendContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Delegate> d, Delegate::create(ctx.method, *ctx.file, *ctx.exprs, ctx.views, ctx.pool));
  return std::unique_ptr<Backend>(std::move(d));
}

namespace {

// FusedAttention: tasks of up to 16 query rows of one batch slice.
struct AttentionJob {
  const kernels::RunCtx* ctx;
  simd::AttentionSlice base;
  size_t row_blocks;
};
constexpr size_t kAttentionRows = 16;

void attention_task(void* p, size_t task) {
  const AttentionJob& j = *static_cast<const AttentionJob*>(p);
  simd::AttentionSlice s;
  kernels::fused_attention_batch(*j.ctx, j.base, static_cast<int64_t>(task / j.row_blocks), &s);
  const size_t r0 = (task % j.row_blocks) * kAttentionRows;
  simd::attention_rows(s, r0, std::min(s.lq, r0 + kAttentionRows));
}

// `t` seen channels-last: a twin as is, a channels-first value with its dims permuted.
TensorView as_nhwc(const TensorView& t, bool twin) {
  TensorView v = t;
  if (twin || t.rank < 3) return v;
  for (int k = 1; k + 1 < t.rank; ++k) v.dims[k] = t.dims[k + 1];
  v.dims[t.rank - 1] = t.dims[1];
  return v;
}

// y = clamp(x * scale[c] + shift[c]) with c the last axis (channels-last: tasks of 64
// pixels) or axis 1 (channels-first: a task per (n, c) plane).
void channel_affine(const Delegate::Op& op, pthreadpool_t pool) {
  struct Job {
    const Delegate::Op* op;
    size_t plane, pixels;  // plane: elements per (n, c) when channels-first, else 0
  } j{&op, 0, 0};
  const TensorView& x = *op.ins[0];
  const size_t c = op.plan.channels;
  if (!op.in_twin[0] && x.rank > 2) {
    j.plane = 1;
    for (int k = 2; k < x.rank; ++k) j.plane *= static_cast<size_t>(x.dims[k]);
  }
  j.pixels = numel(x) / c;
  constexpr size_t kPixels = 64;
  const size_t tasks = j.plane ? numel(x) / std::max<size_t>(1, j.plane) : (j.pixels + kPixels - 1) / kPixels;
  pthreadpool_parallelize_1d(
      pool,
      [](void* ctx, size_t t) {
        const Job& j = *static_cast<const Job*>(ctx);
        const Delegate::Op& op = *j.op;
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
      },
      &j, tasks, 0);
}

// SAME_UPPER's leading pad for the actual sizes (the smaller half of the total).
int64_t same_upper_pad(size_t in, size_t out, size_t stride, size_t kernel, size_t dilation) {
  const int64_t total = static_cast<int64_t>((out - 1) * stride + (kernel - 1) * dilation + 1) - static_cast<int64_t>(in);
  return std::max<int64_t>(0, total) / 2;
}

// The dense kernel's geometry at the bound-to shape (SAME_UPPER pads from the actual sizes).
void set_dense_geometry(const TensorView& x, bool x_twin, const TensorView& y, bool y_twin, Delegate::Op* op) {
  DenseConvGeometry& g = op->geom;
  const OpPlan& p = op->plan;
  g = DenseConvGeometry{};
  g.out_min = p.out_min;
  g.out_max = p.out_max;
  if (p.kind == OpKind::kFullyConnected) {
    g.batch = numel(x) / p.channels;
    g.in_stride = p.channels;
    return;
  }
  size_t c, m;
  nhwc_dims(x, x_twin, &g.batch, &g.in_h, &g.in_w, &c);
  nhwc_dims(y, y_twin, &g.batch, &g.out_h, &g.out_w, &m);
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
}

// Own max pooling's geometry at the bound-to shape.
void set_pool_geometry(const TensorView& x, bool x_twin, const TensorView& y, bool y_twin, Delegate::Op* op) {
  MaxPoolGeometry& g = op->pool_geom;
  const OpPlan& p = op->plan;
  nhwc_dims(x, x_twin, &g.batch, &g.in_h, &g.in_w, &g.channels);
  size_t c;
  nhwc_dims(y, y_twin, &g.batch, &g.out_h, &g.out_w, &c);
  g.kernel_h = p.kernel_h, g.kernel_w = p.kernel_w, g.stride_h = p.stride_h, g.stride_w = p.stride_w;
  g.dilation_h = p.dilation_h, g.dilation_w = p.dilation_w;
  g.pad_top = p.pad_top, g.pad_left = p.pad_left;
  g.out_min = p.out_min, g.out_max = p.out_max;
  if (p.same_upper) {
    g.pad_top = same_upper_pad(g.in_h, g.out_h, p.stride_h, p.kernel_h, p.dilation_h);
    g.pad_left = same_upper_pad(g.in_w, g.out_w, p.stride_w, p.kernel_w, p.dilation_w);
  }
}

}  // namespace

Status Delegate::setup() {
  Shape& now = dims_scratch_;  // keeps its capacity: no allocation after the first bind
  for (std::vector<std::unique_ptr<Op>>& ops : regions_) {
    for (std::unique_ptr<Op>& p : ops) {
      Op& op = *p;
      if (op.kind != Op::Kind::kKernel) continue;
      now.clear();  // the operands' shapes and addresses (placement by shape moves values)
      for (const TensorView* t : op.ins)
        if (t) {
          for (int k = 0; k < t->rank; ++k) now.push_back(static_cast<size_t>(t->dims[k]));
          now.push_back(reinterpret_cast<uintptr_t>(t->data));
        }
      for (int k = 0; k < op.out->rank; ++k) now.push_back(static_cast<size_t>(op.out->dims[k]));
      now.push_back(reinterpret_cast<uintptr_t>(op.out->data));
      if (now == op.last && !op.last.empty()) continue;
      op.last = now;
      op.skip = numel(*op.out) == 0;  // an empty input with a non-empty output (MatMul, K = 0) still runs
      // Waking the pool costs microseconds: small ops run on the calling thread.
      op.pool = pool_for(pool_, numel(*op.out), op.plan.flops_per_output);
      if (op.skip) continue;
      const TensorView& x = op.ins[0] ? *op.ins[0] : *op.ins[1];  // a binary op may take a constant first
      const float* xp = x.as<float>();
      float* y = op.out->as<float>();
      size_t n, h, w, c;
      if (op.own == Op::Own::kDense || op.own == Op::Own::kDepthwise) {
        set_dense_geometry(x, op.in_twin[0], *op.out, op.out_twin, &op);
        continue;
      }
      if (op.own == Op::Own::kMaxPool) set_pool_geometry(x, op.in_twin[0], *op.out, op.out_twin, &op);
      if (op.own == Op::Own::kMatMul) op.mm = matmul_geometry(x.dims, x.rank, op.ins[1]->dims, op.ins[1]->rank);
      if (op.own != Op::Own::kNone) continue;
      xnn_status s = xnn_status_success;
      switch (op.plan.kind) {
        case OpKind::kConv:
          nhwc_dims(x, op.in_twin[0], &n, &h, &w, &c);
          s = xnn_setup_convolution2d_nhwc_f32(op.xop, n, h, w, xp, y, op.pool);
          break;
        case OpKind::kConvTranspose:
          nhwc_dims(x, op.in_twin[0], &n, &h, &w, &c);
          s = xnn_setup_deconvolution2d_nhwc_f32(op.xop, n, h, w, op.plan.adjust_h, op.plan.adjust_w, xp, y, op.pool);
          break;
        case OpKind::kMaxPool:
          nhwc_dims(x, op.in_twin[0], &n, &h, &w, &c);
          s = xnn_setup_max_pooling2d_nhwc_f32(op.xop, n, h, w, xp, y, op.pool);
          break;
        case OpKind::kAveragePool:
          nhwc_dims(x, op.in_twin[0], &n, &h, &w, &c);
          s = xnn_setup_average_pooling2d_nhwc_f32(op.xop, n, h, w, xp, y, op.pool);
          break;
        case OpKind::kGlobalAveragePool:
          nhwc_dims(x, op.in_twin[0], &n, &h, &w, &c);
          s = xnn_setup_global_average_pooling_nwc_f32(op.xop, n, h * w, xp, y, op.pool);
          break;
        case OpKind::kFullyConnected:
          s = xnn_setup_fully_connected_nc_f32(op.xop, numel(x) / op.plan.channels, xp, y, op.pool);
          break;
        case OpKind::kSoftmax:
          s = xnn_setup_softmax_nc_f32(op.xop, numel(x) / op.plan.channels, xp, y, op.pool);
          break;
        case OpKind::kUnary: {
          const size_t count = numel(x);
          switch (op.plan.unary) {
            case UnaryOp::kClamp: s = xnn_setup_clamp_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kSigmoid: s = xnn_setup_sigmoid_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kHardSwish: s = xnn_setup_hardswish_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kLeakyRelu: s = xnn_setup_leaky_relu_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kElu: s = xnn_setup_elu_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kAbs: s = xnn_setup_abs_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kNeg: s = xnn_setup_negate_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kFloor: s = xnn_setup_floor_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kCeil: s = xnn_setup_ceiling_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kSqrt: s = xnn_setup_square_root_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kRound: s = xnn_setup_bankers_rounding_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kSquare: s = xnn_setup_square_nc_f32(op.xop, count, xp, y, op.pool); break;
            case UnaryOp::kErf:
            case UnaryOp::kTanh:
            case UnaryOp::kGelu:
            case UnaryOp::kPortable: break;
          }
          break;
        }
        case OpKind::kBinary: {
          const size_t rank = static_cast<size_t>(op.out->rank);
          size_t sh[2][kMaxRank], sh_rank[2];  // on the stack: bind allocates nothing
          const float* ptr[2];
          for (int k = 0; k < 2; ++k) {
            if (!op.ins[k]) {
              sh_rank[k] = op.const_shape[k].size();
              std::copy(op.const_shape[k].begin(), op.const_shape[k].end(), sh[k]);
              ptr[k] = op.const_ptr[k];
            } else {
              sh_rank[k] = rank;
              broadcast_dims(op.ins[k]->dims, op.ins[k]->rank, rank, op.in_twin[k] ? false : op.nhwc, sh[k]);
              ptr[k] = op.ins[k]->as<float>();
            }
          }
          auto setup = [&](auto fn) {
            return fn(op.xop, sh_rank[0], sh[0], sh_rank[1], sh[1], ptr[0], ptr[1], y, op.pool);
          };
          switch (op.plan.binary) {
            case BinaryOp::kAdd: s = setup(xnn_setup_add_nd_f32); break;
            case BinaryOp::kSub: s = setup(xnn_setup_subtract_nd_f32); break;
            case BinaryOp::kMul: s = setup(xnn_setup_multiply_nd_f32); break;
            case BinaryOp::kDiv: s = setup(xnn_setup_divide_nd_f32); break;
            case BinaryOp::kMax: s = setup(xnn_setup_maximum_nd_f32); break;
            case BinaryOp::kMin: s = setup(xnn_setup_minimum_nd_f32); break;
          }
          break;
        }
        case OpKind::kConcat: {
          size_t on, oh, ow, total;
          nhwc_dims(*op.out, op.out_twin, &on, &oh, &ow, &total);
          size_t offset = 0;
          for (size_t k = 0; k < op.ins.size() && s == xnn_status_success; ++k) {
            nhwc_dims(*op.ins[k], op.in_twin[k], &n, &h, &w, &c);  // c: this input's channels
            s = xnn_setup_copy_nc_x32(op.copies[k], on * oh * ow, op.ins[k]->data, y + offset, op.pool);
            offset += c;
          }
          break;
        }
        case OpKind::kBatchNorm:  // own kernels: nothing to set up here
        case OpKind::kLayerNorm:
        case OpKind::kAttention:
        case OpKind::kResize:
        case OpKind::kBatchMatMul:
          break;
      }
      if (s != xnn_status_success) {
        op.last.clear();
        return invalid_argument(op.what + ": XNNPACK setup failed (" + status_text(s) + ")");
      }
    }
  }
  return ok_status();
}

StepInfo Delegate::step_info(size_t r, size_t k) const {
  const Op& op = *regions_[r][k];
  StepInfo s;
  s.kind = op.kind == Op::Kind::kToNhwc ? "to_nhwc" : op.kind == Op::Kind::kToNchw ? "to_nchw" : "kernel";
  s.source = op.source;
  s.fused = op.fused;
  s.out = op.out;
  s.ns = op.ns;
  return s;
}

void Delegate::reset_times() {
  for (auto& ops : regions_)
    for (auto& op : ops) op->ns = 0;
}

Status Delegate::run_region(size_t r, bool timed) {
  for (std::unique_ptr<Op>& p : regions_[r]) {
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    KILN_TRY(run_op(*p));
    if (timed)
      p->ns += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  return ok_status();
}

Status Delegate::run_op(Op& op) {
  if (op.kind != Op::Kind::kKernel) op.pool = pool_for(pool_, numel(*op.out), 1);
  if (op.kind == Op::Kind::kToNhwc) {
    const TensorView& x = *op.ins[0];
    size_t n, h, w, c;
    nhwc_dims(x, false, &n, &h, &w, &c);
    to_channels_last(x.as<float>(), op.out->as<float>(), n, c, h * w, op.pool);
    return ok_status();
  }
  if (op.kind == Op::Kind::kToNchw) {
    const TensorView& x = *op.ins[0];
    size_t n, h, w, c;
    nhwc_dims(x, true, &n, &h, &w, &c);
    to_channels_first(x.as<float>(), op.out->as<float>(), n, c, h * w, op.pool);
    return ok_status();
  }
  if (op.skip) return ok_status();
  switch (op.own) {
    case Op::Own::kNone:
      break;
    case Op::Own::kDense:
      dense_conv(*op.dense, op.geom, op.ins[0]->as<float>(), op.out->as<float>(), op.pool);
      return ok_status();
    case Op::Own::kDepthwise:
      depthwise_conv(*op.depthwise, op.geom, op.ins[0]->as<float>(), op.out->as<float>(), op.pool);
      return ok_status();
    case Op::Own::kMaxPool:
      max_pool_nhwc(op.pool_geom, op.ins[0]->as<float>(), op.out->as<float>(), op.pool);
      return ok_status();
    case Op::Own::kAffine:
      channel_affine(op, op.pool);
      return ok_status();
    case Op::Own::kErf:
      fast_erf(op.ins[0]->as<float>(), op.out->as<float>(), numel(*op.out), op.pool);
      return ok_status();
    case Op::Own::kTanh:
      fast_tanh(op.ins[0]->as<float>(), op.out->as<float>(), numel(*op.out), op.pool);
      return ok_status();
    case Op::Own::kGelu:
      fast_gelu(op.ins[0]->as<float>(), op.out->as<float>(), numel(*op.out), op.plan.gelu_tanh, op.pool);
      return ok_status();
    case Op::Own::kLayerNorm: {
      const TensorView& x = *op.ins[0];
      const size_t n = op.plan.channels;
      layer_norm_rows(x.as<float>(), op.out->as<float>(), n ? numel(x) / n : 0, n, op.ln_gamma, op.ln_beta, op.plan.alpha,
                      op.pool);
      return ok_status();
    }
    case Op::Own::kAttention: {
      const TensorView* ins[3 + simd::kAttentionMaxPost] = {};
      const size_t n = std::min<size_t>(op.portable_ins.size(), 3 + simd::kAttentionMaxPost);
      for (size_t k = 0; k < n; ++k) ins[k] = op.portable_ins[k];
      TensorView* out = op.out;
      kernels::RunCtx ctx;
      ctx.inputs = ins;
      ctx.num_inputs = static_cast<uint32_t>(n);
      ctx.outputs = &out;
      ctx.num_outputs = 1;
      ctx.attrs = core::Attrs(op.portable_attrs.data(), static_cast<uint32_t>(op.portable_attrs.size()));
      AttentionJob job{&ctx, {}, 0};
      int64_t batches = 0;
      if (!kernels::fused_attention_slices(ctx, &job.base, &batches)) return internal_error(op.what + ": kernel failed");
      job.row_blocks = (job.base.lq + kAttentionRows - 1) / kAttentionRows;
      pthreadpool_parallelize_1d(op.pool, attention_task, &job, static_cast<size_t>(batches) * job.row_blocks, 0);
      return ok_status();
    }
    case Op::Own::kSoftmax: {
      const TensorView& x = *op.ins[0];
      const size_t n = x.rank ? static_cast<size_t>(x.dims[x.rank - 1]) : 1;
      softmax_rows(x.as<float>(), op.out->as<float>(), n ? numel(x) / n : 0, n, op.pool);
      return ok_status();
    }
    case Op::Own::kMatMul:
      batch_matmul(op.mm, op.ins[0]->as<float>(), op.ins[1]->as<float>(), op.out->as<float>(), op.pool);
      return ok_status();
    case Op::Own::kGate:
      gate(op.ins[0]->as<float>(), op.out->as<float>(), numel(*op.out), op.gate.hard, op.gate.alpha, op.gate.beta, op.pool);
      return ok_status();
    case Op::Own::kPortable: {
      // Channels-last kernels read NHWC dims: a channels-first value read as is (its spatial
      // axes are 1) is seen with its dims permuted.
      const bool nhwc = op.plan.kind == OpKind::kResize;
      TensorView x = nhwc ? as_nhwc(*op.ins[0], op.in_twin[0]) : *op.ins[0];
      TensorView y = nhwc ? as_nhwc(*op.out, op.out_twin) : *op.out;
      const TensorView* ins[4] = {&x, nullptr, nullptr, nullptr};
      for (size_t k = 1; k < op.portable_ins.size() && k < 4; ++k) ins[k] = op.portable_ins[k];
      TensorView* out = &y;
      kernels::RunCtx ctx;
      ctx.inputs = ins;
      ctx.num_inputs = static_cast<uint32_t>(std::min<size_t>(4, op.portable_ins.size()));
      ctx.outputs = &out;
      ctx.num_outputs = 1;
      ctx.attrs = core::Attrs(op.portable_attrs.data(), static_cast<uint32_t>(op.portable_attrs.size()));
      const kernels::KernelStatus ks = op.portable_def ? kernels::run_once(*op.portable_def, ctx) : op.portable(ctx);
      if (ks != kernels::KernelStatus::kOk)
        return Status(Code::kInvalidArgument, op.what + ": " + kernels::kernel_status_message(ks), Reason::kDataRefused);
      return ok_status();
    }
  }
  if (op.plan.kind == OpKind::kConcat) {
    for (xnn_operator_t c : op.copies)
      if (xnn_run_operator(c, op.pool) != xnn_status_success) return internal_error(op.what + ": XNNPACK run failed");
    return ok_status();
  }
  if (xnn_run_operator(op.xop, op.pool) != xnn_status_success) return internal_error(op.what + ": XNNPACK run failed");
  return ok_status();
}

uint64_t allocation_count() { return g_allocations; }

}  // namespace kiln::delegates::xnnpack
