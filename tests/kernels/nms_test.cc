// NonMaxSuppression against a reference written here (a sort of all candidates, IoU in
// double from boxes put in (x_min, y_min, x_max, y_max) form): hand cases for the rules
// (equal scores, boxes given as (y2, x2, y1, x1), center format, the score threshold, the
// per-class limit, empty inputs, all suppressed, NaN scores), a seeded sweep over batches,
// classes and box counts with IoUs kept away from the threshold, the count it writes, and a
// count above the reserved bound (failed, still reported). Shapes: the guards and the bound's
// inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "op_test_util.h"
#include "sym_test_util.h"

namespace kiln::kernels {
namespace {

using testing::view_of;
using Rows = std::vector<std::array<int64_t, 3>>;

struct Nms {
  int64_t batch = 1, classes = 1, n = 0;
  std::vector<float> boxes, scores;  // [batch, n, 4], [batch, classes, n]
  int64_t most = 100;                // < 0: input absent
  float iou = 0.5f;
  bool has_score = false;
  float score_min = 0.f;
  int64_t center = 0;
};

/// Runs the kernel with the output reserved at `capacity` rows.
KernelStatus run(const Nms& c, int64_t capacity, int64_t* count, Rows* rows) {
  std::vector<float> b = c.boxes, s = c.scores;
  std::vector<int64_t> y(static_cast<size_t>(capacity * 3), -7);
  std::vector<int64_t> most = {c.most};
  std::vector<float> iou = {c.iou}, smin = {c.score_min};
  std::vector<int64_t> scratch(static_cast<size_t>(2 * c.n + 1));
  TensorView bv = view_of(DType::kF32, {c.batch, c.n, 4}, b.data()), sv = view_of(DType::kF32, {c.batch, c.classes, c.n}, s.data());
  TensorView mv = view_of(DType::kI64, {1}, most.data()), iv = view_of(DType::kF32, {}, iou.data()),
             tv = view_of(DType::kF32, {1}, smin.data());
  TensorView yv = view_of(DType::kI64, {capacity, 3}, y.data());
  const TensorView* ins[] = {&bv, &sv, c.most < 0 ? nullptr : &mv, &iv, c.has_score ? &tv : nullptr};
  TensorView* outs[] = {&yv};
  core::AttrStore a;
  a.set_int("dim", 0).set_int("center_point_box", c.center);
  RunCtx ctx;
  ctx.inputs = ins;
  ctx.num_inputs = 5;
  ctx.outputs = outs;
  ctx.num_outputs = 1;
  ctx.attrs = a.view();
  ctx.produced_dim = count;
  ctx.scratch = scratch.data();
  ctx.scratch_bytes = static_cast<size_t>(2 * c.n) * sizeof(int64_t);
  const KernelStatus st = find_op("NonMaxSuppression")->run(ctx);
  rows->clear();
  for (int64_t k = 0; k < std::min(*count, capacity); ++k)
    rows->push_back({y[static_cast<size_t>(3 * k)], y[static_cast<size_t>(3 * k + 1)], y[static_cast<size_t>(3 * k + 2)]});
  return st;
}

/// The reference: candidates sorted (score descending, index ascending), kept greedily.
Rows reference(const Nms& c) {
  Rows out;
  auto corners = [&](int64_t b, int64_t i) {
    const float* p = c.boxes.data() + (b * c.n + i) * 4;
    std::array<double, 4> r;  // x_min, y_min, x_max, y_max
    if (c.center) {
      r = {p[0] - p[2] / 2.0, p[1] - p[3] / 2.0, p[0] + p[2] / 2.0, p[1] + p[3] / 2.0};
    } else {
      r = {std::min(p[1], p[3]), std::min(p[0], p[2]), std::max(p[1], p[3]), std::max(p[0], p[2])};
    }
    return r;
  };
  auto iou = [&](int64_t b, int64_t i, int64_t j) {
    const auto p = corners(b, i), q = corners(b, j);
    const double w = std::min(p[2], q[2]) - std::max(p[0], q[0]), h = std::min(p[3], q[3]) - std::max(p[1], q[1]);
    const double ap = (p[2] - p[0]) * (p[3] - p[1]), aq = (q[2] - q[0]) * (q[3] - q[1]);
    if (w <= 0 || h <= 0 || ap <= 0 || aq <= 0) return 0.0;
    return w * h / (ap + aq - w * h);
  };
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t k = 0; k < c.classes; ++k) {
      const float* s = c.scores.data() + (b * c.classes + k) * c.n;
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < c.n; ++i)
        if (s[i] == s[i] && (!c.has_score || s[i] > c.score_min)) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= std::max<int64_t>(c.most, 0)) break;
        if (std::none_of(kept.begin(), kept.end(), [&](int64_t j) { return iou(b, j, i) > c.iou; })) {
          kept.push_back(i);
          out.push_back({b, k, i});
        }
      }
    }
  return out;
}

void expect_matches(const Nms& c, const std::string& what) {
  const Rows want = reference(c);
  int64_t count = -1;
  Rows got;
  ASSERT_EQ(run(c, c.batch * c.classes * c.n + 1, &count, &got), KernelStatus::kOk) << what;
  EXPECT_EQ(count, static_cast<int64_t>(want.size())) << what;
  EXPECT_EQ(got, want) << what;
}

TEST(NonMaxSuppression, HandCases) {
  Nms c;
  c.n = 4;
  // Corner boxes [y1, x1, y2, x2]: 0 and 1 overlap by IoU 0.6, 2 is apart, 3 is 0 flipped.
  c.boxes = {0, 0, 10, 10, 0, 2.5f, 10, 12.5f, 20, 20, 30, 30, 10, 10, 0, 0};
  c.scores = {0.9f, 0.8f, 0.7f, 0.95f};
  expect_matches(c, "flipped corners suppress like the box they are");
  Rows rows;
  int64_t count = 0;
  ASSERT_EQ(run(c, 12, &count, &rows), KernelStatus::kOk);
  EXPECT_EQ(rows, (Rows{{0, 0, 3}, {0, 0, 2}}));  // 3 (best) suppresses 0 (IoU 1) and 1 (IoU 0.6)
  c.iou = 0.7f;
  expect_matches(c, "IoU 0.6 below the threshold 0.7");
  c.scores = {0.5f, 0.5f, 0.5f, 0.5f};
  expect_matches(c, "equal scores: the lower index first");
  c.has_score = true;
  c.score_min = 0.5f;
  expect_matches(c, "a score equal to the threshold is not a candidate");
  c.score_min = 0.49f;
  c.most = 1;
  expect_matches(c, "one box per class");
  c.most = 0;
  expect_matches(c, "max_output_boxes_per_class 0: none");
  c.most = -1;
  expect_matches(c, "max_output_boxes_per_class absent: none");
  c.most = 100;
  c.iou = 0.f;
  c.boxes = {0, 0, 10, 10, 1, 1, 9, 9, 2, 2, 8, 8, 3, 3, 7, 7};
  c.scores = {0.1f, 0.9f, 0.3f, 0.7f};
  expect_matches(c, "nested boxes, IoU threshold 0: all but the best suppressed");
  ASSERT_EQ(run(c, 12, &count, &rows), KernelStatus::kOk);
  EXPECT_EQ(count, 1);
  c.scores = {NAN, 0.9f, NAN, 0.7f};
  c.has_score = false;
  expect_matches(c, "NaN scores are never candidates");
  // Center format [xc, yc, w, h]; a zero-area box suppresses nothing.
  c.center = 1;
  c.iou = 0.3f;
  c.boxes = {5, 5, 10, 10, 6, 5, 10, 10, 5, 5, 0, 0, 30, 30, 4, 4};
  c.scores = {0.9f, 0.8f, 0.95f, 0.1f};
  expect_matches(c, "center_point_box 1");
  c.n = 0;
  c.boxes.clear();
  c.scores.clear();
  expect_matches(c, "no boxes");
}

TEST(NonMaxSuppression, SeededSweepAgainstTheReference) {
  std::mt19937 rng(27);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  int nonempty = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Nms c;
    c.batch = 1 + static_cast<int64_t>(rng() % 3);
    c.classes = 1 + static_cast<int64_t>(rng() % 4);
    c.n = static_cast<int64_t>(rng() % 40);
    c.center = static_cast<int64_t>(rng() % 2);
    c.iou = 0.1f + 0.8f * u(rng);
    c.most = static_cast<int64_t>(rng() % 8) - 1;
    c.has_score = rng() % 2;
    c.score_min = u(rng);
    for (int64_t i = 0; i < c.batch * c.n; ++i) {
      const float x = 100 * u(rng), y = 100 * u(rng), w = 1 + 30 * u(rng), h = 1 + 30 * u(rng);
      if (c.center) c.boxes.insert(c.boxes.end(), {x, y, w, h});
      else if (rng() % 2) c.boxes.insert(c.boxes.end(), {y, x, y + h, x + w});
      else c.boxes.insert(c.boxes.end(), {y + h, x + w, y, x});
    }
    for (int64_t i = 0; i < c.batch * c.classes * c.n; ++i) c.scores.push_back(std::round(u(rng) * 50) / 50);  // ties
    expect_matches(c, "trial " + std::to_string(trial));
    nonempty += !reference(c).empty();
  }
  EXPECT_GT(nonempty, 150);
}

TEST(NonMaxSuppression, ACountAboveTheReservationFailsAndIsReported) {
  Nms c;
  c.n = 3;
  c.boxes = {0, 0, 1, 1, 5, 5, 6, 6, 10, 10, 11, 11};
  c.scores = {0.3f, 0.2f, 0.1f};
  int64_t count = 0;
  Rows rows;
  EXPECT_EQ(run(c, 2, &count, &rows), KernelStatus::kInvalidValue);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(rows, (Rows{{0, 0, 0}, {0, 0, 1}}));  // the rows that fit, written
}

TEST(NonMaxSuppression, ShapesAndGuards) {
  testing::SymPool s;
  core::ExprPool& p = s.pool;
  const int count = p.add_dim({"nms", 0, 96, 1, true});
  core::AttrStore a;
  a.set_int("dim", count);
  auto r = testing::infer(p, "NonMaxSuppression",
                          {testing::sym_input(DType::kF32, {s.batch, s.seq, p.constant(4)}),
                           testing::sym_input(DType::kF32, {s.batch, p.constant(3), s.seq})},
                          a);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[nms, 3]");
  auto bad = testing::infer(p, "NonMaxSuppression",
                            {testing::sym_input(DType::kF32, {s.batch, s.seq, p.constant(5)}),
                             testing::sym_input(DType::kF32, {s.batch, p.constant(3), s.seq})},
                            a);
  EXPECT_FALSE(bad.status.ok());
  auto no_dim = testing::infer(p, "NonMaxSuppression",
                               {testing::sym_input(DType::kF32, {s.batch, s.seq, p.constant(4)}),
                                testing::sym_input(DType::kF32, {s.batch, p.constant(3), s.seq})});
  EXPECT_FALSE(no_dim.status.ok());
}

}  // namespace
}  // namespace kiln::kernels
