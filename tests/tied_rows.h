#pragma once
// Detections of equal score: a rounding difference orders them either way (tv_fcos's noise image
// gives six detections of exactly one score). The zoo's tests (tests/e2e/zoo_test.cc) and the
// cross-machine replay (tests/cross/kiln_replay.cc) let such rows come in any order among
// themselves, and hold every other row to its place. Header-only: kiln_replay builds in the
// runtime-only profile.

#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

namespace kiln::testing {

/// One output of the detector's `r` rows (boxes, scores, labels): `row` values a row, read by
/// flat index from the output under test (`got`) and from the reference (`want`).
struct RowOutput {
  size_t row = 0;
  std::function<double(size_t)> got, want;
};

/// rows[i]: the reference row that row i under test matches. A row matches the first reference
/// row not yet matched whose score (`scores`, the reference's) is within `tol` of its own
/// reference score (relative: |a - b| <= tol (1 + |a|)) and whose values in every output are
/// within `tol` of row i's; when none does, itself (the comparison then reports the row).
inline std::vector<size_t> tied_rows(const std::vector<double>& scores, const std::vector<RowOutput>& outputs,
                                     double tol) {
  const size_t r = scores.size();
  auto same = [&](size_t i, size_t j) {
    for (const RowOutput& o : outputs)
      for (size_t e = 0; e < o.row; ++e) {
        const double w = o.want(j * o.row + e), g = o.got(i * o.row + e);
        if (!(std::abs(g - w) <= tol * (1.0 + std::abs(w))) && !(std::isnan(g) && std::isnan(w))) return false;
      }
    return true;
  };
  std::vector<size_t> rows(r);
  std::vector<bool> taken(r, false);
  for (size_t i = 0; i < r; ++i) {
    rows[i] = i;
    for (size_t j = 0; j < r; ++j)
      if (!taken[j] && std::abs(scores[i] - scores[j]) <= tol * (1.0 + std::abs(scores[i])) && same(i, j)) {
        rows[i] = j;
        break;
      }
    taken[rows[i]] = true;
  }
  return rows;
}

}  // namespace kiln::testing
