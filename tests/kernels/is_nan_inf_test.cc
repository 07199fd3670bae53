// IsNaN and IsInf: hand cases over NaN, both infinities, finite values and signed zeros,
// IsInf's detect_negative / detect_positive attributes, a seeded sweep run in oversized
// slots, errors, and the symbolic shape, evaluated and run far below the bound.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bound_slot_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<bool> run_bool(const char* op, const Tensor& x, const core::AttrStore& attrs = core::AttrStore()) {
  OpResult r = run_op(op, {x}, attrs);
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  if (r.outputs.empty()) return {};
  EXPECT_EQ(r.outputs[0].dtype, DType::kBool);
  EXPECT_EQ(r.outputs[0].shape, x.shape);
  std::vector<bool> v;
  for (int64_t i = 0; i < r.outputs[0].numel(); ++i) {
    EXPECT_LE(r.outputs[0].bytes[i], 1) << op << " at " << i;  // bools are 0 or 1
    v.push_back(r.outputs[0].bytes[i] != 0);
  }
  return v;
}

// NaN, -NaN, +inf, -inf, max float, lowest float, 0, -0, a denormal, 1.
Tensor specials() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return make_tensor<float>({2, 5}, {nan, -nan, kInf, -kInf, std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::lowest(), 0.f, -0.f,
                                     std::numeric_limits<float>::denorm_min(), 1.f});
}

TEST(IsNaNInf, HandComputed) {
  Tensor x = specials();
  EXPECT_EQ(run_bool("IsNaN", x), (std::vector<bool>{1, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(run_bool("IsInf", x), (std::vector<bool>{0, 0, 1, 1, 0, 0, 0, 0, 0, 0}));
  // A signalling NaN is a NaN too.
  Tensor s = make_tensor<float>({1}, {std::numeric_limits<float>::signaling_NaN()});
  EXPECT_EQ(run_bool("IsNaN", s), (std::vector<bool>{1}));
  EXPECT_EQ(run_bool("IsInf", s), (std::vector<bool>{0}));
  // Scalars keep their (empty) shape.
  EXPECT_EQ(run_bool("IsInf", make_tensor<float>({}, {-kInf})), (std::vector<bool>{1}));
}

TEST(IsNaNInf, IsInfAttributes) {
  Tensor x = specials();
  auto attrs = [](int64_t neg, int64_t pos) {
    return core::AttrStore().set_int("detect_negative", neg).set_int("detect_positive", pos);
  };
  EXPECT_EQ(run_bool("IsInf", x, attrs(1, 1)), (std::vector<bool>{0, 0, 1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(run_bool("IsInf", x, attrs(0, 1)), (std::vector<bool>{0, 0, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(run_bool("IsInf", x, attrs(1, 0)), (std::vector<bool>{0, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(run_bool("IsInf", x, attrs(0, 0)), std::vector<bool>(10, false));
  // Either attribute alone keeps the other's default of 1.
  EXPECT_EQ(run_bool("IsInf", x, core::AttrStore().set_int("detect_negative", 0)),
            (std::vector<bool>{0, 0, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(run_bool("IsInf", x, core::AttrStore().set_int("detect_positive", 0)),
            (std::vector<bool>{0, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
}

TEST(IsNaNInf, RandomSweepInSlots) {
  std::mt19937 rng(31);
  const float pool[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, 0.f, -2.5f, 3e38f, -1e-40f};
  for (int iter = 0; iter < 60; ++iter) {
    Tensor x = random_f32(rng, random_shape(rng, 1 + iter % 4, 5), -10.f, 10.f);
    for (int64_t i = 0; i < x.numel(); ++i)
      if (rng() % 3 == 0) x.data<float>()[i] = pool[rng() % std::size(pool)];
    const bool neg = rng() % 2, pos = rng() % 2;
    for (const char* op : {"IsNaN", "IsInf"}) {
      core::AttrStore attrs;
      if (std::string(op) == "IsInf") attrs.set_int("detect_negative", neg).set_int("detect_positive", pos);
      SlotRun s = run_op_in_slots(op, {x}, attrs);
      ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
      EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
      EXPECT_TRUE(s.tails_intact) << op;
      EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << op;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double v = x.at(i);
        const bool want = std::string(op) == "IsNaN" ? v != v : (v == kInf && pos) || (v == -kInf && neg);
        ASSERT_EQ(s.exact.outputs[0].bytes[i], want ? 1 : 0) << op << " at " << i << " value " << v;
      }
    }
  }
}

TEST(IsNaNInf, Errors) {
  for (const char* op : {"IsNaN", "IsInf"}) {
    EXPECT_TRUE(has_text(run_op(op, {make_tensor<int64_t>({2}, {1, 2})}).status,
                         std::string("node 'test' (") + op + "): input #0 has dtype i64, expected f32"));
    Tensor x = make_tensor<float>({1}, {1});
    EXPECT_TRUE(has_text(run_op(op, {x, x}).status, "expects 1 inputs, got 2"));
  }
}

TEST(IsNaNInf, SymbolicShapeRunsFarBelowTheBound) {
  SymPool sp;
  std::mt19937 rng(8);
  for (const char* op : {"IsNaN", "IsInf"}) {
    SymResult r = infer(sp.pool, op, {sym_input(DType::kF32, {sp.batch, sp.c(3), sp.pool.mul(sp.seq, sp.c(2))})});
    ASSERT_TRUE(r.status.ok()) << op << ": " << r.status.message();
    EXPECT_EQ(r.shape, "[batch, 3, 2*seq]");
    EXPECT_EQ(r.outputs[0].dtype, DType::kBool);
    EXPECT_TRUE(r.guards.empty());
    for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1}, {2, 3}, {3, 5}}) {
      std::vector<Tensor> out(1);
      out[0].dtype = DType::kBool;
      out[0].shape = eval_shape(sp.pool, r.outputs[0].shape, dims);
      ASSERT_EQ(out[0].shape, (std::vector<int64_t>{dims[0], 3, 2 * dims[1]}));
      Tensor x = random_f32(rng, out[0].shape);
      for (int64_t i = 0; i < x.numel(); i += 2) x.data<float>()[i] = i % 4 ? -kInf : NAN;
      ASSERT_EQ(run_kernel(op, {x}, &out), kernels::KernelStatus::kOk);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const bool want = std::string(op) == "IsNaN" ? std::isnan(x.data<float>()[i]) : std::isinf(x.data<float>()[i]);
        ASSERT_EQ(out[0].bytes[i], want ? 1 : 0) << op << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::testing
