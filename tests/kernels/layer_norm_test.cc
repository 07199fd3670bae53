// LayerNormalization: hand cases with all three outputs, a seeded sweep over ranks, axes,
// broadcast Scale/B and output counts against a double reference, errors, and symbolic
// shapes run below the bound.
#include <gtest/gtest.h>

#include <cmath>

#include "guard_text_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

/// Element j of the normalized block `block` read from `t`, broadcast with trailing alignment.
double block_at(const Tensor& t, const std::vector<int64_t>& block, int64_t j) {
  std::vector<int64_t> coord(block.size());
  for (int k = static_cast<int>(block.size()) - 1; k >= 0; --k) {
    coord[k] = j % block[k];
    j /= block[k];
  }
  int64_t idx = 0;
  size_t lead = block.size() - t.shape.size();
  for (size_t k = 0; k < t.shape.size(); ++k) idx = idx * t.shape[k] + (t.shape[k] == 1 ? 0 : coord[lead + k]);
  return t.at(idx);
}

struct Expected {
  std::vector<double> y, mean, inv;
};

Expected reference(const Tensor& x, int64_t axis, const Tensor& scale, const Tensor* b, double eps) {
  if (axis < 0) axis += static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> block(x.shape.begin() + axis, x.shape.end());
  int64_t inner = 1;
  for (int64_t d : block) inner *= d;
  Expected e;
  for (int64_t o = 0; o < x.numel() / inner; ++o) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < inner; ++j) mean += x.at(o * inner + j);
    mean /= inner;
    for (int64_t j = 0; j < inner; ++j) var += std::pow(x.at(o * inner + j) - mean, 2);
    double inv = 1 / std::sqrt(var / inner + eps);
    e.mean.push_back(mean);
    e.inv.push_back(inv);
    for (int64_t j = 0; j < inner; ++j)
      e.y.push_back((x.at(o * inner + j) - mean) * inv * block_at(scale, block, j) + (b ? block_at(*b, block, j) : 0));
  }
  return e;
}

void expect_near(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(t.at(i), want[i], 2e-5 * (1 + std::abs(want[i]))) << what << " at " << i;
}

TEST(LayerNorm, HandComputed) {
  // Row [1, 3]: mean 2, var 1, eps 3 -> normalized [-0.5, 0.5]; row [5, 5] normalizes to 0.
  Tensor x = make_tensor<float>({2, 2}, {1, 3, 5, 5});
  Tensor scale = make_tensor<float>({2}, {1, 2}), b = make_tensor<float>({2}, {0, 1});
  OpResult r = run_op("LayerNormalization", {x, scale, b}, AttrStore().set_float("epsilon", 3.f), 3);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{-0.5f, 2, 0, 1}));
  EXPECT_EQ(r.outputs[1].shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r.outputs[1].values<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(r.outputs[2].shape, (std::vector<int64_t>{2, 1}));
  EXPECT_NEAR(r.outputs[2].values<float>()[0], 0.5, 1e-7);
  EXPECT_NEAR(r.outputs[2].values<float>()[1], 1 / std::sqrt(3.0), 1e-7);

  // axis 0 on [2, 2] normalizes everything; no bias; Scale [2] broadcasts over the rows.
  r = run_op("LayerNormalization", {make_tensor<float>({2, 2}, {0, 1, 2, 3}), make_tensor<float>({2}, {2, 1})},
             AttrStore().set_int("axis", 0).set_float("epsilon", 0.f), 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[1].shape, (std::vector<int64_t>{1, 1}));
  const double s = 1 / std::sqrt(1.25);
  expect_near(r.outputs[0], {-1.5 * s * 2, -0.5 * s, 0.5 * s * 2, 1.5 * s}, "axis 0");
}

TEST(LayerNorm, RandomSweepAgainstReference) {
  std::mt19937 rng(1703);
  for (int iter = 0; iter < 250; ++iter) {
    int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> shape = random_shape(rng, rank, rank > 2 ? 5 : 9);
    int64_t axis = static_cast<int64_t>(rng() % rank) - (rng() % 2 ? rank : 0);
    int64_t first = axis < 0 ? axis + rank : axis;
    // Scale/B: the normalized shape, some leading axes dropped, some axes set to 1.
    auto affine_shape = [&]() {
      std::vector<int64_t> s(shape.begin() + first + static_cast<int64_t>(rng() % (rank - first)), shape.end());
      if (s.empty()) s.push_back(1);
      for (int64_t& d : s)
        if (rng() % 4 == 0) d = 1;
      return s;
    };
    Tensor x = random_f32(rng, shape, -2, 4);
    Tensor scale = random_f32(rng, affine_shape(), -2, 2), b = random_f32(rng, affine_shape());
    bool with_bias = rng() % 3 != 0;
    size_t outputs = 1 + rng() % 3;
    AttrStore a;
    if (axis != -1 || rng() % 2) a.set_int("axis", axis);
    float eps = 1e-5f;
    if (rng() % 2) a.set_float("epsilon", eps = std::uniform_real_distribution<float>(1e-6f, 0.5f)(rng));
    std::vector<Tensor> inputs = {x, scale};
    if (with_bias) inputs.push_back(b);
    OpResult r = run_op("LayerNormalization", inputs, a, outputs);
    std::string what = "iter " + std::to_string(iter);
    ASSERT_TRUE(r.status.ok()) << what << ": " << r.status.message();
    ASSERT_EQ(r.outputs[0].shape, shape) << what;
    Expected e = reference(x, axis, scale, with_bias ? &b : nullptr, eps);
    expect_near(r.outputs[0], e.y, what + " Y");
    if (outputs > 1) expect_near(r.outputs[1], e.mean, what + " Mean");
    if (outputs > 2) expect_near(r.outputs[2], e.inv, what + " InvStdDev");
  }
}

TEST(LayerNorm, Errors) {
  Tensor x = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor s3 = make_tensor<float>({3}, {1, 1, 1});
  auto status = [](const std::vector<Tensor>& in, const AttrStore& a = AttrStore(), size_t outputs = 1) {
    return run_op("LayerNormalization", in, a, outputs).status;
  };
  EXPECT_TRUE(has_text(status({x, make_tensor<float>({2}, {1, 1})}),
                       "node 'test' (LayerNormalization): sizes 2 and 3 must be equal (Scale [2] must broadcast onto "
                       "the normalized shape [3] of X [2, 3])"));
  EXPECT_TRUE(has_text(status({x, s3, make_tensor<float>({2, 3}, {1, 1, 1, 1, 1, 1})}),
                       "B [2, 3] has more axes than the normalized shape [3] of X [2, 3]"));
  EXPECT_TRUE(has_text(status({x, s3}, AttrStore().set_int("axis", 2)), "axis 2 is out of range for rank 2"));
  EXPECT_TRUE(has_text(status({x, s3}, AttrStore(), 4), "asks for 4 outputs; expected 1 to 3 (Y, Mean, InvStdDev)"));
  EXPECT_TRUE(has_text(status({x}), "expects 2 to 3 inputs, got 1"));
  EXPECT_TRUE(has_text(status({make_tensor<float>({}, {1}), make_tensor<float>({}, {1})}),
                       "input X must have rank >= 1, got a scalar"));
}

TEST(LayerNormSymbolic, ShapesAndRunsBelowTheBound) {
  SymPool sp;
  core::ExprPool& p = sp.pool;
  ExprId hidden = p.dim(p.add_dim({"D", 1, 64, 1}));
  std::vector<std::vector<ExprId>> last;  // output shapes of the latest call
  auto shapes = [&](std::vector<ExprId> x, std::vector<ExprId> scale, int64_t axis, std::string* guards) {
    AttrStore a;
    a.set_int("axis", axis);
    kernels::ShapeCtx c(p, a.view());
    c.node_name = "test";
    c.op_type = "LayerNormalization";
    c.inputs = {sym_input(DType::kF32, x), sym_input(DType::kF32, scale)};
    c.outputs.resize(3);
    Status st = kernels::find_op("LayerNormalization")->shape(c);
    EXPECT_TRUE(st.ok()) << st.message();
    SymResult r;
    r.guards = c.guards;
    *guards = guards_text(p, r);
    last = {c.out(0).shape, c.out(1).shape, c.out(2).shape};
    return std::vector<std::string>{p.shape_to_string(c.out(0).shape), p.shape_to_string(c.out(1).shape),
                                    p.shape_to_string(c.out(2).shape)};
  };
  std::string guards;
  EXPECT_EQ(shapes({sp.batch, sp.seq, sp.c(64)}, {sp.c(64)}, -1, &guards),
            (std::vector<std::string>{"[batch, seq, 64]", "[batch, seq, 1]", "[batch, seq, 1]"}));
  EXPECT_EQ(guards, "");
  EXPECT_EQ(shapes({sp.batch, sp.seq, hidden}, {sp.c(64)}, 1, &guards),
            (std::vector<std::string>{"[batch, seq, D]", "[batch, 1, 1]", "[batch, 1, 1]"}));
  EXPECT_EQ(guards, "64 == D");

  // [batch, seq, 16] normalized over the last axis, run at sizes far below the bound.
  shapes({sp.batch, sp.seq, sp.c(16)}, {sp.c(16)}, -1, &guards);
  std::mt19937 rng(5);
  Tensor scale = random_f32(rng, {16}), b = random_f32(rng, {16});
  for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1, 1}, {2, 7, 1}, {8, 3, 1}, {1, 100, 1}}) {
    std::vector<Tensor> out(3);
    for (size_t k = 0; k < 3; ++k) out[k].shape = eval_shape(p, last[k], dims);
    Tensor x = random_f32(rng, out[0].shape);
    ASSERT_EQ(run_kernel("LayerNormalization", {x, scale, b}, &out), kernels::KernelStatus::kOk);
    Expected e = reference(x, -1, scale, &b, 1e-5);
    expect_near(out[0], e.y, "Y");
    expect_near(out[1], e.mean, "Mean");
    expect_near(out[2], e.inv, "InvStdDev");
  }
}

}  // namespace
}  // namespace kiln::testing
