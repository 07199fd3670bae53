// Mod: the ONNX examples, a seeded broadcast sweep of both sign conventions against
// floor/trunc arithmetic written here, folding of known values (constants as the kernel
// computes them, and the padding arithmetic `(k - H % k) % k` over a Dim), and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore fmod_attr(int64_t f) { return core::AttrStore().set_int("fmod", f); }

size_t count(const V& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return static_cast<size_t>(n);
}

TEST(Mod, OnnxExamples) {
  const V x = {-4, 7, 5, 4, -7, 8}, y = {2, -3, 8, -2, 3, 5};
  OpResult r = run_op("Mod", {make_tensor<int64_t>({6}, x), make_tensor<int64_t>({6}, y)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{0, -2, 5, 0, 2, 3}));  // the divisor's sign
  r = run_op("Mod", {make_tensor<int64_t>({6}, x), make_tensor<int64_t>({6}, y)}, fmod_attr(1));
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (V{0, 1, 5, 0, -1, 3}));  // the dividend's sign
  r = run_op("Mod", {make_tensor<int32_t>({3}, {-4, 7, 5}), make_tensor<int32_t>({1}, {3})});
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{2, 1, 2}));
  r = run_op("Mod", {make_tensor<float>({6}, {-4.3f, 7.2f, 5.f, 4.3f, -7.2f, 8.f}),
                     make_tensor<float>({6}, {2.1f, -3.4f, 8.f, -2.1f, 3.4f, 5.f})},
             fmod_attr(1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  const std::vector<float> want = {-0.1f, 0.4f, 5.f, 0.1f, -0.4f, 3.f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.outputs[0].values<float>()[i], want[i], 1e-5) << i;
  // The lowest value modulo -1 is 0 (C's % would trap).
  r = run_op("Mod", {make_tensor<int32_t>({1}, {std::numeric_limits<int32_t>::min()}), make_tensor<int32_t>({1}, {-1})});
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{0}));
}

TEST(Mod, RandomBroadcastSweep) {
  std::mt19937 rng(4242);
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = static_cast<int>(rng() % 4);
    const V out = random_shape(rng, rank, 4);
    const V sa = broadcastable_shape(rng, out), sb = broadcastable_shape(rng, out);
    const int64_t fmod = iter % 2;
    const bool f32 = iter % 3 == 0 && fmod == 1;
    Tensor a, b;
    if (f32) {
      a = random_f32(rng, sa, -20.f, 20.f);
      b = random_f32(rng, sb, 0.25f, 6.f);
      for (int64_t i = 0; i < b.numel(); ++i)
        if (rng() % 2) b.data<float>()[i] *= -1.f;
    } else {
      std::vector<int64_t> va(count(sa)), vb(count(sb));
      for (auto& v : va) v = static_cast<int64_t>(rng() % 41) - 20;
      for (auto& v : vb) v = (1 + static_cast<int64_t>(rng() % 7)) * (rng() % 2 ? 1 : -1);
      a = make_tensor<int64_t>(sa, va);
      b = make_tensor<int64_t>(sb, vb);
      EXPECT_TRUE(fold_matches_kernel("Mod", {a, b}, fmod_attr(fmod))) << "iter " << iter;
    }
    OpResult r = run_op("Mod", {a, b}, fmod_attr(fmod));
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    const V want_shape = broadcast_shape({&sa, &sb});
    ASSERT_EQ(r.outputs[0].shape, want_shape);
    for (int64_t e = 0; e < r.outputs[0].numel(); ++e) {
      const double x = a.at(broadcast_source(want_shape, sa, e)), y = b.at(broadcast_source(want_shape, sb, e));
      const double q = x / y;
      const double want = x - y * (fmod ? std::trunc(q) : std::floor(q));
      ASSERT_NEAR(r.outputs[0].at(e), want, 1e-4) << "iter " << iter << " " << x << " mod " << y;
    }
  }
}

TEST(ModSymbolic, PaddingToAMultipleFolds) {
  // Swin-style padding: pad = (7 - H % 7) % 7, padded size H + pad.
  core::ExprPool p;
  ExprId h = p.dim(p.add_dim({"H", 1, 64, 1}));
  Tensor seven = make_tensor<int64_t>({1}, {7});
  SymResult m = infer(p, "Mod", {sym_values_input(p, {h}), const_input(p, seven)});
  ASSERT_TRUE(m.status.ok()) << m.status.message();
  EXPECT_EQ(values_of(p, m), "[H % 7]");
  SymResult d = infer(p, "Sub", {const_input(p, seven), m.outputs[0]});
  SymResult pad = infer(p, "Mod", {d.outputs[0], const_input(p, seven)});
  ASSERT_EQ(pad.outputs[0].sym_values.size(), 1u);
  SymResult total = infer(p, "Add", {sym_values_input(p, {h}), pad.outputs[0]});
  ASSERT_EQ(total.outputs[0].sym_values.size(), 1u);
  for (int64_t hv = 1; hv <= 64; ++hv) {
    std::vector<int64_t> ev = eval_all(p, {hv});
    EXPECT_EQ(ev[pad.outputs[0].sym_values[0]], (7 - hv % 7) % 7) << hv;
    EXPECT_EQ(ev[total.outputs[0].sym_values[0]] % 7, 0) << hv;
  }
  // fmod=1 folds only when the dividend cannot be negative.
  EXPECT_EQ(values_of(p, infer(p, "Mod", {sym_values_input(p, {h}), const_input(p, seven)}, fmod_attr(1))), "[H % 7]");
  ExprId neg = p.sub(p.constant(3), h);
  EXPECT_EQ(values_of(p, infer(p, "Mod", {sym_values_input(p, {neg}), const_input(p, seven)}, fmod_attr(1))), "[]");
  EXPECT_NE(values_of(p, infer(p, "Mod", {sym_values_input(p, {neg}), const_input(p, seven)})), "[]");
}

TEST(Mod, Errors) {
  Tensor f = make_tensor<float>({2}, {1.f, 2.f});
  EXPECT_TRUE(has_text(run_op("Mod", {f, f}).status,
                       "node 'test' (Mod): f32 operands need fmod=1 (ONNX defines fmod=0 for integers only)"));
  Tensor i = make_tensor<int64_t>({2}, {5, 6});
  EXPECT_TRUE(has_text(run_op("Mod", {i, i}, fmod_attr(2)).status, "attribute 'fmod' is 2, expected 0 or 1"));
  EXPECT_TRUE(has_text(run_op("Mod", {i, f}).status, "operands have different dtypes i64 and f32"));
  OpResult z = run_op("Mod", {i, make_tensor<int64_t>({2}, {3, 0})});
  EXPECT_EQ(z.kernel, kernels::KernelStatus::kInvalidValue);  // integer division by zero
}

}  // namespace
}  // namespace kiln::testing
