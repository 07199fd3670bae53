// NonMaxSuppression (ONNX opset 10/11): per batch and per class, the boxes kept by greedy
// suppression, as rows (batch, class, box) of selected_indices [count, 3] (i64), batch by
// batch, class by class, each class's boxes in the order they were kept.
//
// Inputs: boxes [B, N, 4] f32, scores [B, C, N] f32; optional one-element
// max_output_boxes_per_class (i64; absent or <= 0: none kept), iou_threshold (f32, default
// 0) and score_threshold (f32; absent: every box is a candidate). Attribute
// center_point_box: 0 (default) boxes are two corners [y1, x1, y2, x2] of either diagonal;
// 1 they are [x_center, y_center, width, height].
//
// A class's candidates are its boxes with score > score_threshold, best score first (equal
// scores: the lower box index first). A candidate is kept unless its IoU with a box kept
// before it is > iou_threshold; at most max_output_boxes_per_class are kept. Boxes of zero
// or negative area never suppress or get suppressed. IoU is computed in f32 in the order
// ONNX Runtime computes it, so that ties at the threshold fall the same way. A NaN score is
// never a candidate; a box with a NaN coordinate overlaps nothing.
//
// count is a data-dependent dim (attrs: dim, as NonZero's), bounded at export by
// B * C * min(max_output_boxes_per_class, N). Scratch: two arrays of N indices.
#include <algorithm>
#include <cmath>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

struct Corners {
  float y0, x0, y1, x1;
};

Corners corners_of(const float* b, bool center) {
  if (center) {
    const float half_w = b[2] / 2, half_h = b[3] / 2;
    return {b[1] - half_h, b[0] - half_w, b[1] + half_h, b[0] + half_w};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

/// IoU(a, b) > threshold; false when they do not overlap or either has no area.
bool suppresses(const Corners& a, const Corners& b, float threshold) {
  const float ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
  if (!(ix1 > ix0)) return false;
  const float iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
  if (!(iy1 > iy0)) return false;
  const float inter = (ix1 - ix0) * (iy1 - iy0);
  const float area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  const float uni = area_a + area_b - inter;
  if (!(inter > 0.f) || !(area_a > 0.f) || !(area_b > 0.f) || !(uni > 0.f)) return false;
  return inter / uni > threshold;
}

/// Input i as one element of type T, or `def` when absent. False when present but not one
/// element.
template <typename T>
bool scalar_input(const RunCtx& c, size_t i, T def, T* out) {
  *out = def;
  if (!c.has_input(i)) return true;
  if (c.in(i).numel() != 1) return false;
  *out = c.in(i).as<T>()[0];
  return true;
}

Status check_one_element(ShapeCtx& c, size_t i, DType t, const char* name) {
  if (!c.has_input(i)) return ok_status();
  KILN_TRY(c.expect_dtype(i, t));
  const std::vector<ExprId>& s = c.in(i).shape;
  if (s.size() > 1 || (s.size() == 1 && !c.pool.is_const_value(s[0], 1)))
    return c.error(std::string(name) + " (input #" + std::to_string(i) + ") " + c.pool.shape_to_string(s) +
                   " must hold one element");
  return ok_status();
}

}  // namespace

Status nms_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(2, 5));
  KILN_ASSIGN_OR_RETURN(const ExprId count, data_dim_attr(c));
  KILN_TRY(c.expect_dtype(0, DType::kF32));
  KILN_TRY(c.expect_dtype(1, DType::kF32));
  core::ExprPool& p = c.pool;
  const std::vector<ExprId>& boxes = c.in(0).shape;
  const std::vector<ExprId>& scores = c.in(1).shape;
  if (boxes.size() != 3) return c.error("boxes " + p.shape_to_string(boxes) + " must be [batch, boxes, 4]");
  if (scores.size() != 3) return c.error("scores " + p.shape_to_string(scores) + " must be [batch, classes, boxes]");
  const std::string both = "(boxes " + p.shape_to_string(boxes) + " and scores " + p.shape_to_string(scores) + ")";
  KILN_TRY(c.require_eq(boxes[2], p.constant(4), "(boxes " + p.shape_to_string(boxes) + " hold 4 coordinates)"));
  KILN_TRY(c.require_eq(boxes[0], scores[0], "for one batch " + both));
  KILN_TRY(c.require_eq(boxes[1], scores[2], "for one box count " + both));
  KILN_TRY(check_one_element(c, 2, DType::kI64, "max_output_boxes_per_class"));
  KILN_TRY(check_one_element(c, 3, DType::kF32, "iou_threshold"));
  KILN_TRY(check_one_element(c, 4, DType::kF32, "score_threshold"));
  const int64_t center = c.attrs.get_int("center_point_box", 0);
  if (center != 0 && center != 1) return c.error("center_point_box " + std::to_string(center) + " must be 0 or 1");
  c.out(0).dtype = DType::kI64;
  c.out(0).shape = {count, p.constant(3)};
  c.scratch_bytes = p.mul(p.constant(2 * static_cast<int64_t>(sizeof(int64_t))), boxes[1]);
  return ok_status();
}

KernelStatus nms_run(const RunCtx& c) {
  const TensorView& boxes = c.in(0);
  const TensorView& scores = c.in(1);
  TensorView& y = c.out(0);
  if (!c.produced_dim || boxes.rank != 3 || scores.rank != 3 || boxes.dims[2] != 4 || scores.dims[0] != boxes.dims[0] ||
      scores.dims[2] != boxes.dims[1] || y.rank != 2 || y.dims[1] != 3 || y.dtype != DType::kI64)
    return KernelStatus::kInvalidValue;
  const int64_t batch = boxes.dims[0], n = boxes.dims[1], classes = scores.dims[1];
  int64_t most = 0;
  float iou = 0.f, score_min = 0.f;
  if (!scalar_input<int64_t>(c, 2, 0, &most) || !scalar_input<float>(c, 3, 0.f, &iou) ||
      !scalar_input<float>(c, 4, 0.f, &score_min))
    return KernelStatus::kInvalidValue;
  const bool thresholded = c.has_input(4);
  if (c.scratch_bytes < 2 * sizeof(int64_t) * static_cast<size_t>(n) || (n > 0 && !c.scratch))
    return KernelStatus::kInvalidValue;
  int64_t* order = static_cast<int64_t*>(c.scratch);  // a class's candidates, best first
  int64_t* kept = order + n;                           // the boxes it kept so far
  const bool center = c.attrs.get_int("center_point_box", 0) != 0;
  const int64_t capacity = y.dims[0];  // at the bound: bind takes a data dim at its max
  int64_t* out = y.as<int64_t>();
  int64_t count = 0;
  for (int64_t b = 0; b < batch && most > 0; ++b) {
    const float* bx = boxes.as<float>() + b * n * 4;
    for (int64_t cls = 0; cls < classes; ++cls) {
      const float* s = scores.as<float>() + (b * classes + cls) * n;
      int64_t candidates = 0;
      for (int64_t i = 0; i < n; ++i)
        if (!std::isnan(s[i]) && (!thresholded || s[i] > score_min)) order[candidates++] = i;
      std::sort(order, order + candidates, [s](int64_t i, int64_t j) { return s[i] > s[j] || (s[i] == s[j] && i < j); });
      int64_t n_kept = 0;
      for (int64_t k = 0; k < candidates && n_kept < most; ++k) {
        const Corners box = corners_of(bx + order[k] * 4, center);
        bool suppressed = false;
        for (int64_t j = 0; j < n_kept && !suppressed; ++j) suppressed = suppresses(corners_of(bx + kept[j] * 4, center), box, iou);
        if (suppressed) continue;
        kept[n_kept++] = order[k];
        if (count < capacity) {
          out[count * 3] = b;
          out[count * 3 + 1] = cls;
          out[count * 3 + 2] = order[k];
        }
        ++count;
      }
    }
  }
  *c.produced_dim = count;  // also when over the bound: the Method names it
  return count > capacity ? KernelStatus::kInvalidValue : KernelStatus::kOk;
}

}  // namespace kiln::kernels
