// Pad: hand cases (every mode, cropping, opset < 11 attributes, opset 18 axes, opset 19 wrap),
// a seeded sweep of random shapes, pads and dtypes against a reference written here (also run
// in oversized slots), empty inputs and outputs, errors, and symbolic shapes checked against
// the kernel below the bound.
#include <gtest/gtest.h>

#include <cstring>

#include "bound_slot_util.h"
#include "guard_text_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;

core::AttrStore mode_attr(const char* mode) { return core::AttrStore().set_str("mode", mode); }

/// Source index along one axis of size d for output index i, or -1 for the constant; found
/// by cropping first, then mirroring or wrapping step by step (not by the kernel's modular
/// formula).
int64_t source_index(int64_t i, int64_t d, int64_t begin, int64_t end, const std::string& mode) {
  const int64_t lo = std::max<int64_t>(0, -begin), hi = d - std::max<int64_t>(0, -end);
  int64_t s = i - begin;
  if (s >= lo && s < hi) return s;
  if (mode == "constant") return -1;
  if (mode == "edge") return s < lo ? lo : hi - 1;
  if (mode == "wrap") {
    while (s < lo) s += hi - lo;
    while (s >= hi) s -= hi - lo;
    return s;
  }
  if (hi - lo == 1) return lo;
  while (s < lo || s >= hi) s = s < lo ? 2 * lo - s : 2 * (hi - 1) - s;
  return s;
}

/// Expected shape and, per output element, the input element it copies (-1: the constant).
void reference(const Shape& shape, const Shape& begin, const Shape& end, const std::string& mode, Shape* out_shape,
               std::vector<int64_t>* from) {
  out_shape->clear();
  int64_t n = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    out_shape->push_back(shape[k] + begin[k] + end[k]);
    n *= out_shape->back();
  }
  const Shape os = strides_of(*out_shape), is = strides_of(shape);
  from->assign(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < shape.size() && (*from)[i] >= 0; ++k) {
      int64_t s = source_index(i / os[k] % (*out_shape)[k], shape[k], begin[k], end[k], mode);
      (*from)[i] = s < 0 ? -1 : (*from)[i] + s * is[k];
    }
  }
}

/// Expects out element i to equal src element from[i], or `fill` (one element's bytes) at -1.
void expect_padded(const Tensor& out, const Tensor& src, const std::vector<int64_t>& from, const unsigned char* fill,
                   const std::string& what) {
  ASSERT_EQ(out.numel(), static_cast<int64_t>(from.size())) << what;
  const size_t es = dtype_size(src.dtype);
  for (size_t i = 0; i < from.size(); ++i) {
    const unsigned char* want = from[i] < 0 ? fill : src.bytes.data() + from[i] * es;
    ASSERT_EQ(std::memcmp(out.bytes.data() + i * es, want, es), 0)
        << what << ": element " << i << " should be " << (from[i] < 0 ? "the constant" : "input element ")
        << (from[i] < 0 ? "" : std::to_string(from[i]));
  }
}

std::vector<float> pad_f32(const std::vector<Tensor>& inputs, const core::AttrStore& attrs = core::AttrStore()) {
  OpResult r = run_op("Pad", inputs, attrs);
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  return r.outputs.empty() ? std::vector<float>{} : r.outputs[0].values<float>();
}

TEST(Pad, HandComputed1d) {
  using V = std::vector<float>;
  Tensor x = make_tensor<float>({3}, {1, 2, 3});
  EXPECT_EQ(pad_f32({x, i64s({2, 1})}), (V{0, 0, 1, 2, 3, 0}));
  EXPECT_EQ(pad_f32({x, i64s({2, 1}), make_tensor<float>({}, {9})}), (V{9, 9, 1, 2, 3, 9}));
  EXPECT_EQ(pad_f32({x, i64s({2, 1}), make_tensor<float>({1}, {-1})}), (V{-1, -1, 1, 2, 3, -1}));
  EXPECT_EQ(pad_f32({x, i64s({2, 1})}, mode_attr("edge")), (V{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(pad_f32({x, i64s({2, 2})}, mode_attr("reflect")), (V{3, 2, 1, 2, 3, 2, 1}));
  // Pads wider than the input keep reflecting (numpy.pad): period 4 = 2 * (3 - 1).
  EXPECT_EQ(pad_f32({x, i64s({5, 5})}, mode_attr("reflect")), (V{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(pad_f32({make_tensor<float>({1}, {7}), i64s({2, 1})}, mode_attr("reflect")), (V{7, 7, 7, 7}));
  // Negative pads crop, and the padding then copies from the kept window.
  Tensor y = make_tensor<float>({5}, {1, 2, 3, 4, 5});
  EXPECT_EQ(pad_f32({y, i64s({-1, -2})}), (V{2, 3}));
  EXPECT_EQ(pad_f32({y, i64s({-2, 2})}, mode_attr("edge")), (V{3, 4, 5, 5, 5}));
  EXPECT_EQ(pad_f32({y, i64s({2, -3})}, mode_attr("reflect")), (V{1, 2, 1, 2}));  // reflects the kept [1, 2]
  EXPECT_EQ(pad_f32({y, i64s({-5, 2})}), (V{0, 0}));
}

// Values of ONNX Runtime 1.31 (opset 19, mode wrap), which agree with numpy.pad(mode='wrap')
// on the kept window.
TEST(Pad, HandComputedWrap) {
  using V = std::vector<float>;
  Tensor x = make_tensor<float>({3}, {1, 2, 3});
  const core::AttrStore wrap = mode_attr("wrap");
  EXPECT_EQ(pad_f32({x, i64s({2, 2})}, wrap), (V{2, 3, 1, 2, 3, 1, 2}));
  EXPECT_EQ(pad_f32({x, i64s({0, 0})}, wrap), (V{1, 2, 3}));
  // Pads wider than the axis keep wrapping.
  EXPECT_EQ(pad_f32({x, i64s({5, 7})}, wrap), (V{2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(pad_f32({x, i64s({7, 1})}, wrap), (V{3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(pad_f32({x, i64s({8, 0})}, wrap), (V{2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3}));
  // A crop on one side, then the kept window repeats on the other.
  EXPECT_EQ(pad_f32({x, i64s({-1, 4})}, wrap), (V{2, 3, 2, 3, 2, 3}));
  EXPECT_EQ(pad_f32({x, i64s({4, -1})}, wrap), (V{1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(pad_f32({x, i64s({3, -2})}, wrap), (V{1, 1, 1, 1}));
  EXPECT_EQ(pad_f32({x, i64s({-2, 5})}, wrap), (V{3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(pad_f32({x, i64s({-1, -1})}, wrap), (V{2}));
  EXPECT_EQ(pad_f32({make_tensor<float>({1}, {7}), i64s({2, 3})}, wrap), (V{7, 7, 7, 7, 7, 7}));
  // 2-D: rows and columns wrap independently.
  Tensor m = make_tensor<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(pad_f32({m, i64s({3, 4, 1, 2})}, wrap),
            (V{5, 3, 4, 5, 3, 4, 5, 3, 4, 2, 0, 1, 2, 0, 1, 2, 0, 1, 5, 3, 4, 5, 3, 4, 5, 3, 4,
               2, 0, 1, 2, 0, 1, 2, 0, 1, 5, 3, 4, 5, 3, 4, 5, 3, 4, 2, 0, 1, 2, 0, 1, 2, 0, 1}));
  EXPECT_EQ(pad_f32({m, i64s({-1, 4, 2, -2})}, wrap), V(15, 3));
  EXPECT_EQ(pad_f32({m, i64s({0, -1, 0, -1})}, wrap), (V{1, 4}));
  // The ONNX example 4: pads [2, 1, 1, 1] on a [3, 2] input.
  Tensor e = make_tensor<float>({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  EXPECT_EQ(pad_f32({e, i64s({2, 1, 1, 1})}, wrap),
            (V{3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f,
               3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f}));
  // Opset 18 axes, integer and bool elements.
  OpResult r = run_op("Pad", {make_tensor<int64_t>({2, 2}, {1, 2, 3, 4}), i64s({1, 2}), absent(), i64s({-1})}, wrap);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 5}));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{2, 1, 2, 1, 2, 4, 3, 4, 3, 4}));
  r = run_op("Pad", {make_tensor<bool>({2}, {true, false}), i64s({1, 0})}, wrap);
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{0, 1, 0}));
}

// A 0 extent: an axis with nothing in its kept window may not grow in edge, reflect or wrap
// mode (numpy.pad refuses it too), but may stay empty or be cropped to nothing while other
// axes grow; constant padding may grow it.
TEST(Pad, EmptyExtents) {
  Tensor x = make_tensor<float>({0, 3}, {});
  for (const char* mode : {"constant", "edge", "reflect", "wrap"}) {
    OpResult r = run_op("Pad", {x, i64s({0, 2, 0, 1})}, mode_attr(mode));
    ASSERT_TRUE(r.status.ok()) << mode << ": " << r.status.message();
    EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk) << mode;
    EXPECT_EQ(r.outputs[0].shape, (Shape{0, 6})) << mode;
    r = run_op("Pad", {make_tensor<float>({2, 3}, std::vector<float>(6, 1)), i64s({0, -3, 0, 0})}, mode_attr(mode));
    ASSERT_TRUE(r.status.ok()) << mode << ": " << r.status.message();
    EXPECT_EQ(r.outputs[0].shape, (Shape{2, 0})) << mode;
  }
  OpResult r = run_op("Pad", {x, i64s({1, 1, 0, 0})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{1, 4}));
  EXPECT_EQ(r.outputs[0].values<float>(), std::vector<float>(4, 0));
  EXPECT_TRUE(has_text(run_op("Pad", {x, i64s({1, 0, 0, 0})}, mode_attr("wrap")).status,
                       "node 'test' (Pad): size 0 must be at least 1 for wrap padding to have an element to copy "
                       "on axis 0 of [0, 3] padded by 1 and 0"));
  // The kernel refuses it too (bind would have caught it), writing nothing.
  std::vector<Tensor> out(1);
  out[0].shape = {1, 3};
  EXPECT_EQ(run_kernel("Pad", {x, i64s({1, 0, 0, 0})}, &out, mode_attr("wrap")), kernels::KernelStatus::kInvalidValue);
  EXPECT_EQ(out[0].bytes, std::vector<unsigned char>(12, 0xCD));
}

TEST(Pad, HandComputedOnnxExamples) {
  using V = std::vector<float>;
  Tensor x = make_tensor<float>({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  Tensor pads = i64s({0, 2, 0, 0});
  EXPECT_EQ(pad_f32({x, pads}), (V{0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f}));
  EXPECT_EQ(pad_f32({x, pads}, mode_attr("reflect")),
            (V{1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f}));
  EXPECT_EQ(pad_f32({x, pads}, mode_attr("edge")),
            (V{1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f}));
  // Before opset 11: attributes pads and value.
  core::AttrStore a;
  a.set_ints("pads", {1, 0, 0, 1}).set_float("value", 1.5f);
  OpResult r = run_op("Pad", {x}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{4, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (V{1.5f, 1.5f, 1.5f, 1.0f, 1.2f, 1.5f, 2.3f, 3.4f, 1.5f, 4.5f, 5.7f, 1.5f}));
  // Opset 18: pads apply to the listed axes only; constant_value may be omitted.
  r = run_op("Pad", {x, i64s({1, 1}), absent(), i64s({-1})}, mode_attr("edge"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{3, 4}));
  EXPECT_EQ(r.outputs[0].values<float>(), (V{1.0f, 1.0f, 1.2f, 1.2f, 2.3f, 2.3f, 3.4f, 3.4f, 4.5f, 4.5f, 5.7f, 5.7f}));
}

TEST(Pad, IntegerBoolAndScalar) {
  Tensor xi = make_tensor<int64_t>({2}, {5, 6});
  OpResult r = run_op("Pad", {xi, i64s({1, 1}), make_tensor<int64_t>({}, {-7})});
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{-7, 5, 6, -7}));
  r = run_op("Pad", {xi}, core::AttrStore().set_ints("pads", {0, 2}).set_float("value", 3));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{5, 6, 3, 3}));
  r = run_op("Pad", {make_tensor<int32_t>({2}, {1, 2}), make_tensor<int32_t>({2}, {1, 0})}, mode_attr("reflect"));
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{2, 1, 2}));
  r = run_op("Pad", {make_tensor<bool>({1}, {true}), i64s({1, 1})});
  EXPECT_EQ(r.outputs[0].bytes, (std::vector<unsigned char>{0, 1, 0}));
  r = run_op("Pad", {make_tensor<float>({}, {4}), i64s({})});  // a scalar has nothing to pad
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, Shape{});
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4}));
}

TEST(Pad, RandomSweep) {
  std::mt19937 rng(1107);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  const char* modes[] = {"constant", "edge", "reflect", "wrap"};
  for (int iter = 0; iter < 400; ++iter) {
    const std::string mode = modes[iter % 4];
    const int rank = static_cast<int>(rng() % 5);
    Shape shape = random_shape(rng, rank, 5);
    Tensor x = random_tensor(rng, dtypes[iter / 4 % 4], shape);
    Shape begin(rank), end(rank);
    for (int k = 0; k < rank; ++k) {
      // Pads in [-d, 4] (in [-d, 12] for wrap, wider than the axis); crops that leave
      // nothing to copy from are made positive.
      const int64_t d = shape[k], most = mode == "wrap" ? 12 : 4;
      do {
        begin[k] = static_cast<int64_t>(rng() % (d + most + 1)) - d;
        end[k] = static_cast<int64_t>(rng() % (d + most + 1)) - d;
      } while (d + begin[k] + end[k] < 0 ||
               (mode != "constant" && (begin[k] > 0 || end[k] > 0) &&
                d + std::min<int64_t>(begin[k], 0) + std::min<int64_t>(end[k], 0) < 1));
    }
    // Half the cases pad every axis, half list some axes (opset 18).
    std::vector<Tensor> inputs = {x};
    Shape pads = begin;
    pads.insert(pads.end(), end.begin(), end.end());
    Tensor value = random_tensor(rng, x.dtype, {});
    const bool with_value = mode == "constant" && rng() % 2;
    const bool with_axes = rank > 0 && rng() % 2;
    if (with_axes) {
      Shape axes, listed;
      for (int k = 0; k < rank; ++k)
        if (begin[k] != 0 || end[k] != 0 || rng() % 2) axes.push_back(rng() % 2 ? k : k - rank);
      for (int64_t a : axes) listed.push_back(begin[a < 0 ? a + rank : a]);
      for (int64_t a : axes) listed.push_back(end[a < 0 ? a + rank : a]);
      inputs = {x, i64s(listed), with_value ? value : absent(), i64s(axes)};
    } else {
      inputs.push_back(i64s(pads));
      if (with_value) inputs.push_back(value);
    }
    const std::string what = "iter " + std::to_string(iter) + " " + mode;
    SlotRun s = run_op_in_slots("Pad", inputs, mode_attr(mode.c_str()));
    ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk) << what;
    Shape want;
    std::vector<int64_t> from;
    reference(shape, begin, end, mode, &want, &from);
    ASSERT_EQ(s.exact.outputs[0].shape, want) << what;
    unsigned char zero[8] = {};
    expect_padded(s.exact.outputs[0], x, from, with_value ? value.bytes.data() : zero, what);
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk) << what;
    EXPECT_TRUE(s.tails_intact) << what;
    EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << what;
  }
}

TEST(Pad, Errors) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 0));
  auto status = [&](std::vector<Tensor> in, const core::AttrStore& a = core::AttrStore()) {
    return run_op("Pad", in, a).status;
  };
  EXPECT_TRUE(has_text(status({x, i64s({0, 1, 0, 1})}, mode_attr("symmetric")),
                       "node 'test' (Pad): mode 'symmetric' is not supported; expected constant, edge, reflect or wrap"));
  EXPECT_TRUE(has_text(status({x, i64s({1, 1})}), "pads has 2 values, expected 2 per padded axis (4)"));
  EXPECT_TRUE(has_text(status({x, i64s({1, 1, 1, 1}), absent(), i64s({1, -1})}), "axis -1 is listed twice in axes"));
  EXPECT_TRUE(has_text(status({x, i64s({1, 1}), absent(), i64s({2})}), "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(status({x, i64s({0, 0, 0, 0}), make_tensor<int64_t>({}, {1})}),
                       "constant_value (input #2) has dtype i64, expected f32 like input #0"));
  EXPECT_TRUE(has_text(status({x, i64s({0, 0, 0, 0}), make_tensor<float>({2}, {1, 2})}),
                       "constant_value (input #2) must be a scalar, got shape [2]"));
  EXPECT_TRUE(has_text(status({x, make_tensor<float>({4}, {0, 0, 0, 0})}), "input #1 has dtype f32, expected i64"));
  EXPECT_TRUE(has_text(status({x, i64s({-2, 0, -1, 0})}),
                       "size -1 must be at least 0 on axis 0 of [2, 3] padded by -2 and -1"));
  EXPECT_TRUE(has_text(status({x, i64s({0, -3, 0, 1})}, mode_attr("edge")),
                       "size 0 must be at least 1 for edge padding to have an element to copy on axis 1"));
  EXPECT_TRUE(has_text(status({x, i64s({0, 5, 0, -3})}, mode_attr("wrap")),
                       "size 0 must be at least 1 for wrap padding to have an element to copy on axis 1"));
  EXPECT_TRUE(has_text(status({x, i64s({0, int64_t{1} << 50, 0, 0})}), "pad 1125899906842624 is out of range"));
  EXPECT_TRUE(has_text(status({make_tensor<float>({}, {1}), i64s({1, 1}), absent(), i64s({0})}),
                       "cannot pad a scalar (rank 0) along an axis"));
  EXPECT_TRUE(has_text(status({x}), "needs pads (attribute before opset 11, input #1 from opset 11)"));
  EXPECT_TRUE(has_text(status({x, i64s({0}), x, x, x}), "expects 2 to 4 inputs, got 5"));
  SymPool s;
  EXPECT_TRUE(has_text(infer(s.pool, "Pad", {sym_input(DType::kF32, {s.batch}), sym_input(DType::kI64, {s.c(2)})})
                           .status,
                       "pads input #1 must be a constant or computed from shapes"));
}

/// A pool with the image Dims of the symbolic tests.
struct ImagePool {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 64, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 64, 1}));
  ExprId c(int64_t v) { return pool.constant(v); }
};

TEST(PadSymbolic, ReadableShapesAndGuards) {
  ImagePool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.c(3), s.h, s.w});
  auto shape = [&](const Shape& pads, const char* mode, const std::string& want_guards = "") {
    Tensor held = i64s(pads);
    SymResult r = infer(p, "Pad", {x, const_input(p, held)}, mode_attr(mode));
    EXPECT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(guards_text(p, r), want_guards) << r.shape;
    return r.shape;
  };
  EXPECT_EQ(shape({0, 0, 1, 1, 0, 0, 1, 1}, "constant"), "[batch, 3, H + 2, W + 2]");
  EXPECT_EQ(shape({0, 0, 3, 0, 0, 0, 0, 2}, "reflect"), "[batch, 3, H + 3, W + 2]");
  EXPECT_EQ(shape({0, 0, -1, 0, 0, 0, -1, 0}, "constant", "H - 2 >= 0"), "[batch, 3, H - 2, W]");
  EXPECT_EQ(shape({0, 0, 0, -1, 0, 0, 0, 2}, "edge", "W - 1 >= 1"), "[batch, 3, H, W + 1]");
  EXPECT_EQ(shape({0, 0, 70, -2, 0, 0, 0, 9}, "wrap", "W - 2 >= 1"), "[batch, 3, H + 70, W + 7]");

  // Pads computed from shapes: round H and W up to a multiple of 32 (pads >= 0 always).
  ExprId ph = p.sub(p.mul(p.ceildiv(s.h, s.c(32)), s.c(32)), s.h);
  ExprId pw = p.sub(p.mul(p.ceildiv(s.w, s.c(32)), s.c(32)), s.w);
  SymResult r = infer(p, "Pad", {x, sym_values_input(p, {s.c(0), s.c(0), s.c(0), s.c(0), s.c(0), s.c(0), ph, pw})},
                      mode_attr("edge"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, 32*ceildiv(H,32), 32*ceildiv(W,32)]");
  EXPECT_TRUE(r.guards.empty()) << guards_text(p, r);
  // A crop computed from shapes, then edge padding: the kept window, empty for H <= 2, is
  // guarded.
  ExprId crop = p.sub(s.c(-1), p.floordiv(s.h, s.c(2)));
  r = infer(p, "Pad", {x, sym_values_input(p, {s.c(0), s.c(0), s.c(1), s.c(0), s.c(0), s.c(0), crop, s.c(0)})},
            mode_attr("edge"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 3, H - floordiv(H,2), W]");
  EXPECT_EQ(guards_text(p, r), "H - floordiv(H,2) - 1 >= 1");
}

// The bug class that hides at the bound: the symbolic size and the kernel must both follow
// the actual dims. Pads (some symbolic) on [H, W], evaluated and run at many dim values.
TEST(PadSymbolic, MatchesKernelBelowTheBound) {
  std::mt19937 rng(77);
  const char* modes[] = {"constant", "edge", "reflect", "wrap"};
  for (int iter = 0; iter < 80; ++iter) {
    ImagePool s;
    core::ExprPool& p = s.pool;
    const std::string mode = modes[iter % 4];
    // begin_h, begin_w, end_h, end_w: small constants, or (-d) % 8, the distance to the
    // next multiple of 8.
    std::vector<ExprId> pads;
    for (int j = 0; j < 4; ++j) {
      ExprId d = j % 2 ? s.w : s.h;
      if (rng() % 3 == 0) pads.push_back(p.mod(p.sub(s.c(0), d), s.c(8)));
      else pads.push_back(s.c(static_cast<int64_t>(rng() % 4)));
    }
    SymResult r = infer(p, "Pad", {sym_input(DType::kF32, {s.h, s.w}), sym_values_input(p, pads)},
                        mode_attr(mode.c_str()));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    ASSERT_TRUE(r.guards.empty()) << guards_text(p, r);
    for (Shape dims : {Shape{1, 1}, Shape{2, 3}, Shape{5, 1}, Shape{9, 17}, Shape{64, 64}}) {
      const std::vector<int64_t> values = eval_all(p, {1, dims[0], dims[1]});
      Shape pv;
      for (ExprId e : pads) pv.push_back(values[e]);
      Shape want;
      std::vector<int64_t> from;
      reference(dims, {pv[0], pv[1]}, {pv[2], pv[3]}, mode, &want, &from);
      const std::string what = "iter " + std::to_string(iter) + " " + mode + " " + r.shape + " at [" +
                               std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + "]";
      ASSERT_EQ(eval_shape(p, r.outputs[0].shape, {1, dims[0], dims[1]}), want) << what;
      Tensor x = random_f32(rng, dims);
      std::vector<Tensor> out(1);
      out[0].shape = want;
      ASSERT_EQ(run_kernel("Pad", {x, i64s(pv)}, &out, mode_attr(mode.c_str())), kernels::KernelStatus::kOk) << what;
      unsigned char zero[4] = {};
      expect_padded(out[0], x, from, zero, what);
    }
  }
}

TEST(Pad, KernelRejectsInconsistentShapes) {
  Tensor x = make_tensor<float>({3}, {1, 2, 3});
  std::vector<Tensor> out(1);
  out[0].shape = {5};  // pads say 3 + 1 + 2 = 6
  EXPECT_EQ(run_kernel("Pad", {x, i64s({1, 2})}, &out), kernels::KernelStatus::kInvalidValue);
  out[0].shape = {2};  // edge needs an element to copy; crop -3 leaves none
  EXPECT_EQ(run_kernel("Pad", {x, i64s({-3, 2})}, &out, mode_attr("edge")), kernels::KernelStatus::kInvalidValue);
}

}  // namespace
}  // namespace kiln::testing
