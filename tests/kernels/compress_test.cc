// Compress: a seeded sweep of ranks, axes (and none: the flattened input), condition lengths
// shorter, equal and longer than the axis, and zero extents, against a selection written here;
// the count it writes; a count above the reserved bound fails (and is still reported).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "op_test_util.h"

namespace kiln::kernels {
namespace {

using testing::view_of;

struct Case {
  std::vector<int64_t> shape;
  int64_t axis = 0;  // -100: none (flattened)
  std::vector<uint8_t> cond;
};

/// Runs Compress with the output reserved at `capacity` along the selected axis; returns the
/// status, the count written and the output's first `count` slices.
KernelStatus run(const Case& c, const std::vector<float>& x, int64_t capacity, int64_t* count, std::vector<float>* y) {
  const bool flat = c.axis == -100;
  const int64_t r = static_cast<int64_t>(c.shape.size());
  const int64_t axis = flat ? 0 : (c.axis < 0 ? c.axis + r : c.axis);
  std::vector<int64_t> out_shape = flat ? std::vector<int64_t>{capacity} : c.shape;
  if (!flat) out_shape[static_cast<size_t>(axis)] = capacity;
  int64_t n = 1;
  for (int64_t d : out_shape) n *= d;
  y->assign(static_cast<size_t>(n), -7.f);
  std::vector<float> xs = x;
  std::vector<uint8_t> cs = c.cond;
  TensorView xv = view_of(DType::kF32, c.shape, xs.data()), cv = view_of(DType::kBool, {static_cast<int64_t>(cs.size())}, cs.data());
  TensorView yv = view_of(DType::kF32, out_shape, y->data());
  const TensorView* ins[] = {&xv, &cv};
  TensorView* outs[] = {&yv};
  core::AttrStore a;
  a.set_int("dim", 0);
  if (!flat) a.set_int("axis", c.axis);
  RunCtx ctx;
  ctx.inputs = ins;
  ctx.num_inputs = 2;
  ctx.outputs = outs;
  ctx.num_outputs = 1;
  ctx.attrs = a.view();
  ctx.produced_dim = count;
  return find_op("Compress")->run(ctx);
}

/// The selection written here: row-major over the kept slices, `count` along the axis.
std::vector<float> reference(const Case& c, const std::vector<float>& x, int64_t* count) {
  const bool flat = c.axis == -100;
  const int64_t r = static_cast<int64_t>(c.shape.size());
  const int64_t axis = flat ? 0 : (c.axis < 0 ? c.axis + r : c.axis);
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t k = 0; k < r; ++k) {
    if (flat) len *= c.shape[static_cast<size_t>(k)];
    else (k < axis ? outer : k == axis ? len : inner) *= c.shape[static_cast<size_t>(k)];
  }
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < len && i < static_cast<int64_t>(c.cond.size()); ++i)
    if (c.cond[static_cast<size_t>(i)]) kept.push_back(i);
  *count = static_cast<int64_t>(kept.size());
  std::vector<float> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : kept)
      for (int64_t j = 0; j < inner; ++j) out.push_back(x[static_cast<size_t>((o * len + i) * inner + j)]);
  return out;
}

TEST(Compress, MatchesASelectionWrittenHereOverRandomShapesAndConditions) {
  std::mt19937 rng(2026);
  int nonempty = 0;
  for (int trial = 0; trial < 500; ++trial) {
    Case c;
    const int rank = 1 + static_cast<int>(rng() % 4);
    int64_t numel = 1;
    for (int k = 0; k < rank; ++k) {
      c.shape.push_back(static_cast<int64_t>(rng() % 5));  // 0 extents included
      numel *= c.shape.back();
    }
    c.axis = rng() % 4 == 0 ? -100 : static_cast<int64_t>(rng() % (2 * rank)) - rank;
    const int64_t len = c.axis == -100 ? numel : c.shape[static_cast<size_t>(c.axis < 0 ? c.axis + rank : c.axis)];
    const int64_t cond_len = std::max<int64_t>(0, len + static_cast<int64_t>(rng() % 5) - 2);  // shorter, equal, longer
    const unsigned p = rng() % 4;  // none, few, half, all kept
    for (int64_t i = 0; i < cond_len; ++i) c.cond.push_back(p == 0 ? 0 : p == 3 ? 1 : (rng() % (p == 1 ? 5 : 2)) == 0);
    std::vector<float> x(static_cast<size_t>(numel));
    for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.f;
    int64_t want_count = 0;
    const std::vector<float> want = reference(c, x, &want_count);
    int64_t count = -1;
    std::vector<float> y;
    const int64_t capacity = std::min(len, cond_len);  // the importer's bound
    ASSERT_EQ(run(c, x, capacity, &count, &y), KernelStatus::kOk) << "trial " << trial;
    ASSERT_EQ(count, want_count) << "trial " << trial;
    ASSERT_LE(want.size(), y.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(y[i], want[i]) << "trial " << trial << " element " << i;
    nonempty += !want.empty();
  }
  EXPECT_GT(nonempty, 100);  // 138 of 500 keep something (zero extents and empty conditions are common)
}

TEST(Compress, ACountAboveItsReservationFailsAndIsReported) {
  Case c{{2, 5}, 1, {1, 1, 0, 1, 1}};
  std::vector<float> x(10, 1.f), y;
  int64_t count = -1;
  EXPECT_EQ(run(c, x, 3, &count, &y), KernelStatus::kInvalidValue);
  EXPECT_EQ(count, 4);
  EXPECT_EQ(run(c, x, 4, &count, &y), KernelStatus::kOk);
}

}  // namespace
}  // namespace kiln::kernels
