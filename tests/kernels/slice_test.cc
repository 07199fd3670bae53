// Slice: hand cases, a seeded sweep of random shapes, windows and dtypes against a walk
// written here, errors, and symbolic shapes checked against the kernel below the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using Shape = std::vector<int64_t>;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

/// One slice request in ONNX form.
struct SliceSpec {
  Shape starts, ends, axes, steps;  // empty axes/steps: omitted
};


/// Inputs for the opset >= 10 form.
std::vector<Tensor> slice_inputs(const Tensor& x, const SliceSpec& s) {
  std::vector<Tensor> in = {x, i64s(s.starts), i64s(s.ends)};
  if (!s.axes.empty() || !s.steps.empty()) in.push_back(s.axes.empty() ? absent() : i64s(s.axes));
  if (!s.steps.empty()) in.push_back(i64s(s.steps));
  return in;
}

/// The indices one axis of size d visits, walked one step at a time after ONNX's
/// counting-from-the-end and clamping.
Shape walk(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += d;
  if (end < 0) end += d;
  Shape idx;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    for (int64_t i = start; i < end; i += step) {
      idx.push_back(i);
      if (end - i <= step) break;  // the next step would pass the end (and might overflow)
    }
  } else {
    start = std::clamp<int64_t>(start, 0, d - 1);
    end = std::clamp<int64_t>(end, -1, d - 1);
    for (int64_t i = start; i > end; i += step) {
      idx.push_back(i);
      if (i - end <= -step) break;
    }
  }
  return idx;
}

/// Expected output shape and, per output element, the input element it copies.
void reference(const Shape& shape, const SliceSpec& s, Shape* out_shape, std::vector<int64_t>* from) {
  std::vector<Shape> per_axis(shape.size());
  for (size_t k = 0; k < shape.size(); ++k)
    for (int64_t i = 0; i < shape[k]; ++i) per_axis[k].push_back(i);
  for (size_t j = 0; j < s.starts.size(); ++j) {
    int64_t axis = s.axes.empty() ? static_cast<int64_t>(j) : s.axes[j];
    if (axis < 0) axis += static_cast<int64_t>(shape.size());
    per_axis[axis] = walk(shape[axis], s.starts[j], s.ends[j], s.steps.empty() ? 1 : s.steps[j]);
  }
  out_shape->clear();
  int64_t n = 1;
  for (const Shape& a : per_axis) {
    out_shape->push_back(static_cast<int64_t>(a.size()));
    n *= static_cast<int64_t>(a.size());
  }
  Shape os = strides_of(*out_shape), is = strides_of(shape);
  from->assign(n, 0);
  for (int64_t i = 0; i < n; ++i)
    for (size_t k = 0; k < shape.size(); ++k) (*from)[i] += per_axis[k][i / os[k] % (*out_shape)[k]] * is[k];
}

/// Symbolic input `x` followed by held[1..] as constant (or omitted) inputs.
std::vector<kernels::SymTensor> with_constants(core::ExprPool& p, kernels::SymTensor x,
                                               const std::vector<Tensor>& held) {
  std::vector<kernels::SymTensor> in = {std::move(x)};
  for (size_t i = 1; i < held.size(); ++i) {
    in.push_back(const_input(p, held[i]));
    in.back().present = held[i].present;
  }
  return in;
}

void expect_slice(const Tensor& x, const SliceSpec& s, const std::string& what) {
  OpResult r = run_op("Slice", slice_inputs(x, s));
  ASSERT_TRUE(r.status.ok()) << what << ": " << r.status.message();
  ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk) << what;
  Shape want;
  std::vector<int64_t> from;
  reference(x.shape, s, &want, &from);
  ASSERT_EQ(r.outputs[0].shape, want) << what;
  expect_picked(r.outputs[0], x, from, what);
}

std::vector<int64_t> slice_values(const Tensor& x, const SliceSpec& s) {
  OpResult r = run_op("Slice", slice_inputs(x, s));
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  return r.outputs.empty() ? std::vector<int64_t>{} : r.outputs[0].values<int64_t>();
}

TEST(Slice, HandComputed) {
  Tensor x = make_tensor<int64_t>({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  using V = std::vector<int64_t>;
  EXPECT_EQ(slice_values(x, {{1}, {kMax}, {}, {}}), (V{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(slice_values(x, {{-3}, {kMax}, {}, {}}), (V{7, 8, 9}));
  EXPECT_EQ(slice_values(x, {{0}, {-1}, {0}, {3}}), (V{0, 3, 6}));
  EXPECT_EQ(slice_values(x, {{-1}, {kMin}, {0}, {-1}}), (V{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(slice_values(x, {{8}, {2}, {0}, {-2}}), (V{8, 6, 4}));
  EXPECT_EQ(slice_values(x, {{100}, {kMax}, {}, {}}), (V{}));
  EXPECT_EQ(slice_values(x, {{-100}, {2}, {}, {}}), (V{0, 1}));
  EXPECT_EQ(slice_values(x, {{5}, {3}, {}, {}}), (V{}));
  EXPECT_EQ(slice_values(x, {{-100}, {kMin}, {0}, {-1}}), (V{0}));  // ONNX clamps start to 0

  Tensor m = make_tensor<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  OpResult r = run_op("Slice", slice_inputs(m, {{1, -1}, {kMax, 0}, {1, 0}, {2, -1}}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{9, 11, 5, 7}));

  // Before opset 10: attributes, and the inputs may be i32.
  core::AttrStore a;
  a.set_ints("starts", {1}).set_ints("ends", {3}).set_ints("axes", {1});
  r = run_op("Slice", {m}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  r = run_op("Slice", {m, make_tensor<int32_t>({1}, {2}), make_tensor<int32_t>({1}, {3})});
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{8, 9, 10, 11}));
}

TEST(Slice, RandomSweep) {
  std::mt19937 rng(4242);
  const DType dtypes[] = {DType::kF32, DType::kI64, DType::kI32, DType::kBool};
  for (int iter = 0; iter < 400; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Shape shape = random_shape(rng, rank, 6);
    Tensor x = random_tensor(rng, dtypes[iter % 4], shape);
    Shape axes(rank);
    for (int k = 0; k < rank; ++k) axes[k] = k;
    std::shuffle(axes.begin(), axes.end(), rng);
    axes.resize(1 + rng() % rank);
    SliceSpec s;
    auto index = [&](int64_t d) -> int64_t {
      switch (rng() % 8) {
        case 0: return kMax;
        case 1: return kMin;
        default: return static_cast<int64_t>(rng() % (2 * d + 5)) - d - 2;  // [-d-2, d+2]
      }
    };
    const bool with_steps = iter % 3 != 0;
    for (int64_t a : axes) {
      s.starts.push_back(index(shape[a]));
      s.ends.push_back(index(shape[a]));
      s.axes.push_back(rng() % 2 ? a : a - rank);
      int64_t step = 1 + static_cast<int64_t>(rng() % 3);
      if (rng() % 10 == 0) step = kMax;
      s.steps.push_back(rng() % 2 ? step : -step);
    }
    if (!with_steps) s.steps.clear();
    expect_slice(x, s, "sweep " + std::to_string(iter));
  }
}

TEST(Slice, Errors) {
  Tensor x = make_tensor<float>({2, 3}, std::vector<float>(6, 0));
  auto status = [&](const SliceSpec& s) { return run_op("Slice", slice_inputs(x, s)).status; };
  EXPECT_TRUE(has_text(status({{0}, {1}, {0}, {0}}), "step 0 on axis 0 is not allowed"));
  EXPECT_TRUE(has_text(status({{0, 0}, {1, 1}, {1, -1}, {}}), "axis -1 is listed twice in axes"));
  EXPECT_TRUE(has_text(status({{0, 0}, {1}, {}, {}}), "starts, ends, axes and steps must have one length, got 2, 1"));
  EXPECT_TRUE(has_text(status({{0}, {1}, {2}, {}}), "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(run_op("Slice", {x, i64s({0})}).status, "node 'test' (Slice): expects 3 to 5 inputs, got 2"));
  EXPECT_TRUE(has_text(run_op("Slice", {x}).status, "needs starts and ends"));
  EXPECT_TRUE(has_text(run_op("Slice", {x, make_tensor<float>({1}, {0}), i64s({1})}).status,
                       "input #1 has dtype f32, expected i64"));
  SymPool s;
  auto in = sym_input(DType::kF32, {s.batch, s.seq});
  EXPECT_TRUE(has_text(infer(s.pool, "Slice",
                             {in, sym_values_input(s.pool, {s.c(0)}), sym_values_input(s.pool, {s.c(1)}),
                              sym_input(DType::kI64, {s.c(1)})})
                           .status,
                       "axes input #3 must be a constant"));
  EXPECT_TRUE(
      has_text(infer(s.pool, "Slice",
                     {in, sym_values_input(s.pool, {s.pool.sub(s.seq, s.c(3))}), sym_values_input(s.pool, {s.c(kMax)})})
                   .status,
               "start seq - 3 may be negative or not"));
}

TEST(SliceSymbolic, ReadableShapes) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq});
  auto shape = [&](const SliceSpec& spec) {
    std::vector<Tensor> held = slice_inputs(Tensor(), spec);  // owns the constant data
    SymResult r = infer(p, "Slice", with_constants(p, x, held));
    EXPECT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_TRUE(r.guards.empty());
    return r.shape;
  };
  EXPECT_EQ(shape({{1}, {kMax}, {1}, {}}), "[batch, seq - 1]");
  EXPECT_EQ(shape({{0}, {-1}, {1}, {}}), "[batch, seq - 1]");
  EXPECT_EQ(shape({{-1}, {kMin}, {1}, {-1}}), "[batch, seq]");
  EXPECT_EQ(shape({{-3}, {kMax}, {1}, {}}), "[batch, min(3,seq)]");
  EXPECT_EQ(shape({{0}, {4}, {1}, {}}), "[batch, min(4,seq)]");
  EXPECT_EQ(shape({{5}, {kMax}, {-1}, {}}), "[batch, max(0,seq - 5)]");
  EXPECT_EQ(shape({{0}, {kMax}, {1}, {2}}), "[batch, ceildiv(seq,2)]");
  EXPECT_EQ(shape({{0, 0}, {1, kMax}, {0, 1}, {1, 1}}), "[1, seq]");

  // A start known only symbolically (e.g. from a Shape computation).
  SymResult r = infer(p, "Slice",
                      {x, sym_values_input(p, {p.floordiv(s.seq, s.c(2))}), sym_values_input(p, {s.c(kMax)}),
                       sym_values_input(p, {s.c(1)})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  for (int64_t seq : {1, 2, 7, 512}) EXPECT_EQ(eval_shape(p, r.outputs[0].shape, {1, seq})[1], seq - seq / 2);
}

// The bug class that hides at the bound: the symbolic size and the kernel must both follow
// the actual dims. Random windows on [batch, seq], evaluated and run at many dim values.
TEST(SliceSymbolic, MatchesKernelBelowTheBound) {
  std::mt19937 rng(606);
  for (int iter = 0; iter < 200; ++iter) {
    SymPool s;
    core::ExprPool& p = s.pool;
    auto pick = [&]() -> int64_t {
      const int64_t choices[] = {kMax, kMin, 0, 1, 2, 3, 5, -1, -2, -3, -5, 511, 512, 513, -511, -512, -513};
      return choices[rng() % std::size(choices)];
    };
    SliceSpec spec;
    const int64_t step_choices[] = {1, 2, 3, -1, -2, -3, 600, -600};
    spec.axes = rng() % 3 ? Shape{1} : Shape{0, 1};
    for (size_t j = 0; j < spec.axes.size(); ++j) {
      spec.starts.push_back(pick());
      spec.ends.push_back(pick());
      spec.steps.push_back(step_choices[rng() % std::size(step_choices)]);
    }
    std::vector<Tensor> held = slice_inputs(Tensor(), spec);
    SymResult r = infer(p, "Slice", with_constants(p, sym_input(DType::kI32, {s.batch, s.seq}), held));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    for (Shape dims : {Shape{1, 1}, Shape{2, 2}, Shape{3, 5}, Shape{8, 6}, Shape{1, 17}, Shape{4, 512}}) {
      Tensor x = random_tensor(rng, DType::kI32, dims);
      Shape want;
      std::vector<int64_t> from;
      reference(dims, spec, &want, &from);
      const std::string what = "iter " + std::to_string(iter) + " shape " + r.shape + " at [" +
                               std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + "]";
      ASSERT_EQ(eval_shape(p, r.outputs[0].shape, dims), want) << what;
      std::vector<Tensor> inputs = held, out(1);
      inputs[0] = x;
      out[0].dtype = DType::kI32;
      out[0].shape = want;
      ASSERT_EQ(run_kernel("Slice", inputs, &out), kernels::KernelStatus::kOk) << what;
      expect_picked(out[0], x, from, what);
    }
  }
}

}  // namespace
}  // namespace kiln::testing
