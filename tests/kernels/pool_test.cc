// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool: hand cases, a seeded sweep of
// shapes and attributes against a double N-d reference, errors, and symbolic shapes with
// their guards (run far below the bound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "op_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

std::vector<float> iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

TEST(Pool, HandComputedMax) {
  Tensor x = make_tensor<float>({1, 1, 4, 4}, iota(16));
  OpResult r = run_op("MaxPool", {x}, AttrStore().set_ints("kernel_shape", {2, 2}).set_ints("strides", {2, 2}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{6, 8, 14, 16}));

  // ONNX's maxpool_2d_ceil case: 3x3 windows, stride 2, ceil_mode.
  AttrStore ceil;
  ceil.set_ints("kernel_shape", {3, 3}).set_ints("strides", {2, 2}).set_int("ceil_mode", 1);
  r = run_op("MaxPool", {x}, ceil, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{11, 12, 15, 16}));
  EXPECT_EQ(r.outputs[1].dtype, DType::kI64);
  EXPECT_EQ(r.outputs[1].values<int64_t>(), (std::vector<int64_t>{10, 11, 14, 15}));
  ceil.set_int("storage_order", 1);  // column-major indices
  EXPECT_EQ(run_op("MaxPool", {x}, ceil, 2).outputs[1].values<int64_t>(), (std::vector<int64_t>{10, 14, 11, 15}));

  // ceil_mode may not start a window in the right padding: 2 -> 1 output, not 2.
  Tensor x1 = make_tensor<float>({1, 1, 2}, {1, 2});
  r = run_op("MaxPool", {x1},
             AttrStore().set_ints("kernel_shape", {2}).set_ints("strides", {2}).set_ints("pads", {0, 1}).set_int("ceil_mode", 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 1}));
  // ... nor past the input when the stride exceeds the kernel: starts 0, 3 (6 is dropped).
  Tensor x5 = make_tensor<float>({1, 1, 5}, iota(5));
  r = run_op("MaxPool", {x5}, AttrStore().set_ints("kernel_shape", {1}).set_ints("strides", {3}).set_int("ceil_mode", 1));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 4}));
}

TEST(Pool, HandComputedAverage) {
  Tensor x = make_tensor<float>({1, 1, 3, 3}, iota(9));
  AttrStore a;
  a.set_ints("kernel_shape", {2, 2}).set_ints("pads", {1, 1, 0, 0});
  OpResult r = run_op("AveragePool", {x}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 1.5f, 2.5f, 2.5f, 3, 4, 5.5f, 6, 7}));
  a.set_int("count_include_pad", 1);  // pads count: the corner averages 1 over 4 taps
  EXPECT_EQ(run_op("AveragePool", {x}, a).outputs[0].values<float>(),
            (std::vector<float>{0.25f, 0.75f, 1.25f, 1.25f, 3, 4, 2.75f, 6, 7}));

  Tensor g = make_tensor<float>({1, 2, 2, 2}, {1, 2, 3, 4, 10, 10, 10, 11});
  r = run_op("GlobalAveragePool", {g});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 2, 1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{2.5f, 10.25f}));
  r = run_op("GlobalAveragePool", {make_tensor<float>({2, 1, 3}, {1, 2, 3, -1, -2, -6})});
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{2, -3}));
}

TEST(Pool, HandComputedGlobalMax) {
  // Rank 3, 4 and 5; all-negative planes (a max that starts from 0 would be wrong).
  OpResult r = run_op("GlobalMaxPool", {make_tensor<float>({2, 1, 3}, {1, 2, 3, -1, -2, -6})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{3, -1}));
  r = run_op("GlobalMaxPool", {make_tensor<float>({1, 2, 2, 2}, {-4, -2, -3, -9, 10, 10, 11, 10})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 2, 1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{-2, 11}));
  std::vector<float> v5 = {-8, -7, -6, -5, -4, -3, -2.5f, -100, 0.5f, 0, -1, 7, 2, 3, 6.5f, 1};
  r = run_op("GlobalMaxPool", {make_tensor<float>({1, 2, 2, 2, 2}, v5)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{1, 2, 1, 1, 1}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{-2.5f, 7}));
  // A NaN anywhere makes the plane's max NaN (numpy, the ONNX reference); -inf stays -inf.
  const float inf = std::numeric_limits<float>::infinity();
  r = run_op("GlobalMaxPool", {make_tensor<float>({3, 1, 3}, {NAN, 1, 2, 3, 4, NAN, -inf, -inf, -inf})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_TRUE(std::isnan(r.outputs[0].at(0)));
  EXPECT_TRUE(std::isnan(r.outputs[0].at(1)));
  EXPECT_EQ(r.outputs[0].at(2), -inf);
}

/// One pooling call to check.
struct PoolCase {
  bool is_max = true, ceil_mode = false, include_pad = false, column_major = false;
  int64_t n = 1, c = 1;
  std::vector<int64_t> in, k, s, d, pads;
  std::string auto_pad = "NOTSET";
};

// Output size and begin/end pads of one axis, following the ONNX operator text and its
// ceil_mode rule (a window may not start in the right padding).
void onnx_pool_axis(const PoolCase& pc, size_t a, int64_t* out, int64_t* begin, int64_t* end) {
  size_t nsp = pc.in.size();
  int64_t ek = pc.d[a] * (pc.k[a] - 1) + 1;
  if (pc.auto_pad == "SAME_UPPER" || pc.auto_pad == "SAME_LOWER") {
    *out = static_cast<int64_t>(std::ceil(static_cast<double>(pc.in[a]) / pc.s[a]));
    int64_t total = std::max<int64_t>(0, (*out - 1) * pc.s[a] + ek - pc.in[a]);
    *begin = pc.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    *end = total - *begin;
    return;
  }
  bool valid = pc.auto_pad == "VALID";
  *begin = valid ? 0 : pc.pads[a];
  *end = valid ? 0 : pc.pads[nsp + a];
  double q = static_cast<double>(pc.in[a] + *begin + *end - ek) / pc.s[a];
  *out = static_cast<int64_t>(pc.ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
  if (pc.ceil_mode && (*out - 1) * pc.s[a] >= pc.in[a] + *begin) --*out;
}

// Pooling in double: every output visits every window tap; taps outside the input are
// skipped, and for count_include_pad those inside the pads are still counted.
void reference_pool(const PoolCase& pc, const Tensor& x, std::vector<int64_t>* shape, std::vector<double>* y,
                    std::vector<int64_t>* indices) {
  size_t nsp = pc.in.size();
  std::vector<int64_t> out(nsp), begin(nsp), end(nsp);
  for (size_t a = 0; a < nsp; ++a) onnx_pool_axis(pc, a, &out[a], &begin[a], &end[a]);
  *shape = {pc.n, pc.c};
  shape->insert(shape->end(), out.begin(), out.end());
  int64_t out_sp = 1, k_sp = 1, in_sp = 1;
  for (size_t a = 0; a < nsp; ++a) out_sp *= out[a], k_sp *= pc.k[a], in_sp *= pc.in[a];
  for (int64_t plane = 0; plane < pc.n * pc.c; ++plane) {
    for (int64_t o = 0; o < out_sp; ++o) {
      double best = std::numeric_limits<float>::lowest(), sum = 0;
      int64_t best_index = -1, count = 0, count_pad = 0;
      for (int64_t t = 0; t < k_sp; ++t) {
        std::vector<int64_t> coord(nsp);
        bool inside = true, inside_pads = true;
        int64_t orest = o, trest = t;
        for (size_t a = 0; a < nsp; ++a) {  // row-major coordinates of output o and tap t
          int64_t later_o = 1, later_k = 1;
          for (size_t z = a + 1; z < nsp; ++z) later_o *= out[z], later_k *= pc.k[z];
          int64_t oc = orest / later_o, kc = trest / later_k;
          orest %= later_o;
          trest %= later_k;
          coord[a] = oc * pc.s[a] - begin[a] + kc * pc.d[a];
          inside &= coord[a] >= 0 && coord[a] < pc.in[a];
          inside_pads &= coord[a] >= -begin[a] && coord[a] < pc.in[a] + end[a];
        }
        count_pad += inside_pads;
        if (!inside) continue;
        int64_t flat = nsp == 1 ? coord[0] : coord[0] * pc.in[1] + coord[1];
        double v = x.at(plane * in_sp + flat);
        ++count;
        sum += v;
        if (best_index < 0 || v > best) {
          best = v;
          int64_t within = nsp == 2 && pc.column_major ? coord[1] * pc.in[0] + coord[0] : flat;
          best_index = plane * in_sp + within;
        }
      }
      if (pc.is_max) {
        y->push_back(best);
        indices->push_back(best_index);
      } else {
        int64_t div = pc.include_pad ? count_pad : count;
        y->push_back(div ? sum / div : 0.0);
      }
    }
  }
}

TEST(Pool, RandomSweepAgainstReference) {
  std::mt19937 rng(99);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const char* modes[] = {"NOTSET", "NOTSET", "NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"};
  int ran = 0, rejected = 0;
  for (int iter = 0; iter < 500; ++iter) {
    PoolCase pc;
    size_t nsp = pick(1, 2);
    pc.is_max = pick(0, 1);
    pc.ceil_mode = pick(0, 1);
    pc.include_pad = !pc.is_max && pick(0, 1);
    pc.column_major = pc.is_max && pick(0, 1);
    pc.n = pick(1, 2);
    pc.c = pick(1, 3);
    pc.auto_pad = modes[pick(0, 5)];
    for (size_t a = 0; a < nsp; ++a) {
      pc.in.push_back(pick(1, nsp == 1 ? 14 : 9));
      pc.k.push_back(pick(1, 4));
      pc.s.push_back(pick(1, 3));
      pc.d.push_back(pick(1, 2));
    }
    for (size_t a = 0; a < 2 * nsp; ++a) pc.pads.push_back(pick(0, pc.k[a % nsp] - 1));
    AttrStore attrs;
    attrs.set_ints("kernel_shape", pc.k);
    if (pc.auto_pad != "NOTSET" || pick(0, 1)) attrs.set_str("auto_pad", pc.auto_pad);
    // Attributes equal to their defaults are sometimes left out.
    auto all_are = [](const std::vector<int64_t>& v, int64_t x) {
      return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; });
    };
    if (pc.auto_pad == "NOTSET" && (pick(0, 3) || !all_are(pc.pads, 0))) attrs.set_ints("pads", pc.pads);
    if (pick(0, 3) || !all_are(pc.s, 1)) attrs.set_ints("strides", pc.s);
    if (pick(0, 3) || !all_are(pc.d, 1)) attrs.set_ints("dilations", pc.d);
    if (pc.ceil_mode || pick(0, 1)) attrs.set_int("ceil_mode", pc.ceil_mode);
    if (pc.include_pad || (!pc.is_max && pick(0, 1))) attrs.set_int("count_include_pad", pc.include_pad);
    if (pc.column_major) attrs.set_int("storage_order", 1);
    bool with_indices = pc.is_max && pick(0, 1);

    std::vector<int64_t> xs = {pc.n, pc.c};
    xs.insert(xs.end(), pc.in.begin(), pc.in.end());
    Tensor x = random_f32(rng, xs);
    std::vector<int64_t> want_shape, want_indices;
    std::vector<double> want;
    reference_pool(pc, x, &want_shape, &want, &want_indices);
    bool empty = false;
    for (int64_t d : want_shape) empty |= d < 1;
    const char* op = pc.is_max ? "MaxPool" : "AveragePool";
    std::string what = std::string(op) + " iter " + std::to_string(iter);
    if (empty) {
      OpResult r = run_op(op, {x}, attrs);
      EXPECT_TRUE(has_text(r.status, "must be at least 1")) << what;
      ++rejected;
      continue;
    }
    std::vector<Tensor> outs;
    if (with_indices) {
      OpResult r = run_op(op, {x}, attrs, 2);
      ASSERT_TRUE(r.status.ok()) << what << ": " << r.status.message();
      outs = r.outputs;
      ASSERT_EQ(outs[1].shape, want_shape) << what;
      ASSERT_EQ(outs[1].values<int64_t>(), want_indices) << what;
    } else {
      SlotRun s = run_op_in_slots(op, {x}, attrs);
      ASSERT_TRUE(s.exact.status.ok()) << what << ": " << s.exact.status.message();
      EXPECT_TRUE(s.tails_intact) << what;
      outs = s.exact.outputs;
      for (int64_t i = 0; i < outs[0].numel(); ++i)
        ASSERT_EQ(s.outputs[0].at(i), outs[0].at(i)) << "slotted run differs, " << what;
    }
    ASSERT_EQ(outs[0].shape, want_shape) << what;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(outs[0].at(i), want[i], 1e-5 * (1 + std::abs(want[i]))) << what << " at " << i;
    ++ran;
  }
  EXPECT_GT(ran, 400);
  EXPECT_GT(rejected, 0);
}

TEST(Pool, GlobalAverageSweep) {
  std::mt19937 rng(8);
  for (int iter = 0; iter < 50; ++iter) {
    std::vector<int64_t> shape = random_shape(rng, 3 + static_cast<int>(rng() % 3), 7);
    Tensor x = random_f32(rng, shape);
    SlotRun s = run_op_in_slots("GlobalAveragePool", {x});
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    EXPECT_TRUE(s.tails_intact);
    int64_t plane = x.numel() / (shape[0] * shape[1]);
    std::vector<int64_t> want_shape(shape.size(), 1);
    want_shape[0] = shape[0];
    want_shape[1] = shape[1];
    ASSERT_EQ(s.exact.outputs[0].shape, want_shape);
    for (int64_t p = 0; p < shape[0] * shape[1]; ++p) {
      double sum = 0;
      for (int64_t i = 0; i < plane; ++i) sum += x.at(p * plane + i);
      ASSERT_NEAR(s.exact.outputs[0].at(p), sum / plane, 1e-6);
      ASSERT_EQ(s.outputs[0].at(p), s.exact.outputs[0].at(p));
    }
  }
}

/// Max of each [N, C] plane over all spatial axes, in double.
std::vector<double> reference_global_max(const Tensor& x) {
  int64_t planes = x.shape[0] * x.shape[1], plane = x.numel() / planes;
  std::vector<double> y(planes, -std::numeric_limits<double>::infinity());
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < plane; ++i) y[p] = std::max(y[p], x.at(p * plane + i));
  return y;
}

TEST(Pool, GlobalMaxSweep) {
  std::mt19937 rng(81);
  for (int iter = 0; iter < 60; ++iter) {
    std::vector<int64_t> shape = random_shape(rng, 3 + iter % 3, 7);
    // Every third case is all-negative.
    Tensor x = iter % 3 == 0 ? random_f32(rng, shape, -9.f, -1.f) : random_f32(rng, shape, -5.f, 5.f);
    SlotRun s = run_op_in_slots("GlobalMaxPool", {x});
    ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
    EXPECT_EQ(s.kernel, kernels::KernelStatus::kOk);
    EXPECT_TRUE(s.tails_intact);
    std::vector<int64_t> want_shape(shape.size(), 1);
    want_shape[0] = shape[0];
    want_shape[1] = shape[1];
    ASSERT_EQ(s.exact.outputs[0].shape, want_shape);
    std::vector<double> want = reference_global_max(x);
    for (size_t p = 0; p < want.size(); ++p) {
      ASSERT_EQ(s.exact.outputs[0].at(p), want[p]) << "iter " << iter << " plane " << p;
      ASSERT_EQ(s.outputs[0].at(p), want[p]) << "slotted run, iter " << iter;
    }
  }
}

TEST(Pool, Errors) {
  Tensor x = make_tensor<float>({1, 2, 5, 5}, std::vector<float>(50, 0.f));
  AttrStore k3;
  k3.set_ints("kernel_shape", {3, 3});
  EXPECT_TRUE(has_text(run_op("MaxPool", {x}).status, "node 'test' (MaxPool): attribute 'kernel_shape' is required"));
  EXPECT_TRUE(has_text(run_op("AveragePool", {x}, AttrStore().set_ints("kernel_shape", {3})).status,
                       "attribute 'kernel_shape' needs 2 values, got 1"));
  EXPECT_TRUE(has_text(run_op("MaxPool", {x}, AttrStore(k3).set_ints("pads", {0, 3, 0, 0})).status,
                       "pad 3 must be smaller than the kernel size 3"));
  EXPECT_TRUE(has_text(run_op("MaxPool", {x}, AttrStore(k3).set_int("ceil_mode", 2)).status,
                       "attribute 'ceil_mode' must be 0 or 1, got 2"));
  EXPECT_TRUE(has_text(run_op("AveragePool", {x}, AttrStore(k3).set_str("auto_pad", "same")).status,
                       "attribute 'auto_pad' is 'same', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER"));
  EXPECT_TRUE(has_text(run_op("MaxPool", {x}, AttrStore().set_ints("kernel_shape", {6, 1})).status,
                       "size 0 must be at least 1"));
  Tensor x5 = make_tensor<float>({1, 1, 1, 1, 1}, {0.f});
  EXPECT_TRUE(has_text(run_op("MaxPool", {x5}, AttrStore().set_ints("kernel_shape", {1, 1, 1})).status,
                       "supports 1-D and 2-D pooling (input rank 3 or 4), got input [1, 1, 1, 1, 1]"));
  Tensor xi = make_tensor<int64_t>({1, 1, 4}, {1, 2, 3, 4});
  EXPECT_TRUE(has_text(run_op("MaxPool", {xi}, AttrStore().set_ints("kernel_shape", {2})).status,
                       "input #0 has dtype i64, expected f32"));
  EXPECT_TRUE(has_text(run_op("AveragePool", {x}, k3, 2).status, "has 1 output(s), 2 requested"));
  // Regression: absurd window attributes overflowed the size arithmetic (undefined).
  EXPECT_TRUE(has_text(run_op("MaxPool", {x}, AttrStore().set_ints("kernel_shape", {int64_t{1} << 62, 1})).status,
                       "attribute 'kernel_shape' value 4611686018427387904 must be <= 1048576"));
  EXPECT_TRUE(has_text(run_op("MaxPool", {x}, AttrStore(k3).set_ints("strides", {1, int64_t{1} << 62})).status,
                       "attribute 'strides' value 4611686018427387904 must be <= 1048576"));
  EXPECT_TRUE(has_text(run_op("GlobalAveragePool", {make_tensor<float>({2, 3}, std::vector<float>(6, 0.f))}).status,
                       "node 'test' (GlobalAveragePool): needs an input of rank >= 3 (N, C, spatial...), got [2, 3]"));
  EXPECT_TRUE(has_text(run_op("GlobalAveragePool", {xi}).status, "input #0 has dtype i64, expected f32"));
  EXPECT_TRUE(has_text(run_op("GlobalMaxPool", {make_tensor<float>({4}, std::vector<float>(4, 0.f))}).status,
                       "node 'test' (GlobalMaxPool): needs an input of rank >= 3 (N, C, spatial...), got [4]"));
  EXPECT_TRUE(has_text(run_op("GlobalMaxPool", {xi}).status,
                       "node 'test' (GlobalMaxPool): input #0 has dtype i64, expected f32"));
  EXPECT_TRUE(has_text(run_op("GlobalMaxPool", {x, x}).status, "expects 1 inputs, got 2"));
}

class PoolSymbolic : public ::testing::Test {
 protected:
  SymResult pool_shape(const char* op, std::vector<ExprId> x, const AttrStore& a) {
    return infer(pool, op, {sym_input(DType::kF32, std::move(x))}, a);
  }
  ExprId k(int64_t v) { return pool.constant(v); }
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId h = pool.dim(pool.add_dim({"H", 1, 512, 1}));
  ExprId w = pool.dim(pool.add_dim({"W", 1, 512, 1}));
};

TEST_F(PoolSymbolic, Shapes) {
  AttrStore a;
  a.set_ints("kernel_shape", {3, 3}).set_ints("strides", {2, 2}).set_ints("pads", {1, 1, 1, 1});
  SymResult r = pool_shape("MaxPool", {batch, k(64), h, w}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 64, ceildiv(H,2), ceildiv(W,2)]");
  EXPECT_EQ(guards_text(pool, r), "");

  // ceil_mode with 2x2 / 2: ceildiv(H - 2, 2) + 1 == ceildiv(H, 2), no right-pad rule needed.
  r = pool_shape("AveragePool", {batch, k(64), h, w},
                 AttrStore().set_ints("kernel_shape", {2, 2}).set_ints("strides", {2, 2}).set_int("ceil_mode", 1));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 64, ceildiv(H,2), ceildiv(W,2)]");
  EXPECT_EQ(guards_text(pool, r), "");

  r = pool_shape("MaxPool", {batch, k(8), h}, AttrStore().set_ints("kernel_shape", {3}).set_ints("strides", {2}));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 8, ceildiv(H,2) - 1]");
  EXPECT_EQ(guards_text(pool, r), "ceildiv(H,2) - 1 >= 1");

  r = pool_shape("AveragePool", {batch, k(8), h},
                 AttrStore().set_ints("kernel_shape", {4}).set_ints("strides", {4}).set_str("auto_pad", "SAME_UPPER"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 8, ceildiv(H,4)]");

  r = pool_shape("GlobalAveragePool", {batch, k(64), h, w}, AttrStore());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 64, 1, 1]");
  r = pool_shape("GlobalMaxPool", {batch, k(64), h, w}, AttrStore());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 64, 1, 1]");
  EXPECT_EQ(guards_text(pool, r), "");
  r = pool_shape("GlobalMaxPool", {batch, h, w}, AttrStore());
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, H, 1]");
}

TEST_F(PoolSymbolic, GlobalMaxRunsFarBelowTheBound) {
  // Rank 3, 4 and 5 inputs over the dims batch <= 8, H <= 512, W <= 512, run at a few each.
  std::vector<std::vector<ExprId>> shapes = {
      {batch, k(3), h}, {batch, k(2), h, w}, {batch, w, k(2), h, k(3)}};
  std::mt19937 rng(13);
  for (const auto& xs : shapes) {
    SymResult r = pool_shape("GlobalMaxPool", xs, AttrStore());
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_TRUE(r.guards.empty());
    for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1, 1}, {2, 5, 3}, {3, 1, 7}, {1, 9, 2}}) {
      std::vector<int64_t> in = eval_shape(pool, xs, dims);
      Tensor x = random_f32(rng, in, -6.f, -0.5f);
      std::vector<Tensor> out(1);
      out[0].shape = eval_shape(pool, r.outputs[0].shape, dims);
      std::vector<int64_t> want_shape(in.size(), 1);
      want_shape[0] = in[0];
      want_shape[1] = in[1];
      ASSERT_EQ(out[0].shape, want_shape) << r.shape;
      ASSERT_EQ(run_kernel("GlobalMaxPool", {x}, &out), kernels::KernelStatus::kOk);
      std::vector<double> want = reference_global_max(x);
      for (size_t p = 0; p < want.size(); ++p) ASSERT_EQ(out[0].at(p), want[p]) << r.shape << " plane " << p;
    }
  }
}

TEST_F(PoolSymbolic, CeilModeRuleEvaluatesAtEverySize) {
  // pads [1, 2], kernel 3, stride 2: the right-pad rule can bite, so the shape keeps a min().
  AttrStore a;
  a.set_ints("kernel_shape", {3}).set_ints("strides", {2}).set_ints("pads", {1, 2}).set_int("ceil_mode", 1);
  SymResult r = pool_shape("MaxPool", {batch, k(3), h}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_NE(r.shape.find("min("), std::string::npos) << r.shape;
  std::mt19937 rng(11);
  for (int64_t hv = 1; hv <= 40; ++hv) {
    PoolCase pc;
    pc.c = 3, pc.ceil_mode = true, pc.in = {hv}, pc.k = {3}, pc.s = {2}, pc.d = {1}, pc.pads = {1, 2};
    Tensor x = random_f32(rng, {1, 3, hv});
    std::vector<int64_t> want_shape, want_indices;
    std::vector<double> want;
    reference_pool(pc, x, &want_shape, &want, &want_indices);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, {1, hv, 1});
    ASSERT_EQ(out[0].shape, want_shape) << "H=" << hv;
    ASSERT_EQ(run_kernel("MaxPool", {x}, &out, a), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(out[0].at(i), want[i]) << "H=" << hv;
  }
}

TEST_F(PoolSymbolic, BindThenExecuteBelowTheBound) {
  AttrStore a;
  a.set_ints("kernel_shape", {3, 2}).set_ints("strides", {2, 1}).set_str("auto_pad", "SAME_LOWER")
      .set_int("count_include_pad", 1);
  SymResult r = pool_shape("AveragePool", {batch, k(2), h, w}, a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 2, ceildiv(H,2), W]");
  std::mt19937 rng(12);
  for (int it = 0; it < 20; ++it) {
    int64_t hv = 1 + rng() % 30, wv = 1 + rng() % 30;
    PoolCase pc;
    pc.is_max = false, pc.include_pad = true, pc.n = 2, pc.c = 2, pc.auto_pad = "SAME_LOWER";
    pc.in = {hv, wv}, pc.k = {3, 2}, pc.s = {2, 1}, pc.d = {1, 1};
    Tensor x = random_f32(rng, {2, 2, hv, wv});
    std::vector<int64_t> want_shape, unused;
    std::vector<double> want;
    reference_pool(pc, x, &want_shape, &want, &unused);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(pool, r.outputs[0].shape, {2, hv, wv});
    ASSERT_EQ(out[0].shape, want_shape) << "H=" << hv << " W=" << wv;
    ASSERT_EQ(run_kernel("AveragePool", {x}, &out, a), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(out[0].at(i), want[i], 1e-5) << "H=" << hv;
  }
}

}  // namespace
}  // namespace kiln::testing
