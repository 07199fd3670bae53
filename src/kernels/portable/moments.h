#pragma once
// Mean and 1/sqrt(variance + epsilon) of a row of floats, shared by InstanceNormalization
// and LayerNormalization. Two passes in double: the mean, then the variance around it (no
// cancellation).

#include <cmath>
#include <cstdint>

namespace kiln::kernels {

struct RowMoments {
  double mean;
  double inv_std;  ///< 1 / sqrt(population variance + eps)
};

inline RowMoments row_moments(const float* x, int64_t n, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += (x[i] - mean) * (x[i] - mean);
  return {mean, 1.0 / std::sqrt(sq / static_cast<double>(n) + eps)};
}

}  // namespace kiln::kernels
