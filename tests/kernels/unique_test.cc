// Unique: a seeded sweep (flattened and along each axis, sorted and by first occurrence, many
// duplicates, zero extents) against a std::map written here: Y, first indices, inverse and
// counts; NaN sorts last and equals NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "op_test_util.h"

namespace kiln::kernels {
namespace {

using testing::view_of;

using V = std::vector<int64_t>;

struct Out {
  std::vector<float> y;
  V first, inverse, counts;
  int64_t u = -1;
};

/// Items of x as [outer, n, inner]; flat: every element.
void split(const V& shape, int64_t axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = *inner = 1;
  *n = 1;
  if (axis < 0) {
    for (int64_t d : shape) *n *= d;
    return;
  }
  for (size_t a = 0; a < shape.size(); ++a) (static_cast<int64_t>(a) < axis ? *outer : static_cast<int64_t>(a) == axis ? *n : *inner) *= shape[a];
}

Out run(const V& shape, std::vector<float> x, int64_t axis, bool sorted) {
  int64_t outer, n, inner;
  split(shape, axis, &outer, &n, &inner);
  Out o;
  V ys = axis < 0 ? V{n} : shape;  // reserved at the bound: u <= n
  int64_t ny = 1;
  for (int64_t d : ys) ny *= d;
  o.y.assign(static_cast<size_t>(ny), -9.f);
  o.first.assign(static_cast<size_t>(n), -9);
  o.inverse.assign(static_cast<size_t>(n), -9);
  o.counts.assign(static_cast<size_t>(n), -9);
  std::vector<int64_t> scratch(static_cast<size_t>(4 * n + 1));
  TensorView xv = view_of(DType::kF32, shape, x.data()), yv = view_of(DType::kF32, ys, o.y.data());
  TensorView fv = view_of(DType::kI64, {n}, o.first.data()), iv = view_of(DType::kI64, {n}, o.inverse.data()),
             cv = view_of(DType::kI64, {n}, o.counts.data());
  const TensorView* ins[] = {&xv};
  TensorView* outs[] = {&yv, &fv, &iv, &cv};
  core::AttrStore a;
  a.set_int("dim", 0).set_int("sorted", sorted ? 1 : 0);
  if (axis >= 0) a.set_int("axis", axis);
  RunCtx c;
  c.inputs = ins;
  c.num_inputs = 1;
  c.outputs = outs;
  c.num_outputs = 4;
  c.attrs = a.view();
  c.scratch = scratch.data();
  c.scratch_bytes = scratch.size() * sizeof(int64_t);
  c.produced_dim = &o.u;
  EXPECT_EQ(find_op("Unique")->run(c), KernelStatus::kOk);
  return o;
}

TEST(Unique, MatchesAMapWrittenHereOverRandomShapes) {
  std::mt19937 rng(5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 300; ++trial) {
    V shape;
    const int rank = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < rank; ++k) shape.push_back(static_cast<int64_t>(rng() % 5));
    const int64_t axis = rng() % 3 == 0 ? -1 : static_cast<int64_t>(rng() % static_cast<unsigned>(rank));
    const bool sorted = rng() % 2;
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<float> x(static_cast<size_t>(numel));
    for (float& v : x) v = rng() % 11 == 0 ? nan : static_cast<float>(static_cast<int>(rng() % 4) - 1);
    int64_t outer, n, inner;
    split(shape, axis, &outer, &n, &inner);
    // Reference: an item is its elements across the outer rows; NaN keyed above every number.
    auto key = [&](int64_t i) {
      std::vector<std::pair<int, float>> k;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t r = 0; r < inner; ++r) {
          const float v = x[static_cast<size_t>((o * n + i) * inner + r)];
          k.emplace_back(std::isnan(v) ? 1 : 0, std::isnan(v) ? 0.f : v);
        }
      return k;
    };
    std::map<std::vector<std::pair<int, float>>, int64_t> first_of;  // sorted keys -> first item
    std::vector<std::vector<std::pair<int, float>>> seen;            // keys in order of first occurrence
    for (int64_t i = 0; i < n; ++i)
      if (first_of.emplace(key(i), i).second) seen.push_back(key(i));
    std::vector<int64_t> want_first;
    if (sorted)
      for (const auto& [k, i] : first_of) want_first.push_back(i);
    else
      for (const auto& k : seen) want_first.push_back(first_of[k]);
    const Out got = run(shape, x, axis, sorted);
    const int64_t u = static_cast<int64_t>(want_first.size());
    ASSERT_EQ(got.u, u) << "trial " << trial;
    for (int64_t k = 0; k < u; ++k) {
      ASSERT_EQ(got.first[static_cast<size_t>(k)], want_first[static_cast<size_t>(k)]) << "trial " << trial;
      int64_t count = 0;
      for (int64_t i = 0; i < n; ++i) count += key(i) == key(want_first[static_cast<size_t>(k)]);
      ASSERT_EQ(got.counts[static_cast<size_t>(k)], count) << "trial " << trial;
    }
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(key(want_first[static_cast<size_t>(got.inverse[static_cast<size_t>(i)])]), key(i)) << "trial " << trial;
    for (int64_t o = 0; o < outer; ++o)  // Y: the first items' elements, rows u apart
      for (int64_t k = 0; k < u; ++k)
        for (int64_t r = 0; r < inner; ++r) {
          const float want = x[static_cast<size_t>((o * n + want_first[static_cast<size_t>(k)]) * inner + r)];
          const float y = got.y[static_cast<size_t>((o * u + k) * inner + r)];
          ASSERT_TRUE(y == want || (std::isnan(y) && std::isnan(want))) << "trial " << trial;
        }
  }
}

}  // namespace
}  // namespace kiln::kernels
