#pragma once
// One step of an XNNPACK delegate region, and the table of delegated ops (ops.inc). Internal to
// the XNNPACK backend.
//
// Each delegated ONNX op is one row of ops.inc: its support check (a planner: the OpPlan, or
// the reason it declines) and its maker (the Op subclass that computes it). An Op is made at
// Method::create (create: weights packed, XNNPACK operators made), set up at bind when an
// operand's shape or address changed (setup), and run at execute (run, never allocating).
// The families live one file each: conv.cc (Conv, ConvTranspose, Gemm/MatMul), pooling.cc,
// elementwise.cc (binary, unary, gates, BatchNormalization), rows.cc (Softmax, LayerNorm,
// attention, batched MatMul) and movement.cc (Concat, Resize, layout changes).
//
// Adding a delegated op: a row in ops.inc, a planner, and (unless an existing Op computes it)
// an Op subclass with create/setup/run in its family's file.

#include <xnnpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/attrs.h"
#include "core/symexpr.h"
#include "core/status.h"
#include "delegates/xnnpack/support.h"
#include "format/reader.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::delegates::xnnpack {

using Shape = std::vector<size_t>;

/// What an op's create reads: the verified program around the instruction it computes.
struct OpSource {
  const fb::Method* m = nullptr;
  const format::ProgramFile* file = nullptr;
  const std::vector<core::ExprNode>* exprs = nullptr;
  std::vector<TensorView>* views = nullptr;
  const fb::DelegateOp* dop = nullptr;
  const fb::Instruction* in = nullptr;
  std::vector<Operand> operands;  ///< the instruction's operands as the support check saw them
  const Gate* gate = nullptr;     ///< a Mul folded into a Sigmoid/HardSigmoid (elementwise.cc), or a
                                  ///< convolution's gate (conv.cc)
  std::vector<float> fused_bias;  ///< a fully connected layer's bias plus a folded Add's constant

  /// The constant f32 data of value `v` (through an alias); null when it is not a constant.
  const float* const_f32(int32_t v) const;
  /// The instruction's operand `k` as a constant (null when absent or not constant).
  const float* operand_f32(size_t k) const;
  /// The instruction's attributes (`storage` keeps them).
  core::Attrs attrs(std::vector<core::AttrRef>* storage) const;
};

/// What a portable kernel run inside a region reads: the instruction's attributes and every
/// operand's view (constants included), captured once at create.
struct KernelOperands {
  std::vector<core::AttrRef> attrs;
  std::vector<const TensorView*> views;
  void capture(const OpSource& src);
  core::Attrs attr_view() const { return core::Attrs(attrs.data(), static_cast<uint32_t>(attrs.size())); }
};

/// One step of a region: an instruction (with what export fused into it) or a layout change.
struct Op {
  virtual ~Op() = default;
  /// Once, at Method::create: packs weights, makes XNNPACK operators.
  virtual Status create(const OpSource&) { return ok_status(); }
  /// At bind, when an operand's shape or address changed; `pool` is chosen for the new size.
  /// Allocates nothing once a setup at the bound has been done.
  virtual Status setup() { return ok_status(); }
  /// At execute. Never allocates.
  virtual Status run() = 0;
  /// Layout changes choose their pool at every run and have no setup.
  virtual bool is_layout_change() const { return false; }
  /// Whether the op can write its output as channels [into_channel, +M) of the wider
  /// channels-last value `into` (a Concat's output, DelegateOp::into) instead of `out`.
  virtual bool writes_slices() const { return false; }
  /// A Concat: its input k is written in place by its producer (no copy). False: the op
  /// cannot skip it (the producer then writes its own output).
  virtual bool input_in_place(size_t /*k*/) { return false; }
  /// A depthwise convolution that can hand its output rows to the op after it
  /// (take_feeder) instead of writing them to memory.
  virtual bool can_feed() const { return false; }
  /// A 1x1 convolution reading `producer`'s output, which nothing else reads: computes both
  /// from now on where it pays (depthwise_pointwise); false when it cannot.
  virtual bool take_feeder(Op* /*producer*/) { return false; }
  /// At this bind the next op computes this one (take_feeder): this op's run does nothing.
  virtual bool in_next() const { return false; }
  /// Carries NaN and Inf as the portable kernels do (StepInfo::keeps_nan): Kiln's kernels do.
  virtual bool keeps_nan() const { return true; }

  const char* step_kind = "kernel";  ///< profiles: "kernel", "to_nhwc", "to_nchw"
  std::string what;                  ///< "instruction #3 'Conv_3' (Conv)"
  int32_t source = -1, fused = -1;   ///< the instructions it computes
  int32_t gate_act = -1;             ///< and a convolution's gate activation (fused: its Mul)
  int32_t clamp = -1;                ///< and an activation after a fused bias Add
  OpPlan plan;
  std::vector<const TensorView*> ins;  ///< activation operands (constants appear as nullptr)
  std::vector<bool> in_twin;           ///< operand k is a channels-last twin
  TensorView* out = nullptr;
  bool out_twin = false;
  TensorView* into = nullptr;       ///< where writes_slices(): the Concat output it writes a slice of
  size_t into_channel = 0;          ///< the slice's first channel
  bool nhwc = false;                ///< computes channels-last
  pthreadpool_t pool = nullptr;     ///< the Method's pool, or none when the op is too small to split
  uint64_t ns = 0;                  ///< profiling: time spent running it
  Shape last;                       ///< operand dims and addresses at the last setup
  bool skip = false;                ///< an empty output: nothing to run
};

/// An op computed by one XNNPACK operator. Its minmax microkernels clamp with x86 max/min,
/// which keep the non-NaN operand: unless a subclass knows its operator carries NaN (unary
/// maps with no clamp, copies), it does not keep NaN.
struct XnnOp : Op {
  ~XnnOp() override {
    if (xop) xnn_delete_operator(xop);
  }
  Status run() override;
  bool keeps_nan() const override { return false; }
  xnn_operator_t xop = nullptr;
};

/// The layout change at a region's edge (movement.cc): channels-first to its channels-last
/// twin, or back.
std::unique_ptr<Op> make_layout_change(bool to_nhwc);

// The table (ops.inc).
/// What a planner sees of an instruction.
struct PlanInput {
  const std::string& op;
  core::Attrs attrs;
  const std::vector<Operand>& ins;
  const std::vector<std::vector<core::ExprId>>& out_shapes;
  const core::ExprNode* exprs;
};
using PlanFn = Status (*)(const PlanInput& in, OpPlan* plan);
/// The Op that computes a planned instruction (its create does the work).
using MakeFn = std::unique_ptr<Op> (*)(const OpPlan& plan, const OpSource& src);
struct OpEntry {
  const char* onnx;
  PlanFn plan;
  MakeFn make;
};
/// The table's row for ONNX op `onnx`, or null (the delegate declines it).
const OpEntry* find_entry(const std::string& onnx);

#define KILN_XNN_OP(onnx, plan, make) \
  Status plan(const PlanInput& in, OpPlan* p); \
  std::unique_ptr<Op> make(const OpPlan& plan_, const OpSource& src);
#include "delegates/xnnpack/ops.inc"
#undef KILN_XNN_OP

// Planners' shared checks (support.cc).
Status decline(const std::string& why);
int64_t const_of(const core::ExprNode* exprs, core::ExprId e);
/// Sizes XNNPACK takes: they fit uint32 and stay far below what would overflow its index math.
bool small(int64_t v);
/// A size fixed at export (XNNPACK fixes it at create), in [1, 2^24].
Status static_dim(const core::ExprNode* exprs, core::ExprId e, const char* what, size_t* out);
/// Pads, strides and dilations of a 1-D or 2-D window in NHWC terms (a 1-D window is H = 1).
Status window_plan(core::Attrs attrs, int nsp, OpPlan* p);

// Shapes at run time.
/// N, H, W, C of an activation seen channels-last: a twin is [N, (H,) W, C]; a channels-first
/// value read as is (its spatial axes are 1) is [N, C, (1,) 1].
void nhwc_dims(const TensorView& t, bool twin, size_t* n, size_t* h, size_t* w, size_t* c);
size_t numel(const TensorView& t);
/// `t` seen channels-last: a twin as is, a channels-first value with its dims permuted.
TensorView as_nhwc(const TensorView& t, bool twin);
/// SAME_UPPER's leading pad for the actual sizes (the smaller half of the total).
int64_t same_upper_pad(size_t in, size_t out, size_t stride, size_t kernel, size_t dilation);

/// Explicit pads, or none with XNNPACK's TensorFlow SAME padding (ONNX SAME_UPPER).
struct Padding {
  uint32_t top, right, bottom, left, flags;
  explicit Padding(const OpPlan& p)
      : top(p.same_upper ? 0 : p.pad_top),
        right(p.same_upper ? 0 : p.pad_right),
        bottom(p.same_upper ? 0 : p.pad_bottom),
        left(p.same_upper ? 0 : p.pad_left),
        flags(p.same_upper ? XNN_FLAG_TENSORFLOW_SAME_PADDING : 0) {}
};

// XNNPACK's statuses.
std::string status_text(xnn_status s);
/// A failed xnn_create_*: the op cannot run delegated (kUnimplemented; the Method falls back).
Status check_create(xnn_status s, const std::string& what);
/// A failed xnn_setup_* at bind (kInvalidArgument naming the op).
Status check_setup(xnn_status s, const Op& op);

}  // namespace kiln::delegates::xnnpack
