// FusedAttention (export's fusion of MatMul -> scale -> bias/mask -> Softmax -> MatMul): the
// op against a double-precision reference written from its definition, at sizes around the key
// tile (64), the row block (16) and the vector width, with K by rows and transposed, D above
// the in-tile transpose limit, broadcast bias and masks, fully masked rows (NaN as Softmax)
// and masked_fill values; and its shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "op_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

using core::AttrStore;

struct Case {
  int64_t batch, heads, lq, lk, d, dv;
  bool kt;
};

// post kinds: 1 add bias [batch, 1, 1, lk] (a key-padding bias), 2 fill where a causal-style
// condition [1, 1, lq, lk] holds, 3 fill unless a condition [batch, heads, lq, lk] holds.
std::vector<double> reference(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v,
                              const std::vector<Tensor>& post, const std::vector<int64_t>& kinds,
                              const std::vector<float>& fills, float scale) {
  std::vector<double> out(static_cast<size_t>(c.batch * c.heads * c.lq * c.dv));
  std::vector<double> s(static_cast<size_t>(c.lk));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t bh = b * c.heads + h;
      for (int64_t i = 0; i < c.lq; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < c.lk; ++j) {
          double acc = 0;
          for (int64_t e = 0; e < c.d; ++e)
            acc += q.at((bh * c.lq + i) * c.d + e) * (c.kt ? k.at((bh * c.d + e) * c.lk + j) : k.at((bh * c.lk + j) * c.d + e));
          acc = static_cast<double>(static_cast<float>(acc) * scale);
          for (size_t p = 0; p < kinds.size(); ++p) {
            if (kinds[p] == 1) acc += post[p].at(b * c.lk + j);
            if (kinds[p] == 2 && post[p].at(i * c.lk + j) != 0) acc = fills[p];
            if (kinds[p] == 3 && post[p].at((bh * c.lq + i) * c.lk + j) == 0) acc = fills[p];
          }
          s[j] = acc;
          m = std::max(m, acc);
        }
        double l = 0;
        for (int64_t j = 0; j < c.lk; ++j) l += (s[j] = std::exp(s[j] - m));
        for (int64_t e = 0; e < c.dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < c.lk; ++j) acc += s[j] / l * v.at((bh * c.lk + j) * c.dv + e);
          out[static_cast<size_t>((bh * c.lq + i) * c.dv + e)] = m == -INFINITY ? NAN : acc;
        }
      }
    }
  return out;
}

Tensor bools(std::mt19937& rng, std::vector<int64_t> shape, double p_true) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::bernoulli_distribution coin(p_true);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = coin(rng);
  return make_tensor<bool>(std::move(shape), std::vector<bool>(v.begin(), v.end()));
}

TEST(FusedAttention, MatchesDoubleReferenceAtTileEdges) {
  std::mt19937 rng(5);
  const Case cases[] = {{1, 1, 1, 1, 1, 1, false},  {2, 3, 5, 7, 8, 8, true},      {1, 2, 17, 64, 16, 16, false},
                        {2, 2, 16, 65, 16, 16, true}, {1, 1, 33, 130, 8, 33, false}, {1, 2, 3, 200, 130, 7, false},
                        {1, 1, 40, 129, 24, 40, true}};
  for (const Case& c : cases) {
    for (int variant = 0; variant < 3; ++variant) {
      const float scale = 0.3f;
      Tensor q = random_f32(rng, {c.batch, c.heads, c.lq, c.d});
      Tensor k = c.kt ? random_f32(rng, {c.batch, c.heads, c.d, c.lk}) : random_f32(rng, {c.batch, c.heads, c.lk, c.d});
      Tensor v = random_f32(rng, {c.batch, c.heads, c.lk, c.dv});
      std::vector<Tensor> post;
      std::vector<int64_t> kinds;
      std::vector<float> fills;
      if (variant >= 1) {  // key-padding bias, broadcast over heads and rows
        post.push_back(random_f32(rng, {c.batch, 1, 1, c.lk}, -3.f, 1.f));
        kinds.push_back(1);
        fills.push_back(0.f);
      }
      if (variant == 2) {  // masked_fill: -inf where a broadcast condition holds (rows may be all masked)
        post.push_back(bools(rng, {1, 1, c.lq, c.lk}, 0.6));
        kinds.push_back(2);
        fills.push_back(-std::numeric_limits<float>::infinity());
        post.push_back(bools(rng, {c.batch, c.heads, c.lq, c.lk}, 0.8));
        kinds.push_back(3);
        fills.push_back(-1e9f);
      }
      std::vector<Tensor> inputs = {q, k, v};
      inputs.insert(inputs.end(), post.begin(), post.end());
      OpResult r = run_op("FusedAttention", inputs,
                          AttrStore().set_float("scale", scale).set_int("k_transposed", c.kt).set_ints("post", kinds).set_floats("fill", fills));
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      ASSERT_EQ(r.kernel, kernels::KernelStatus::kOk);
      ASSERT_EQ(r.outputs[0].shape, (std::vector<int64_t>{c.batch, c.heads, c.lq, c.dv}));
      const std::vector<double> want = reference(c, q, k, v, post, kinds, fills, scale);
      const std::vector<float> got = r.outputs[0].values<float>();
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i])) << "case lk=" << c.lk << " variant " << variant << " i=" << i;
          continue;
        }
        ASSERT_NEAR(got[i], want[i], 2e-5) << "case lq=" << c.lq << " lk=" << c.lk << " d=" << c.d << " dv=" << c.dv
                                           << " kt=" << c.kt << " variant " << variant << " i=" << i;
      }
    }
  }
}

// A NaN in Q makes its row NaN, in K (a key of the second tile) every row, in V its column:
// never a tile passed over, never a plausible number (on every row of the ISA table).
TEST(FusedAttention, NanInQKOrVReachesTheOutputs) {
  std::mt19937 rng(9);
  const int64_t lq = 3, lk = 130, d = 8, dv = 8;
  AttrStore none = AttrStore().set_float("scale", 0.5f).set_int("k_transposed", 0).set_ints("post", {}).set_floats("fill", {});
  for (int where = 0; where < 3; ++where) {
    Tensor q = random_f32(rng, {1, 1, lq, d}), k = random_f32(rng, {1, 1, lk, d}), v = random_f32(rng, {1, 1, lk, dv});
    if (where == 0) q.data<float>()[1 * d + 2] = NAN;   // row 1
    if (where == 1) k.data<float>()[70 * d + 5] = NAN;  // key 70: the second tile of 64
    if (where == 2) v.data<float>()[100 * dv + 3] = NAN;  // column 3
    OpResult r = run_op("FusedAttention", {q, k, v}, none);
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    const std::vector<float> got = r.outputs[0].values<float>();
    for (int64_t i = 0; i < lq; ++i)
      for (int64_t e = 0; e < dv; ++e) {
        const bool want_nan = where == 1 || (where == 0 && i == 1) || (where == 2 && e == 3);
        EXPECT_EQ(std::isnan(got[static_cast<size_t>(i * dv + e)]), want_nan) << "where " << where << " row " << i << " col " << e;
      }
  }
}

TEST(FusedAttention, ShapeErrors) {
  std::mt19937 rng(6);
  Tensor q = random_f32(rng, {2, 5, 8}), k = random_f32(rng, {2, 7, 8}), v = random_f32(rng, {2, 7, 4});
  AttrStore none = AttrStore().set_ints("post", {}).set_floats("fill", {});
  OpResult ok = run_op("FusedAttention", {q, k, v}, none);
  ASSERT_TRUE(ok.status.ok()) << ok.status.message();
  EXPECT_EQ(ok.outputs[0].shape, (std::vector<int64_t>{2, 5, 4}));
  EXPECT_TRUE(has_text(run_op("FusedAttention", {q, random_f32(rng, {2, 7, 9}), v}, none).status, "node 'test' (FusedAttention)"));
  EXPECT_TRUE(has_text(run_op("FusedAttention", {q, k, v, random_f32(rng, {2, 1, 7})}, none).status,
                       "has 1 post-op inputs but post/fill attributes for 0/0"));
  AttrStore add = AttrStore().set_ints("post", {1}).set_floats("fill", {0.f});
  EXPECT_TRUE(has_text(run_op("FusedAttention", {q, k, v, random_f32(rng, {3, 5, 7})}, add).status,
                       "must broadcast onto the scores [2, 5, 7]"));
  EXPECT_TRUE(has_text(run_op("FusedAttention", {q, k, v, bools(rng, {1, 7}, 0.5)}, add).status, "expected f32"));
  EXPECT_TRUE(has_text(run_op("FusedAttention", {q, k, v, random_f32(rng, {1, 7})},
                              AttrStore().set_ints("post", {7}).set_floats("fill", {0.f})).status,
                       "post op 7 must be 1 (add), 2 or 3 (fill)"));
}

}  // namespace
}  // namespace kiln::testing
